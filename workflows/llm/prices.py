"""The price table: which price applies to a call, and what a provider's models cost.

Prices are per million input and output tokens, keyed by provider and model; a row without
a provider is the model's price through any provider. Below the table, the price list
shipped with the project (`price_list.py`, dated) prices well-known models out of the box.
`pick_price` is the one decision.

Every LLM call is priced when it is recorded (usage.py), and a cost budget prices its worst
case before it (budgets/ledger.py): the price a call picks is remembered per provider and
model while the providers' epoch holds (providers.EPOCH, runtime/epochs.py: replaced whenever
a price or a provider is saved or deleted, so a new price counts from the next call in every
process; a change no signal sees within providers.FRESH_FOR seconds). At 500 calls a second a worker read
the table 500 times a second for the same row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from django.db.models import F, Q, QuerySet

from workflows.llm.price_list import PRICE_LIST, Listed, listed_price
from workflows.llm.providers import EPOCH
from workflows.runtime import epochs
from workflows.store.models import LLMPrice, LLMProvider

MILLION = Decimal(1_000_000)
Source = Literal["provider", "any_provider", "listed"]
OWN: Source = "provider"
ANY_PROVIDER: Source = "any_provider"
LISTED: Source = "listed"


def pick_price(prices: Iterable[LLMPrice], provider: str, model: str) -> LLMPrice | None:
    """Return the price that applies to a call to `model` through `provider`: the one decision.

    In order: the provider's own price for the model; else the model's price for any
    provider (the row without a provider); else the shipped list's price (price_list.py: an
    unsaved row, `is_listed`); else None, and the cost is unknown (NULL, shown as "unknown",
    never 0). `prices` may hold other rows too (with their providers selected along); they
    are ignored. A provider is matched by name, as calls record it.
    """
    own = anyone = None
    for price in prices:
        if price.model != model:
            continue
        if price.provider_id is None:
            anyone = price
        elif price.provider is not None and price.provider.name == provider:  # it is: provider_id is set
            own = price
    if own is not None or anyone is not None:
        return own if own is not None else anyone
    return listed_row(model)


def listed_row(model: str) -> LLMPrice | None:
    """The shipped list's price of `model` as an unsaved any-provider row, or None."""
    listed = listed_price(model)
    if listed is None:
        return None
    return LLMPrice(
        provider=None,
        model=model,
        input_per_million=listed.input_per_million,
        output_per_million=listed.output_per_million,
    )


def is_listed(price: LLMPrice) -> bool:
    """Whether a picked price is the shipped list's rather than a row of the table."""
    return price.pk is None


def read_price(key: tuple[str, str]) -> LLMPrice | None:
    """Read the rows that could apply to one call and pick its price (`pick_price`)."""
    provider, model = key
    rows = LLMPrice.objects.select_related("provider").filter(
        Q(provider__isnull=True) | Q(provider__name=provider), model=model
    )
    return pick_price(rows, provider, model)


PICKED: epochs.Remembered[LLMPrice | None] = epochs.Remembered(EPOCH, read_price, at_most=4096)


def price_of(provider: str, model: str) -> LLMPrice | None:
    """The price of a call to `model` through `provider` (`pick_price`), remembered while the
    prices' epoch holds (see above). The row is shared: read it, never change it."""
    return PICKED.get((provider, model))


def cost_of(provider: str, model: str, input_tokens: int | None, output_tokens: int | None) -> Decimal | None:
    """Return the cost of a call from the price table; None when the price or a count is unknown."""
    price = price_of(provider, model)
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * price.input_per_million + output_tokens * price.output_per_million) / MILLION


def price_table() -> QuerySet[LLMPrice]:
    """Every price, as pages and the API list them: by model, any provider first, then by provider name."""
    return LLMPrice.objects.select_related("provider").order_by(
        "model", F("provider__name").asc(nulls_first=True)
    )


@dataclass(frozen=True)
class OfferedPrice:
    """What calls to one model through one provider cost; `price` None: unknown."""

    provider: str
    model: str
    price: LLMPrice | None
    offered: bool  # False: a price of the provider for a model it no longer offers

    @property
    def source(self) -> Source | None:
        """OWN, ANY_PROVIDER, LISTED, or None when the price is unknown."""
        if self.price is None:
            return None
        if is_listed(self.price):
            return LISTED
        return ANY_PROVIDER if self.price.provider_id is None else OWN


def offered_prices(providers: Iterable[LLMProvider]) -> list[OfferedPrice]:
    """Each provider's models (offered, or priced for it) with the price its calls would pay."""
    table = list(LLMPrice.objects.select_related("provider"))
    found = []
    for row in providers:
        offered = row.models_offered()
        own = [p.model for p in table if p.provider_id == row.pk and p.model not in offered]
        found += [
            OfferedPrice(row.name, model, pick_price(table, row.name, model), model in offered)
            for model in [*offered, *sorted(own)]
        ]
    return found


@dataclass(frozen=True)
class ShippedPrice:
    """A price of the shipped list, and whether the table's any-provider price of its model beats it."""

    listed: Listed
    overridden: bool


def shipped_prices() -> list[ShippedPrice]:
    """The shipped list as the LLM page shows it, in its own order (by vendor)."""
    priced = set(LLMPrice.objects.filter(provider__isnull=True).values_list("model", flat=True))
    return [ShippedPrice(listed, listed.model in priced) for listed in PRICE_LIST]
