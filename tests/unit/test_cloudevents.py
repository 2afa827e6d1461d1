"""CloudEvents 1.0 read by hand (core/cloudevents.py) and what a subscription makes of one (core/topics.py)."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core import cloudevents as ce, topics

EVENT = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t.created"}


def test_a_structured_event_keeps_its_attributes_extensions_and_data() -> None:
    event = ce.from_structured({**EVENT, "time": "2026-11-27T08:00:00Z", "tenant": "acme", "data": {"n": 1}})
    assert (event.id, event.source, event.type, event.data) == ("1", "/s", "t.created", {"n": 1})
    assert event.time is not None and event.time.utcoffset() is not None
    assert event.extensions == {"tenant": "acme"}


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ({"specversion": "1.0"}, ("id", "source", "type")),
        ({**EVENT, "id": ""}, ("id",)),
        ({"id": "1", "source": "/s", "type": "t"}, ("specversion",)),
    ],
)
def test_missing_required_attributes_are_all_named(body: dict[str, Any], missing: tuple[str, ...]) -> None:
    with pytest.raises(ce.BadEvent) as refused:
        ce.from_structured(body)
    assert refused.value.missing == missing
    assert ", ".join(missing) in refused.value.message


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"specversion": "0.3"}, "specversion"),
        ({"time": "yesterday"}, "time"),
        ({"time": "2026-11-27T08:00:00"}, "time"),  # no offset
        ({"Bad_Name": "x"}, "Bad_Name"),
        ({"nested": {"a": 1}}, "nested"),
        ({"id": "x" * 201}, "id"),
    ],
)
def test_bad_attributes_are_refused_naming_them(extra: dict[str, Any], named: str) -> None:
    with pytest.raises(ce.BadEvent, match=named):
        ce.from_structured({**EVENT, **extra})


def test_binary_mode_reads_ce_headers_whatever_their_case() -> None:
    headers = {"Ce-Specversion": "1.0", "CE-ID": "9", "ce-source": "/s", "ce-type": "t", "ce-tenant": "acme"}
    event = ce.from_binary(headers, b'{"n": 2}', "application/json; charset=utf-8")
    assert (event.id, event.data, event.extensions) == ("9", {"n": 2}, {"tenant": "acme"})
    assert ce.from_binary(headers, b"plain words", "text/plain").data == "plain words"
    with pytest.raises(ce.BadEvent) as refused:
        ce.from_binary({"ce-specversion": "1.0", "ce-id": "9"}, b"", "")
    assert refused.value.missing == ("source", "type") and "ce-source, ce-type" in refused.value.message


def test_a_batch_names_the_event_that_is_wrong() -> None:
    with pytest.raises(ce.BadEvent) as refused:
        ce.from_batch([EVENT, {"specversion": "1.0", "id": "2"}])
    assert refused.value.where == "[1]" and refused.value.missing == ("source", "type")
    with pytest.raises(ce.BadEvent, match="at most 1000"):
        ce.from_batch([EVENT] * 1001)


def test_filters_and_mappings_read_the_event_as_input_and_its_data_as_output() -> None:
    event = ce.from_structured({**EVENT, "data": {"total": 120, "id": "o-1"}}).as_condition_input()
    assert topics.admits("output.total > 100 and input.type == 't.created'", event)
    assert not topics.admits("output.total > 500", event)
    assert topics.admits("", event)
    assert topics.run_input({"order": "output.id", "src": "input.source", "none": "output.x"}, event) == {
        "order": "o-1",
        "src": "/s",
        "none": None,
    }
    assert topics.run_input(None, event) == {"total": 120, "id": "o-1"}
    assert topics.run_input(None, {**event, "data": [1]}) == {"data": [1]}


@pytest.mark.parametrize("name", ["orders.created", "com.github/pull_request:opened", "a"])
def test_topic_names_that_are_fine(name: str) -> None:
    assert topics.topic_problem(name) is None


@pytest.mark.parametrize("name", ["", ".hidden", "has space", "x" * 201])
def test_topic_names_that_are_refused(name: str) -> None:
    assert topics.topic_problem(name) is not None
