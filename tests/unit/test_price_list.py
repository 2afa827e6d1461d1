"""The price list shipped with the project: dated, found by the names providers answer with."""

from __future__ import annotations

from decimal import Decimal

import pytest

from workflows.llm import price_list


@pytest.mark.parametrize(
    ("model", "listed_as"),
    [
        ("gpt-4o", "gpt-4o"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("anthropic/claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("mistral-large-latest", "mistral-large"),
        ("gemini-2.5-flash", "gemini-2.5-flash"),
    ],
)
def test_a_model_is_found_by_its_name_then_its_bare_names(model: str, listed_as: str) -> None:
    listed = price_list.listed_price(model)
    assert listed is not None and listed.model == listed_as


@pytest.mark.parametrize("model", ["house-model", "gpt-4o-mini-turbo", "", "claude"])
def test_a_model_not_listed_has_no_listed_price(model: str) -> None:
    assert price_list.listed_price(model) is None


def test_the_list_is_dated_names_each_model_once_and_covers_the_well_known_vendors() -> None:
    models = [p.model for p in price_list.PRICE_LIST]
    assert len(models) == len(set(models))
    vendors = {p.vendor for p in price_list.PRICE_LIST}
    assert {"OpenAI", "Anthropic", "Google", "Mistral"} <= vendors
    assert price_list.LISTED_ON.isoformat() == "2025-09-01"
    assert all(p.input_per_million >= 0 and p.output_per_million >= 0 for p in price_list.PRICE_LIST)


def test_the_demo_model_is_free_and_says_why() -> None:
    demo = price_list.listed_price("demo-scripted")
    assert demo is not None
    assert (demo.input_per_million, demo.output_per_million) == (Decimal(0), Decimal(0))
    assert "not a real model" in demo.note
