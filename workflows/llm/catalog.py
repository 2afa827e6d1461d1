"""Providers and prices as admins change them, each change with its audit entry.

One decision for the API and the pages: what a provider may hold (`check_provider`), that the
key is write-only (`api_key=None` keeps the stored one; the audit entry records only whether
it changed), that at most one provider is the default, and what a price may be for
(`price_key`: any provider, or a provider and a model it offers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction

from workflows.core import egress
from workflows.handlers import egress as egress_transport
from workflows.llm import providers
from workflows.store import audit
from workflows.store.errors import Conflict, Invalid, NotFound
from workflows.store.models import LLMPrice, LLMProvider
from workflows.store.secrets import Secret
from workflows.store.texts import is_text

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,59}")
NAME_HELP = "lowercase letters, digits, '-' and '_', starting with a letter, at most 60 characters"
MAX_TIMEOUT_SECONDS = 3600.0
MAX_MODELS = 100
KINDS = tuple(kind for kind, _ in LLMProvider.KINDS)


@dataclass(frozen=True)
class ProviderChange:
    """What an admin sets on a provider. `api_key` None keeps the stored key; "" clears it."""

    name: str
    base_url: str
    default_model: str
    models: tuple[str, ...] = ()
    timeout_seconds: float = 60.0
    is_default: bool = False
    api_key: str | None = None
    kind: str | None = None  # None: keep the stored kind (a new provider: OpenAI-compatible)


def is_provider_name(name: str) -> bool:
    return NAME_PATTERN.fullmatch(name) is not None


def is_model_name(model: str) -> bool:
    """1 to 200 characters, no control characters (PostgreSQL stores no NUL)."""
    return 0 < len(model) <= 200 and is_text(model) and not any(c < " " for c in model)


def is_base_url(url: str) -> bool:
    if len(url) > 500 or not is_text(url) or any(c <= " " for c in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # "Invalid IPv6 URL": a "[" with no "]", say
        return False
    return parts.scheme in ("http", "https") and bool(host) and not parts.username and not parts.query


def check_provider(change: ProviderChange) -> None:
    """Refuse a provider that could not serve, naming the field."""
    if not is_provider_name(change.name):
        raise Invalid(f"name: use {NAME_HELP}; got {change.name[:80]!r}.")
    if change.kind is not None and change.kind not in KINDS:
        raise Invalid(f"kind: give one of {', '.join(KINDS)}; got {str(change.kind)[:40]!r}.")
    if not is_base_url(change.base_url):
        raise Invalid(
            "base_url: give an http:// or https:// URL (at most 500 characters) with a host, "
            "no credentials, no query, no spaces."
        )
    # Admins choose providers but every non-admin's llm.* node calls them: the same policy
    # holds (and again when each connection opens, whatever the name resolves to by then).
    refusal = egress.literal_refusal(change.base_url, egress_transport.current_policy())
    if refusal is not None:
        raise Invalid(f"base_url: {refusal}.")
    if not change.default_model.strip() or len(change.default_model) > 200:
        raise Invalid("default_model: give the model name (1 to 200 characters).")
    if len(change.models) > MAX_MODELS or any(not m.strip() or len(m) > 200 for m in change.models):
        raise Invalid(f"models: give at most {MAX_MODELS} model names of 1 to 200 characters.")
    if not 0 < change.timeout_seconds <= MAX_TIMEOUT_SECONDS:
        raise Invalid(
            f"timeout_seconds: give a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS:g}."
        )
    if change.api_key is not None and len(change.api_key) > 4000:
        raise Invalid("api_key: at most 4000 characters.")
    named = providers.secret_named(change.api_key or "")
    if named is not None and not Secret.objects.filter(name=named).exists():
        raise Invalid(f"api_key: there is no secret named {named!r}; set it under Secrets first.")


def get_provider(name: str) -> LLMProvider:
    row = LLMProvider.objects.filter(name=name).first()
    if row is None:
        raise NotFound(f"There is no LLM provider named {name[:80]!r}.")
    return row


def save_provider(change: ProviderChange, actor: Any = None, *, existing: str | None = None) -> LLMProvider:
    """Create a provider (existing None) or change the one named `existing`."""
    check_provider(change)
    try:
        with transaction.atomic():
            row = LLMProvider() if existing is None else lock_provider(existing)
            key_changed = apply_change(row, change)
            if change.is_default:
                LLMProvider.objects.exclude(pk=row.pk).filter(is_default=True).update(is_default=False)
            row.save()
            action = "llm_provider.create" if existing is None else "llm_provider.update"
            audit.record(
                actor,
                action,
                row,
                name=row.name,
                kind=row.kind,
                key_changed=key_changed,
                is_default=row.is_default,
            )
    except IntegrityError:
        raise Conflict(f"name: a provider named {change.name!r} already exists.") from None
    return row


def lock_provider(name: str) -> LLMProvider:
    row = LLMProvider.objects.select_for_update().filter(name=name).first()
    if row is None:
        raise NotFound(f"There is no LLM provider named {name[:80]!r}.")
    return row


def apply_change(row: LLMProvider, change: ProviderChange) -> bool:
    """Copy a change onto a row; return whether the key changed (its value is never returned)."""
    row.name = change.name
    if change.kind is not None:
        row.kind = change.kind
    row.base_url = change.base_url
    row.default_model = change.default_model.strip()
    row.offered_models = [m.strip() for m in change.models if m.strip() != row.default_model]
    row.timeout_seconds = change.timeout_seconds
    row.is_default = change.is_default
    if change.api_key is None:
        return False
    row.api_key = change.api_key
    return True


def delete_provider(name: str, actor: Any = None) -> None:
    """Delete a provider and its own prices; its recorded calls keep their provider and cost."""
    with transaction.atomic():
        row = lock_provider(name)
        prices = {p.model: [str(p.input_per_million), str(p.output_per_million)] for p in row.prices.all()}
        audit.record(actor, "llm_provider.delete", row, name=row.name, prices_deleted=prices)
        row.delete()


def parse_price(value: Any, field: str) -> Decimal:
    """Read a price per million tokens: a number from 0 to 1,000,000."""
    try:
        price = Decimal(str(value).strip())
    except InvalidOperation:
        raise Invalid(f"{field}: give a price per million tokens, like 0.15.") from None
    if not price.is_finite() or not 0 <= price <= 1_000_000:
        raise Invalid(f"{field}: give a price from 0 to 1000000 per million tokens.")
    return price.quantize(Decimal("0.0001"))


def price_provider(provider: str | None) -> LLMProvider | None:
    """The provider a price is for, by name; None or "" means any provider."""
    if not provider:
        return None
    row = LLMProvider.objects.filter(name=provider).first() if is_provider_name(provider) else None
    if row is None:
        raise NotFound(f"provider: there is no LLM provider named {provider[:80]!r}.")
    return row


def checked_model(model: str) -> str:
    """A model name as prices key it, stripped; Invalid naming `model` otherwise."""
    model = model.strip()
    if not is_model_name(model):
        raise Invalid("model: give the model name (1 to 200 characters, no control characters).")
    return model


def price_key(provider: str | None, model: str) -> tuple[LLMProvider | None, str]:
    """Check what a price is for: any provider, or a provider and a model it offers."""
    model = checked_model(model)
    row = price_provider(provider)
    if row is not None and model not in row.models_offered():
        raise Invalid(
            f"model: provider {row.name!r} does not offer {model[:80]!r} (it offers "
            f"{', '.join(row.models_offered())}); add the model to the provider first."
        )
    return row, model


def save_price(
    model: str, input_price: Any, output_price: Any, actor: Any = None, *, provider: str | None = None
) -> LLMPrice:
    """Set the price per million input and output tokens of a model, for one provider or any."""
    row, model = price_key(provider, model)
    values = {
        "input_per_million": parse_price(input_price, "input_per_million"),
        "output_per_million": parse_price(output_price, "output_per_million"),
    }
    with transaction.atomic():
        price, _ = LLMPrice.objects.update_or_create(provider=row, model=model, defaults=values)
        audit.record(
            actor,
            "llm_price.set",
            price,
            model=model,
            provider=row.name if row else None,
            **{k: str(v) for k, v in values.items()},
        )
    return price


def find_price(model: str, provider: str | None = None) -> LLMPrice | None:
    """The price set for a model through one provider (by name), or for any provider (None or "").

    None too for names no price can have (control characters, NUL): nothing to find.
    """
    if not is_model_name(model) or (provider and not is_provider_name(provider)):
        return None
    lookup: dict[str, Any] = {"provider__name": provider} if provider else {"provider__isnull": True}
    return LLMPrice.objects.select_related("provider").filter(model=model, **lookup).first()


def get_price(model: str, provider: str | None = None) -> LLMPrice:
    """Read the price set for a model through one provider (or for any provider, when None)."""
    price_provider(provider)
    price = find_price(model, provider)
    if price is None:
        raise NotFound(f"There is no price for {price_label(provider, model)}.")
    return price


def delete_price(model: str, actor: Any = None, *, provider: str | None = None) -> None:
    """Delete a price: the calls it applied to fall back to the any-provider price, or unknown."""
    found = get_price(model, provider)
    with transaction.atomic():
        price = LLMPrice.objects.select_for_update().filter(pk=found.pk).first()
        if price is None:  # deleted by someone else meanwhile
            raise NotFound(f"There is no price for {price_label(provider, model)}.")
        audit.record(actor, "llm_price.delete", price, model=price.model, provider=provider or None)
        price.delete()


def price_label(provider: str | None, model: str) -> str:
    """Name a price for people: "model 'm' through provider 'p'" or "model 'm' for any provider"."""
    where = f"through provider {provider[:80]!r}" if provider else "for any provider"
    return f"model {model[:80]!r} {where}"
