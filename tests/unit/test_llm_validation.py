"""The definition check of LLM nodes against the known providers (passed in: the core stays pure)."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core.definition import Limits, validate_definition

PROVIDERS = {"openai": ("gpt-4o", "gpt-4o-mini"), "demo": ("demo-1",), "default": ()}
LIMITS = Limits(llm_providers=PROVIDERS, llm_default_provider="demo")


def one_node(config: dict[str, Any], handler: str = "llm.chat") -> dict[str, Any]:
    return {"nodes": [{"id": "ask", "handler": handler, "config": {"prompt": "hi", **config}}], "edges": []}


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"provider": "openai"},
        {"provider": "openai", "model": "gpt-4o"},
        {"model": "demo-1"},
        {"provider": "default", "model": "anything"},
    ],
)
def test_known_providers_and_offered_models_pass(config: dict[str, Any]) -> None:
    assert validate_definition(one_node(config), None, LIMITS) == []


def test_an_unknown_provider_is_refused_naming_the_field_and_the_node() -> None:
    (issue,) = validate_definition(one_node({"provider": "anthropic"}), None, LIMITS)
    assert (
        issue.path == "nodes[0].config.provider" and issue.code == "unknown_provider" and issue.node == "ask"
    )
    assert "anthropic" in issue.message and "default, demo, openai" in issue.message


def test_a_model_the_provider_does_not_offer_is_refused_naming_the_field() -> None:
    (issue,) = validate_definition(one_node({"provider": "openai", "model": "gpt-5"}), None, LIMITS)
    assert issue.path == "nodes[0].config.model" and issue.code == "unknown_model"
    assert "'openai' does not offer model 'gpt-5'" in issue.message and "gpt-4o, gpt-4o-mini" in issue.message


def test_a_node_without_provider_is_checked_against_the_default_provider() -> None:
    (issue,) = validate_definition(one_node({"model": "gpt-4o"}), None, LIMITS)
    assert issue.path == "nodes[0].config.model" and "'demo' does not offer" in issue.message


def test_every_llm_kind_is_checked_and_other_handlers_are_not() -> None:
    assert (
        validate_definition(one_node({"provider": "nope"}, "llm.agent"), None, LIMITS)[0].code
        == "unknown_provider"
    )
    assert validate_definition(one_node({"provider": "nope"}, "core.echo"), None, LIMITS) == []


def test_without_known_providers_nothing_is_checked() -> None:
    assert validate_definition(one_node({"provider": "nope"}), None, Limits()) == []


def test_a_fallback_naming_an_unknown_provider_is_refused_naming_its_field() -> None:
    config = {"provider": "openai", "fallbacks": [{"provider": "demo"}, {"provider": "anthropic"}]}
    (issue,) = validate_definition(one_node(config), None, LIMITS)
    assert issue.path == "nodes[0].config.fallbacks[1].provider" and issue.code == "unknown_provider"
    assert "anthropic" in issue.message and issue.node == "ask"


def test_a_fallback_model_the_provider_does_not_offer_is_refused_naming_its_field() -> None:
    config = {"fallbacks": [{"provider": "openai", "model": "gpt-5"}]}
    (issue,) = validate_definition(one_node(config), None, LIMITS)
    assert issue.path == "nodes[0].config.fallbacks[0].model" and issue.code == "unknown_model"


def test_known_fallbacks_pass() -> None:
    config = {
        "provider": "openai",
        "fallbacks": [{"provider": "demo", "model": "demo-1"}, {"provider": "openai"}],
    }
    assert validate_definition(one_node(config), None, LIMITS) == []
