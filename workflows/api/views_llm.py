"""LLM providers and prices, for admins. The key is write-only: answers say only `has_key`.

Prices: `/llm/prices/{model}` is a model's price through any provider (as it always was);
`/llm/providers/{name}/prices/{model}` a provider's own price, which beats it for calls
through that provider (`workflows.llm.prices.pick_price`). A model name may hold '/'
(`openai/gpt-4o` through a proxy): the path converter takes the rest of the path.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Path, Router, Status
from pydantic import Field
from typing_extensions import TypedDict

from workflows.api.auth import ApiRequest, allowed
from workflows.api.inputs import Body
from workflows.api.schema import refuses
from workflows.llm import catalog, prices
from workflows.llm.providers import DEMO_LABEL
from workflows.llm.usage import plain
from workflows.store.models import LLMPrice, LLMProvider

router = Router(tags=["llm"])
ProviderName = Annotated[str, Path(pattern=r"^[a-z][a-z0-9_-]{0,59}$")]
ModelName = Annotated[str, Path(min_length=1, max_length=200)]


class ProviderIn(Body):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,59}$")
    kind: Literal["openai", "anthropic"] | None = Field(
        None,
        description="The API the provider speaks: openai (chat completions, OpenAI-compatible) "
        "or anthropic (Anthropic's Messages API; base_url is the API's root, /v1/messages is added). "
        "Omit (or null) to keep a provider's kind; a new provider is openai.",
    )
    base_url: str = Field(pattern=r"^https?://", max_length=500)
    default_model: str = Field(min_length=1, max_length=200)
    models: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list, max_length=100
    )
    timeout_seconds: float = Field(60.0, gt=0, le=3600)
    is_default: bool = False
    api_key: str | None = Field(
        None, max_length=4000, description='Write-only. Omit (or null) to keep the stored key; "" clears it.'
    )


class PriceIn(Body):
    input_per_million: float = Field(ge=0, le=1_000_000)
    output_per_million: float = Field(ge=0, le=1_000_000)


class ProviderOut(TypedDict):
    name: str
    kind: str
    label: str
    base_url: str
    default_model: str
    models: list[str]
    timeout_seconds: float
    is_default: bool
    demo: bool
    has_key: bool


class ProviderList(TypedDict):
    items: list[ProviderOut]


class PriceOut(TypedDict):
    model: str
    provider: Annotated[str | None, Field(description="null: the model's price through any provider")]
    input_per_million: str
    output_per_million: str


class PriceList(TypedDict):
    items: list[PriceOut]


class OfferedPriceOut(TypedDict):
    model: str
    offered: Annotated[
        bool, Field(description="false: the provider has a price for a model it no longer offers")
    ]
    source: Annotated[
        prices.Source | None,
        Field(
            description="Which price its calls pay: the provider's own, the any-provider one, or null: unknown"
        ),
    ]
    input_per_million: str | None
    output_per_million: str | None


class OfferedPriceList(TypedDict):
    provider: str
    items: list[OfferedPriceOut]


def provider_out(row: LLMProvider) -> ProviderOut:
    """A provider as answered: never its key."""
    return {
        "name": row.name,
        "kind": row.kind,
        "label": f"{row.name} — {DEMO_LABEL}" if row.demo else row.name,
        "base_url": row.base_url,
        "default_model": row.default_model,
        "models": row.models_offered(),
        "timeout_seconds": row.timeout_seconds,
        "is_default": row.is_default,
        "demo": row.demo,
        "has_key": bool(row.api_key),
    }


def price_out(row: LLMPrice) -> PriceOut:
    return {
        "model": row.model,
        "provider": row.provider.name if row.provider else None,
        "input_per_million": plain(Decimal(row.input_per_million)),
        "output_per_million": plain(Decimal(row.output_per_million)),
    }


def offered_out(found: prices.OfferedPrice) -> OfferedPriceOut:
    row = found.price
    return {
        "model": found.model,
        "offered": found.offered,
        "source": found.source,
        "input_per_million": None if row is None else plain(Decimal(row.input_per_million)),
        "output_per_million": None if row is None else plain(Decimal(row.output_per_million)),
    }


def change_of(body: ProviderIn) -> catalog.ProviderChange:
    return catalog.ProviderChange(
        name=body.name,
        kind=body.kind,
        base_url=body.base_url,
        default_model=body.default_model,
        models=tuple(body.models),
        timeout_seconds=body.timeout_seconds,
        is_default=body.is_default,
        api_key=body.api_key,
    )


@router.get("/llm/providers", response=ProviderList, auth=allowed("manage_llm"), summary="List LLM providers")
def list_providers(request: HttpRequest) -> Any:
    """List the LLM providers (never their keys: `has_key` says whether one is stored)."""
    return {"items": [provider_out(row) for row in LLMProvider.objects.all()]}


@router.post(
    "/llm/providers", response={201: ProviderOut}, auth=allowed("manage_llm"), summary="Add an LLM provider"
)
@refuses(409)
def create_provider(request: ApiRequest, response: HttpResponse, body: ProviderIn) -> Any:
    """Add a provider; its key is stored server-side and never answered again."""
    row = catalog.save_provider(change_of(body), actor=request.auth)
    response["Location"] = f"/api/v1/llm/providers/{row.name}"
    return Status(201, provider_out(row))


@router.get(
    "/llm/providers/{name}", response=ProviderOut, auth=allowed("manage_llm"), summary="Read an LLM provider"
)
@refuses(404)
def read_provider(request: HttpRequest, name: ProviderName) -> Any:
    """Read a provider (not its key)."""
    return provider_out(catalog.get_provider(name))


@router.put(
    "/llm/providers/{name}",
    response=ProviderOut,
    auth=allowed("manage_llm"),
    summary="Change an LLM provider",
)
@refuses(404, 409)
def update_provider(request: ApiRequest, name: ProviderName, body: ProviderIn) -> Any:
    """Replace a provider's settings; an omitted or null `api_key` keeps the stored key."""
    return provider_out(catalog.save_provider(change_of(body), actor=request.auth, existing=name))


@router.delete(
    "/llm/providers/{name}",
    response={204: None},
    auth=allowed("manage_llm"),
    summary="Delete an LLM provider",
)
@refuses(404)
def delete_provider(request: ApiRequest, name: ProviderName) -> Any:
    """Delete a provider and its own prices; nodes naming it fail at validation (and at run time, naming it).

    Its recorded calls stay, with the provider's name and the cost they were recorded with.
    """
    catalog.delete_provider(name, actor=request.auth)
    return Status(204, None)


@router.get("/llm/prices", response=PriceList, auth=allowed("view"), summary="List model prices")
def list_prices(request: HttpRequest) -> Any:
    """List the price table: per model and provider (null: any provider), per million input and output tokens."""
    return {"items": [price_out(row) for row in prices.price_table()]}


@router.get(
    "/llm/prices/{path:model}", response=PriceOut, auth=allowed("view"), summary="Read a model's price"
)
@refuses(404)
def read_price(request: HttpRequest, model: ModelName) -> Any:
    """Read a model's price through any provider (a provider's own price is under the provider)."""
    return price_out(catalog.get_price(model))


@router.put(
    "/llm/prices/{path:model}", response=PriceOut, auth=allowed("manage_llm"), summary="Set a model's price"
)
def set_price(request: ApiRequest, model: ModelName, body: PriceIn) -> Any:
    """Set the price of a model through any provider, per million input and output tokens.

    Calls from now on use it unless their provider has a price of its own for the model.
    """
    row = catalog.save_price(model, body.input_per_million, body.output_per_million, actor=request.auth)
    return price_out(row)


@router.delete(
    "/llm/prices/{path:model}",
    response={204: None},
    auth=allowed("manage_llm"),
    summary="Delete a model's price",
)
@refuses(404)
def delete_price(request: ApiRequest, model: ModelName) -> Any:
    """Delete a model's any-provider price: its later calls without a provider price show their cost as unknown."""
    catalog.delete_price(model, actor=request.auth)
    return Status(204, None)


@router.get(
    "/llm/providers/{name}/prices",
    response=OfferedPriceList,
    auth=allowed("view"),
    summary="List what a provider's models cost",
)
@refuses(404)
def list_provider_prices(request: HttpRequest, name: ProviderName) -> Any:
    """List each model the provider offers (and each it has a price for) with the price its calls pay.

    `source` says which price applies: the provider's own, else the model's any-provider
    price; null with null prices means unknown (calls record a null cost, never 0).
    """
    row = catalog.get_provider(name)
    return {"provider": row.name, "items": [offered_out(p) for p in prices.offered_prices([row])]}


@router.get(
    "/llm/providers/{name}/prices/{path:model}",
    response=PriceOut,
    auth=allowed("view"),
    summary="Read a provider's price for a model",
)
@refuses(404)
def read_provider_price(request: HttpRequest, name: ProviderName, model: ModelName) -> Any:
    """Read the provider's own price for a model (404 when it has none: the any-provider price applies)."""
    return price_out(catalog.get_price(model, provider=name))


@router.put(
    "/llm/providers/{name}/prices/{path:model}",
    response=PriceOut,
    auth=allowed("manage_llm"),
    summary="Set a provider's price for a model",
)
@refuses(404)
def set_provider_price(request: ApiRequest, name: ProviderName, model: ModelName, body: PriceIn) -> Any:
    """Set what a model costs through this provider; it beats the model's any-provider price.

    The model must be one the provider offers (422 naming `model`); an unknown provider is 404.
    """
    row = catalog.save_price(
        model, body.input_per_million, body.output_per_million, actor=request.auth, provider=name
    )
    return price_out(row)


@router.delete(
    "/llm/providers/{name}/prices/{path:model}",
    response={204: None},
    auth=allowed("manage_llm"),
    summary="Delete a provider's price for a model",
)
@refuses(404)
def delete_provider_price(request: ApiRequest, name: ProviderName, model: ModelName) -> Any:
    """Delete a provider's own price: its later calls pay the any-provider price, or show unknown."""
    catalog.delete_price(model, actor=request.auth, provider=name)
    return Status(204, None)
