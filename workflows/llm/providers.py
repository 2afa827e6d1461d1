"""Named LLM providers: where a node's `provider` and `model` resolve to a URL and a key.

A provider row marked `is_default` serves nodes that name none; without one, the
LLM_BASE_URL / LLM_API_KEY / LLM_MODEL settings act as a provider named "default". The key
leaves this module only inside an `Endpoint`, which the client sends and redacts. A key
stored as a reference to the secrets store, exactly `{secret.NAME}`, is read from the store
when the endpoint is resolved (in the worker, at call time), so one secret can serve several
providers and rotate without touching them.

Every call resolves its node's provider: the rows are remembered while the providers' epoch
holds (runtime/epochs.py: replaced whenever a provider or a price is saved or deleted, so a
change counts from the next call in every process; one no signal sees, such as a
`QuerySet.update()`, within FRESH_FOR seconds). The key itself is never remembered: a
`{secret.NAME}` reference is read from the store at every resolution, as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from workflows.core import secretrefs
from workflows.handlers import builtin
from workflows.handlers.registry import HandlerError
from workflows.runtime import epochs
from workflows.store import secrets
from workflows.store.models import LLMProvider

SETTINGS_PROVIDER = "default"
DEMO_LABEL = "Demo provider (scripted, not a real model)"


@dataclass(frozen=True)
class Endpoint:
    """Where one call goes. `api_key` is secret: never put it in a message or an output."""

    provider: str
    base_url: str
    api_key: str = field(repr=False)
    model: str
    timeout_seconds: float
    demo: bool
    kind: str = LLMProvider.OPENAI  # which API it speaks: client.complete goes by it


@dataclass(frozen=True)
class ProviderInfo:
    """What the editor and the validator may know of a provider: no URL, no key."""

    name: str
    default_model: str
    models: list[str]
    is_default: bool
    demo: bool

    @property
    def label(self) -> str:
        return f"{self.name} — {DEMO_LABEL}" if self.demo else self.name


def settings_endpoint(model: str | None) -> Endpoint:
    """The LLM_* settings as the provider named "default"."""
    conf = builtin.switchyard_settings()
    return Endpoint(
        provider=SETTINGS_PROVIDER,
        base_url=str(conf["LLM_BASE_URL"]),
        api_key=str(conf["LLM_API_KEY"] or ""),
        model=model or str(conf["LLM_MODEL"]),
        timeout_seconds=float(conf["HTTP_TIMEOUT_SECONDS"]),
        demo=False,
    )


KEY_REFERENCE = re.compile(r"^\{secret\.(" + secretrefs.NAME_PATTERN + r")\}$")


def secret_named(api_key: str) -> str | None:
    """The secret a stored key refers to (`{secret.NAME}`), or None for a key stored as it is."""
    match = KEY_REFERENCE.match(api_key or "")
    return match[1] if match else None


def key_of(row: LLMProvider) -> str:
    """The key to send: as stored, or the value of the secret it refers to, read now."""
    name = secret_named(row.api_key)
    if name is None:
        return row.api_key
    value = secrets.reveal(name)
    if value is None:
        raise HandlerError(
            f"config.provider: provider {row.name!r} takes its api_key from secret {name!r}, "
            "which does not exist; an admin sets it under Secrets.",
            retryable=False,
        )
    return value


def endpoint_of(row: LLMProvider, model: str | None) -> Endpoint:
    return Endpoint(
        provider=row.name,
        base_url=row.base_url,
        api_key=key_of(row),
        model=model or row.default_model,
        timeout_seconds=row.timeout_seconds,
        demo=row.demo,
        kind=row.kind,
    )


FRESH_FOR = 5.0  # seconds: the bound for provider and price changes no signal reports
# One epoch for the providers and the price table (prices.py): a price is keyed by a
# provider's name, and one Redis read a call serves both.
EPOCH = epochs.Epoch("sy:llmcatalog:epoch", FRESH_FOR)


def read_row(name: str) -> LLMProvider | None:
    """The provider named `name`, or the default one for ""."""
    if name == "":
        return LLMProvider.objects.filter(is_default=True).first()
    return LLMProvider.objects.filter(name=name).first()


ROWS: epochs.Remembered[LLMProvider | None] = epochs.Remembered(EPOCH, read_row, at_most=1024)


def watch_changes() -> None:
    """Replace the epoch when a provider or a price changes (workflows/apps.py)."""
    from workflows.store.models import LLMPrice

    EPOCH.watch((LLMProvider, LLMPrice), "llmcatalog")


def resolve(provider: str | None, model: str | None) -> Endpoint:
    """Return the endpoint for a node's provider and model; HandlerError naming what is unknown.

    The row is remembered (see above) and shared: read it, never change it."""
    if provider is None or provider == "":
        row = ROWS.get("")
        if row is None:
            return settings_endpoint(model)
    else:
        row = ROWS.get(provider)
        if row is None:
            if provider == SETTINGS_PROVIDER and not LLMProvider.objects.filter(is_default=True).exists():
                return settings_endpoint(model)
            raise HandlerError(
                f"config.provider: no LLM provider named {provider!r}; an admin adds it under Providers."
            )
    if model and model not in row.models_offered():
        raise HandlerError(
            f"config.model: provider {row.name!r} does not offer model {model!r} "
            f"(it offers {', '.join(row.models_offered())})."
        )
    return endpoint_of(row, model)


def known_providers() -> list[ProviderInfo]:
    """Every provider a node may name, the settings' "default" included when no row is default."""
    rows = list(LLMProvider.objects.all())
    found = [ProviderInfo(r.name, r.default_model, r.models_offered(), r.is_default, r.demo) for r in rows]
    if not any(r.is_default for r in rows) and SETTINGS_PROVIDER not in {r.name for r in rows}:
        conf = builtin.switchyard_settings()
        # The settings provider accepts any model name: LLM_MODEL is only its default.
        found.append(ProviderInfo(SETTINGS_PROVIDER, str(conf["LLM_MODEL"]), [], True, False))
    return sorted(found, key=lambda p: p.name)


def with_provider_choices(schema: dict[str, Any]) -> dict[str, Any]:
    """Return an `llm.*` config schema whose provider and model fields list what exists (for the editor).

    `x-labels` names each choice for people (the demo provider says it is one); the stored
    value stays the bare provider or model name.
    """
    known = known_providers()
    props = dict(schema.get("properties", {}))
    if "provider" in props and known:
        default = next((p.name for p in known if p.is_default), None)
        props["provider"] = {
            **props["provider"],
            "enum": [p.name for p in known],
            "x-labels": [p.label for p in known],
            **({"default": default} if default else {}),
        }
    models = list(dict.fromkeys(m for p in known for m in p.models))
    if "model" in props and models and all(p.models for p in known):
        labels = [f"{m} ({', '.join(p.name for p in known if m in p.models)})" for m in models]
        props["model"] = {**props["model"], "enum": models, "x-labels": labels}
    return {**schema, "properties": props}


DEMO_PROVIDER = "demo"


def register_demo(base_url: str, model: str) -> LLMProvider:
    """Point the provider "demo" at the scripted server; default when no other provider is."""
    row, _ = LLMProvider.objects.update_or_create(
        name=DEMO_PROVIDER,
        defaults={"base_url": base_url, "default_model": model, "demo": True, "api_key": ""},
    )
    if not LLMProvider.objects.filter(is_default=True).exists():
        LLMProvider.objects.filter(pk=row.pk).update(is_default=True)
        row.is_default = True
    return row
