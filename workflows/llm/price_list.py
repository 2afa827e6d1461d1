"""The price list shipped with Switchyard: well-known models of well-known providers, dated.

A call pays its provider's own price for the model, else the model's any-provider price from
the price table, else the price listed here (`prices.pick_price`): so the cost of a call to a
listed model is never unknown, out of the box. The list is editable the way every price is:
a price set in the table (on the LLM page or over the API) beats the listed one, and says
when it was set; the listed ones say the date they were read (`LISTED_ON`), so an admin
knows how old they are.

Prices are US dollars per million input and output tokens, each vendor's standard
(non-batch, non-cached, shortest-context) rate as its pricing page showed it on `LISTED_ON`.
Providers change them; a new list is a change of this module, with its new date.

A model is matched by its name as a call records it (the name the node asked for), then
without a router's `vendor/` prefix (`openai/gpt-4o`), then without a date or `-latest`
suffix (`gpt-4o-2024-08-06`, `mistral-large-latest`): the names providers answer with.
The demo provider's scripted model costs 0, and the list says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

LISTED_ON = date(2025, 9, 1)
# Anthropic's current models (Claude 4.5), read later than the rest: each says so in its note.
ANTHROPIC_LISTED_ON = date(2025, 11, 24)
_READ_LATER = f"read {ANTHROPIC_LISTED_ON.isoformat()}"

OPENAI, ANTHROPIC, GOOGLE, MISTRAL, DEEPSEEK = "OpenAI", "Anthropic", "Google", "Mistral", "DeepSeek"
DEMO = "Switchyard demo"


@dataclass(frozen=True)
class Listed:
    """One listed price: the vendor, the model and what a million tokens in and out cost."""

    vendor: str
    model: str
    input_per_million: Decimal
    output_per_million: Decimal
    note: str = ""


def _listed(
    vendor: str, model: str, input_per_million: str, output_per_million: str, note: str = ""
) -> Listed:
    return Listed(vendor, model, Decimal(input_per_million), Decimal(output_per_million), note)


PRICE_LIST: tuple[Listed, ...] = (
    _listed(OPENAI, "gpt-5", "1.25", "10"),
    _listed(OPENAI, "gpt-5-mini", "0.25", "2"),
    _listed(OPENAI, "gpt-5-nano", "0.05", "0.4"),
    _listed(OPENAI, "gpt-4.1", "2", "8"),
    _listed(OPENAI, "gpt-4.1-mini", "0.4", "1.6"),
    _listed(OPENAI, "gpt-4.1-nano", "0.1", "0.4"),
    _listed(OPENAI, "gpt-4o", "2.5", "10"),
    _listed(OPENAI, "gpt-4o-mini", "0.15", "0.6"),
    _listed(OPENAI, "o3", "2", "8"),
    _listed(OPENAI, "o4-mini", "1.1", "4.4"),
    _listed(OPENAI, "o3-mini", "1.1", "4.4"),
    _listed(ANTHROPIC, "claude-opus-4-5", "5", "25", _READ_LATER),
    _listed(ANTHROPIC, "claude-sonnet-4-5", "3", "15", _READ_LATER + "; prompts up to 200k tokens"),
    _listed(ANTHROPIC, "claude-haiku-4-5", "1", "5", _READ_LATER),
    _listed(ANTHROPIC, "claude-opus-4-1", "15", "75"),
    _listed(ANTHROPIC, "claude-opus-4", "15", "75"),
    _listed(ANTHROPIC, "claude-opus-4-0", "15", "75"),
    _listed(ANTHROPIC, "claude-sonnet-4", "3", "15"),
    _listed(ANTHROPIC, "claude-sonnet-4-0", "3", "15"),
    _listed(ANTHROPIC, "claude-3-7-sonnet", "3", "15"),
    _listed(ANTHROPIC, "claude-3-5-haiku", "0.8", "4"),
    _listed(GOOGLE, "gemini-2.5-pro", "1.25", "10", "prompts up to 200k tokens"),
    _listed(GOOGLE, "gemini-2.5-flash", "0.3", "2.5"),
    _listed(GOOGLE, "gemini-2.5-flash-lite", "0.1", "0.4"),
    _listed(GOOGLE, "gemini-2.0-flash", "0.1", "0.4"),
    _listed(MISTRAL, "mistral-large", "2", "6"),
    _listed(MISTRAL, "mistral-medium", "0.4", "2"),
    _listed(MISTRAL, "mistral-small", "0.1", "0.3"),
    _listed(MISTRAL, "codestral", "0.3", "0.9"),
    _listed(DEEPSEEK, "deepseek-chat", "0.27", "1.1"),
    _listed(DEEPSEEK, "deepseek-reasoner", "0.55", "2.19"),
    _listed(DEMO, "demo-scripted", "0", "0", "the demo provider is scripted, not a real model: free"),
)

BY_MODEL: dict[str, Listed] = {listed.model: listed for listed in PRICE_LIST}

# What providers append to a model's name: a date (-2024-08-06, -20250514) or -latest.
_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def listed_names(model: str) -> list[str]:
    """The names under which `model` may be listed, most specific first."""
    names = [model]
    bare = model.rsplit("/", 1)[-1]
    for name in (bare, _SUFFIX.sub("", bare)):
        if name not in names:
            names.append(name)
    return names


def listed_price(model: str) -> Listed | None:
    """Return the listed price of `model` (by its name, then its bare names), or None."""
    for name in listed_names(model):
        if name in BY_MODEL:
            return BY_MODEL[name]
    return None
