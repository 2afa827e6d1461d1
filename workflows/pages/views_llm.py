"""The LLM page, for admins: providers (key write-only), the price table, today's usage.

Thin: every change is one call into `workflows.llm.catalog`, the API's own; a refused change
re-renders the page with the message beside the form (status 422), an accepted one redirects.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitoring.views.guards import requires
from workflows.llm import catalog, price_list, prices, usage
from workflows.llm.providers import DEMO_LABEL
from workflows.store.errors import DomainError
from workflows.store.models import LLMProvider, Workflow


def page_context(**extra: Any) -> dict[str, Any]:
    providers = list(LLMProvider.objects.all())
    return {
        "nav": "llm",
        "providers": providers,
        "prices": prices.price_table(),
        "offered": prices.offered_prices(providers),
        "price_list": prices.shipped_prices(),
        "price_list_date": price_list.LISTED_ON,
        "offered_models": sorted({m for p in providers for m in p.models_offered()}),
        "demo_label": DEMO_LABEL,
        "provider_kinds": LLMProvider.KINDS,
        "today": usage.day_totals(),
        "top": usage.top_workflows(),
        "by_model": usage.model_totals(),
        **extra,
    }


@require_GET
@requires("view")
def usage_card(request: HttpRequest) -> HttpResponse:
    """The usage card alone (the overview and the workflow page refresh it)."""
    slug = request.GET.get("workflow")
    workflow = get_object_or_404(Workflow, slug=slug) if slug else None
    return render(request, "llm/usage_card.html", usage.card_context(workflow))


@require_GET
@requires("manage_llm")
def llm_page(request: HttpRequest) -> HttpResponse:
    editing = LLMProvider.objects.filter(name=request.GET.get("edit", "")).first()
    return render(request, "llm/llm.html", page_context(editing=editing, **price_form(request.GET)))


def price_form(query: Any) -> dict[str, Any]:
    """Open the price form on one provider (or any provider) and model: `?price_model=m&price_provider=p`.

    With a price set for them, the form changes it (provider and model fixed); without,
    it sets one (a provider's offered model shown as unknown links here), starting from the
    shipped list's price when the model is listed.
    """
    model = query.get("price_model", "").strip()
    if not model:
        return {}
    provider = query.get("price_provider", "").strip()
    found = catalog.find_price(model, provider) or prices.listed_row(model)
    posted = {"model": model, "provider": provider}
    if found is not None:
        posted |= {
            "input_per_million": usage.plain(found.input_per_million),
            "output_per_million": usage.plain(found.output_per_million),
        }
    return {"price_editing": found is not None and not prices.is_listed(found), "price_posted": posted}


def change_from(post: Any) -> catalog.ProviderChange:
    """Read the provider form; an empty key field keeps the stored key unless 'clear' is ticked."""
    key = post.get("api_key", "")
    try:
        timeout = float(post.get("timeout_seconds") or 60)
    except ValueError:
        timeout = -1.0  # refused by check_provider, naming timeout_seconds
    return catalog.ProviderChange(
        name=post.get("name", "").strip(),
        kind=post.get("kind", "").strip() or None,
        base_url=post.get("base_url", "").strip(),
        default_model=post.get("default_model", "").strip(),
        models=tuple(m.strip() for m in post.get("models", "").replace(",", "\n").splitlines() if m.strip()),
        timeout_seconds=timeout,
        is_default=post.get("is_default") == "on",
        api_key="" if post.get("clear_key") == "on" else (key or None),
    )


@require_POST
@requires("manage_llm")
def save_provider(request: HttpRequest) -> HttpResponse:
    existing = request.POST.get("existing") or None
    try:
        row = catalog.save_provider(change_from(request.POST), actor=request.user, existing=existing)
    except DomainError as exc:
        editing = LLMProvider.objects.filter(name=existing or "").first()
        context = page_context(editing=editing, provider_error=exc.message, posted=request.POST)
        return render(request, "llm/llm.html", context, status=exc.http_status)
    messages.success(request, f"Provider {row.name} saved.")
    return redirect("llm:page")


@require_POST
@requires("manage_llm")
def delete_provider(request: HttpRequest, name: str) -> HttpResponse:
    try:
        catalog.delete_provider(name, actor=request.user)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Provider {name} deleted.")
    return redirect("llm:page")


@require_POST
@requires("manage_llm")
def save_price(request: HttpRequest) -> HttpResponse:
    post = request.POST
    try:
        row = catalog.save_price(
            post.get("model", ""),
            post.get("input_per_million", ""),
            post.get("output_per_million", ""),
            request.user,
            provider=post.get("provider") or None,
        )
    except DomainError as exc:
        context = page_context(
            price_error=exc.message, price_posted=post, price_editing=post.get("editing") == "1"
        )
        return render(request, "llm/llm.html", context, status=exc.http_status)
    messages.success(request, f"Price of {catalog.price_label(post.get('provider'), row.model)} saved.")
    return redirect("llm:page")


@require_POST
@requires("manage_llm")
def delete_price(request: HttpRequest) -> HttpResponse:
    provider = request.POST.get("provider") or None
    model = request.POST.get("model", "")
    try:
        catalog.delete_price(model, actor=request.user, provider=provider)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Price of {catalog.price_label(provider, model)} deleted.")
    return redirect("llm:page")
