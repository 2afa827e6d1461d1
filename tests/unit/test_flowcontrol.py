"""Flow control's pure parts (core/flowcontrol.py), the definition's checks of keys, and the
response cache's key (handlers/caching.py): no database, no Redis."""

from __future__ import annotations

import pytest

from workflows.core.definition import parse_definition, validate_definition
from workflows.core.flowcontrol import (
    WORKFLOW_SCOPE,
    bucket,
    check_key_path,
    fair_order,
    resolve_key,
    split_bucket,
)
from workflows.handlers import caching


@pytest.mark.parametrize(
    ("path", "run_input", "upstream", "expected"),
    [
        ("input.customer", {"customer": "acme"}, {}, "acme"),
        ("input.customer.id", {"customer": {"id": 42}}, {}, "42"),
        ("input.flag", {"flag": True}, {}, "true"),
        ("input.customer", {}, {}, "fallback"),
        ("input.customer", {"customer": None}, {}, "fallback"),
        ("input.customer", {"customer": {"id": 1}}, {}, "fallback"),
        ("upstream.lookup.tenant", {}, {"lookup": {"tenant": "t-9"}}, "t-9"),
        ("upstream.lookup.tenant", {}, {}, "fallback"),
    ],
)
def test_a_key_resolves_to_its_scalar_as_text_or_to_the_default(path, run_input, upstream, expected) -> None:
    assert resolve_key(path, run_input, upstream, "fallback") == expected


def test_a_key_value_is_cut_to_its_maximum_length() -> None:
    assert len(resolve_key("input.k", {"k": "x" * 1000}, {})) == 200


@pytest.mark.parametrize(
    ("path", "predecessors", "problem"),
    [
        ("input.customer_id", None, None),
        ("upstream.a.tenant", ["a"], None),
        ("customer_id", None, "is not a key path"),
        ("{input.customer_id}", None, "is not a key path"),
        ("upstream.a.tenant", None, "a workflow's key may use only input"),
        ("upstream.b.tenant", ["a"], "not a direct predecessor"),
        ("upstream.a", ["a"], "names no field"),
    ],
)
def test_key_paths_that_cannot_resolve_are_explained(path, predecessors, problem) -> None:
    found = check_key_path(path, predecessors)
    assert found is None if problem is None else problem in (found or "")


def test_a_key_the_input_schema_does_not_declare_is_refused() -> None:
    assert "does not declare" in (check_key_path("input.tenant", None, {"customer"}) or "")


def test_the_fair_pick_serves_keys_in_turns_each_in_its_own_order() -> None:
    items = [("big", 1), ("big", 2), ("big", 3), ("big", 4), ("small", 5), ("other", 6), ("small", 7)]
    picked = fair_order(items, lambda item: item[0])
    assert [n for _, n in picked] == [1, 5, 6, 2, 7, 3, 4]


def test_with_a_key_holding_90_percent_the_others_are_served_within_the_first_turns() -> None:
    items = [("big", n) for n in range(90)] + [(f"k{n}", n) for n in range(10)]
    picked = fair_order(items, lambda item: item[0])
    assert max(picked.index(item) for item in items if item[0] != "big") == 10


def test_a_stored_key_names_its_scope() -> None:
    assert split_bucket(bucket("call", "a:b")) == ("call", "a:b")
    assert bucket(WORKFLOW_SCOPE, "x") == "*:x"


def test_a_workflow_key_applies_to_nodes_without_their_own() -> None:
    graph = parse_definition(
        {
            "nodes": [
                {"id": "a", "handler": "h"},
                {"id": "b", "handler": "h", "concurrency": {"key": "input.user", "limit": 1}},
            ],
            "concurrency": {"key": "input.customer", "limit": 3},
        }
    )
    a, b = graph.nodes["a"].concurrency, graph.nodes["b"].concurrency
    assert a is not None and (a.scope, a.key, a.limit) == (WORKFLOW_SCOPE, "input.customer", 3)
    assert b is not None and (b.scope, b.key, b.limit) == ("b", "input.user", 1)
    assert graph.nodes["a"].limited


def test_bad_flow_declarations_are_refused_naming_the_field() -> None:
    issues = validate_definition(
        {
            "nodes": [{"id": "a", "handler": "h", "concurrency": {"key": "input.c", "limit": 0}}],
            "debounce": {"key": "input.c", "window_s": 5},
            "singleton": {"key": "upstream.a.x", "mode": "sometimes"},
        }
    )
    assert {i.path for i in issues} == {"nodes[0].concurrency.limit", "singleton.mode"}


def test_debounce_and_singleton_together_are_refused() -> None:
    issues = validate_definition(
        {
            "nodes": [{"id": "a", "handler": "h"}],
            "debounce": {"key": "input.c", "window_s": 5},
            "singleton": {"key": "input.c"},
        }
    )
    assert [i.path for i in issues] == ["singleton"]


def test_a_cache_key_holds_no_secret_in_clear_and_changes_with_it() -> None:
    first = caching.http_key_request(
        "https://api.test/x", {"Authorization": "Bearer sk-live-1", "Idempotency-Key": "1:a:1"}
    )
    again = caching.http_key_request(
        "https://api.test/x", {"authorization": "Bearer sk-live-1", "Idempotency-Key": "2:a:1"}
    )
    rotated = caching.http_key_request("https://api.test/x", {"Authorization": "Bearer sk-live-2"})
    assert caching.key_of(first) == caching.key_of(again), "the attempt's own headers are no part of it"
    assert caching.key_of(first) != caching.key_of(rotated)
    assert "sk-live" not in caching.key_of(first)
