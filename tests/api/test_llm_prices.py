"""Prices per provider and model: which price a call pays, the API, the page, deleting a provider.

A provider's own price for a model beats the model's price for any provider; with neither,
the cost is unknown (NULL, never 0). Calls go through `usage.record_call`, as workers make them.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from controlplane import access
from tests.api.conftest import Api, assert_problem
from tests.integration.conftest import publish
from workflows.llm import prices, usage
from workflows.llm.client import Completion
from workflows.llm.providers import Endpoint
from workflows.runs import actions as runs
from workflows.store.models import AuditEntry, LLMCall, LLMPrice, LLMProvider, NodeRun

pytestmark = pytest.mark.django_db
PRICE = {"input_per_million": 2, "output_per_million": 8}


def provider(name: str, *models: str) -> LLMProvider:
    return LLMProvider.objects.create(
        name=name,
        base_url=f"https://{name}.test/v1",
        default_model=models[0],
        offered_models=list(models[1:]),
    )


def price(model: str, through: LLMProvider | None, input_: str, output: str) -> LLMPrice:
    return LLMPrice.objects.create(
        provider=through, model=model, input_per_million=Decimal(input_), output_per_million=Decimal(output)
    )


def call_through(provider_name: str, model: str) -> LLMCall:
    """Record one call of a million input and a million output tokens, as a worker does."""
    workflow = publish("asker", {"nodes": [{"id": "ask", "handler": "core.noop"}], "edges": []})
    run, _ = runs.start_run(workflow, {})
    node = NodeRun.objects.get(run=run)
    endpoint = Endpoint(provider_name, "http://x.test/v1", "", model, 10, False)
    done = Completion("hi", [], "stop", model, 1_000_000, 1_000_000, 5.0)
    return usage.record_call(node_run_id=node.pk, endpoint=endpoint, completion=done)


# --- which price a call pays -------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([("openai", "1"), (None, "2")], "1"),  # the provider's own beats any provider's
        ([(None, "2"), ("openai", "1")], "1"),  # whatever the order of the rows
        ([(None, "2"), ("azure", "3")], "2"),  # another provider's price does not apply
        ([("azure", "3")], None),  # nor alone: unknown
        ([], None),
    ],
)
def test_pick_price_takes_the_providers_own_price_then_any_providers_then_none(
    rows: list[tuple[str | None, str]], expected: str | None
) -> None:
    found = {name: LLMProvider(pk=n, name=name) for n, name in enumerate(["openai", "azure"], start=1)}
    table = [
        LLMPrice(provider=found[p] if p else None, model="house-model", input_per_million=Decimal(v))
        for p, v in rows
    ]
    table.append(LLMPrice(provider=None, model="house-mini", input_per_million=Decimal("9")))
    picked = prices.pick_price(table, "openai", "house-model")  # a model the shipped list lacks
    assert (None if picked is None else str(picked.input_per_million)) == expected


def test_the_same_model_costs_what_each_provider_charges_else_the_any_provider_price() -> None:
    openai, azure = provider("openai", "gpt-4o"), provider("azure", "gpt-4o")
    price("gpt-4o", None, "2.5", "10")
    price("gpt-4o", azure, "3", "12")
    assert call_through("azure", "gpt-4o").cost == Decimal("15")
    assert call_through("openai", "gpt-4o").cost == Decimal("12.5")
    assert call_through("default", "gpt-4o").cost == Decimal("12.5"), (
        "the settings provider pays any provider's"
    )
    assert openai.prices.count() == 0


def test_metrics_count_each_providers_cost_at_its_own_price(redis_clean: None, person: Any) -> None:
    azure = provider("azure", "gpt-4o")
    provider("openai", "gpt-4o")
    price("gpt-4o", None, "2.5", "10")
    price("gpt-4o", azure, "3", "12")
    call_through("azure", "gpt-4o")
    call_through("openai", "gpt-4o")
    call_through("openai", "house-mini")  # not on the shipped price list
    text = admin_page(person).get("/metrics").content.decode()
    assert 'switchyard_llm_cost_total{model="gpt-4o",provider="azure"} 15.0' in text
    assert 'switchyard_llm_cost_total{model="gpt-4o",provider="openai"} 12.5' in text
    assert 'switchyard_llm_unpriced_calls_total{model="house-mini",provider="openai"} 1.0' in text


def test_a_model_with_only_another_providers_price_has_an_unknown_cost_never_zero(person: Any) -> None:
    azure = provider("azure", "house-model")
    price("house-model", azure, "3", "12")
    call = call_through("openai", "house-model")  # not on the shipped price list
    assert call.cost is None
    assert usage.run_totals(call.run_id).cost_text == "unknown"


def test_a_listed_model_is_priced_out_of_the_box_and_a_price_in_the_table_beats_the_list(
    person: Any,
) -> None:
    provider("openai", "gpt-4o-mini")
    assert call_through("openai", "gpt-4o-mini").cost == Decimal("0.75")  # 0.15 in + 0.6 out
    assert call_through("router", "openai/gpt-4o-mini").cost == Decimal("0.75"), "a router's name"
    assert call_through("openai", "gpt-4o-mini-2024-07-18").cost == Decimal("0.75"), "a dated name"
    price("gpt-4o-mini", None, "1", "2")
    assert call_through("openai", "gpt-4o-mini").cost == Decimal("3")


def test_the_demo_providers_model_costs_zero_and_the_page_says_why(person: Any) -> None:
    demo = LLMProvider.objects.create(
        name="demo", base_url="http://127.0.0.1:9/v1", default_model="demo-scripted", demo=True
    )
    assert call_through(demo.name, "demo-scripted").cost == Decimal("0")
    html = admin_page(person).get("/llm/").content.decode()
    row = html[html.index('data-offered="demo:demo-scripted"') :].split("</tr>")[0]
    assert "the shipped list's price" in row and 'data-field="free">free: not a real model<' in row
    listed = html[html.index('id="price-list"') :]
    assert "as published by each vendor on 2025-09-01" in listed
    assert 'data-listed="claude-sonnet-4"' in listed and 'data-listed="gemini-2.5-flash"' in listed


def test_a_recorded_call_keeps_its_cost_when_prices_change_or_its_provider_is_deleted(api: Api) -> None:
    azure = provider("azure", "gpt-4o")
    price("gpt-4o", azure, "3", "12")
    call = call_through("azure", "gpt-4o")
    assert api.delete("llm/providers/azure").status_code == 204
    assert not LLMPrice.objects.exists(), "the provider's prices went with it"
    call.refresh_from_db()
    assert (call.provider, call.cost) == ("azure", Decimal("15"))
    entry = AuditEntry.objects.get(action="llm_provider.delete")
    assert entry.data["prices_deleted"] == {"gpt-4o": ["3.0000", "12.0000"]}


def test_renaming_a_provider_keeps_its_prices(api: Api) -> None:
    azure = provider("azure", "gpt-4o")
    price("gpt-4o", azure, "3", "12")
    body = {"name": "azure-eu", "base_url": "https://azure.test/v1", "default_model": "gpt-4o"}
    assert api.put("llm/providers/azure", body).status_code == 200
    assert call_through("azure-eu", "gpt-4o").cost == Decimal("15")


# --- the API ------------------------------------------------------------------------------


def test_a_providers_price_is_set_read_listed_and_deleted_over_the_api(api: Api) -> None:
    provider("azure", "gpt-4o", "gpt-4o-mini")
    assert (
        api.put("llm/prices/gpt-4o", {"input_per_million": 2.5, "output_per_million": 10}).status_code == 200
    )
    set_ = api.put("llm/providers/azure/prices/gpt-4o", {"input_per_million": 3, "output_per_million": 12})
    own = {"model": "gpt-4o", "provider": "azure", "input_per_million": "3", "output_per_million": "12"}
    anyone = {"model": "gpt-4o", "provider": None, "input_per_million": "2.5", "output_per_million": "10"}
    assert (set_.status_code, set_.json()) == (200, own)
    assert api.get("llm/providers/azure/prices/gpt-4o").json() == own
    assert api.get("llm/prices/gpt-4o").json() == anyone
    assert api.get("llm/prices").json()["items"] == [anyone, own]
    offered = api.get("llm/providers/azure/prices").json()
    assert offered == {
        "provider": "azure",
        "items": [
            {
                "model": "gpt-4o",
                "offered": True,
                "source": "provider",
                "input_per_million": "3",
                "output_per_million": "12",
            },
            {  # no row in the table: the shipped price list's price
                "model": "gpt-4o-mini",
                "offered": True,
                "source": "listed",
                "input_per_million": "0.15",
                "output_per_million": "0.6",
            },
        ],
    }
    assert api.delete("llm/providers/azure/prices/gpt-4o").status_code == 204
    assert api.get("llm/providers/azure/prices").json()["items"][0]["source"] == "any_provider"
    assert_problem(api.get("llm/providers/azure/prices/gpt-4o"), 404)
    assert api.get("llm/prices/gpt-4o").json() == anyone, "the any-provider price stays"
    actions = [
        (e.action, e.data["provider"])
        for e in AuditEntry.objects.filter(action__startswith="llm_price").order_by("id")
    ]
    assert actions == [("llm_price.set", None), ("llm_price.set", "azure"), ("llm_price.delete", "azure")]


def test_model_names_with_a_slash_are_priced_through_a_proxy(api: Api) -> None:
    provider("router", "openai/gpt-4o")
    assert api.put("llm/providers/router/prices/openai/gpt-4o", PRICE).json()["model"] == "openai/gpt-4o"
    assert api.put("llm/prices/openai/gpt-4o", PRICE).json()["provider"] is None
    assert call_through("router", "openai/gpt-4o").cost == Decimal("10")
    assert api.delete("llm/prices/openai/gpt-4o").status_code == 204


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("llm/providers/nope/prices/gpt-4o", PRICE, 404, "provider"),
        ("llm/providers/azure/prices/gpt-5", PRICE, 422, "model"),
        ("llm/providers/azure/prices/gpt-4o", {**PRICE, "input_per_million": -1}, 422, "input_per_million"),
        (
            "llm/providers/azure/prices/gpt-4o",
            {**PRICE, "output_per_million": 1e9},
            422,
            "output_per_million",
        ),
        (
            "llm/providers/azure/prices/gpt-4o",
            {**PRICE, "output_per_million": "lots"},
            422,
            "output_per_million",
        ),
        ("llm/prices/gpt-4o", {**PRICE, "provider": "azure"}, 422, "provider"),
        ("llm/prices/gpt-4o", {"input_per_million": 1}, 422, "output_per_million"),
        ("llm/prices/gpt%00-4o", PRICE, 422, "model"),
        ("llm/providers/azure/prices/gpt%09-4o", PRICE, 422, "model"),
    ],
)
def test_a_bad_price_is_refused_naming_the_field(
    api: Api, path: str, body: dict[str, Any], status: int, field: str
) -> None:
    provider("azure", "gpt-4o")
    problem = assert_problem(api.put(path, body), status)
    assert field in str(problem)
    assert not LLMPrice.objects.exists()


def test_reading_or_deleting_a_price_of_an_unknown_provider_names_the_provider(api: Api) -> None:
    for response in (api.get("llm/providers/nope/prices/m"), api.delete("llm/providers/nope/prices/m")):
        assert "provider" in assert_problem(response, 404)["detail"]
    assert_problem(api.get("llm/providers/nope/prices"), 404)


def test_reading_or_deleting_a_price_no_model_name_can_have_answers_not_found(api: Api) -> None:
    for path in ("llm/prices/gpt%00-4o", "llm/prices/gpt%0a"):
        assert_problem(api.get(path), 404)
        assert_problem(api.delete(path), 404)


@pytest.mark.parametrize("role", [access.EDITOR, access.OPERATOR, access.VIEWER])
def test_only_admins_set_a_providers_price_and_everyone_reads_them(
    api_as: Callable[..., Api], role: str
) -> None:
    provider("azure", "gpt-4o")
    scoped = api_as(role, "read", "edit", "operate", "run")
    assert_problem(scoped.put("llm/providers/azure/prices/gpt-4o", PRICE), 403)
    assert_problem(scoped.delete("llm/providers/azure/prices/gpt-4o"), 403)
    assert scoped.get("llm/providers/azure/prices").status_code == 200
    assert scoped.get("llm/prices").status_code == 200


def test_the_openapi_document_describes_the_provider_price_operations(api: Api) -> None:
    paths = api.get("openapi.json").json()["paths"]
    item = paths["/api/v1/llm/providers/{name}/prices/{model}"]
    assert set(item) >= {"get", "put", "delete"}
    assert "404" in item["put"]["responses"] and "422" in item["put"]["responses"]
    assert "any provider" in paths["/api/v1/llm/prices/{model}"]["put"]["description"]


# --- the page -----------------------------------------------------------------------------


def admin_page(person: Any) -> Client:
    client = Client()
    client.force_login(person("admin"))
    return client


def test_the_page_lists_prices_with_their_provider_and_offered_models_without_one_as_unknown(
    person: Any,
) -> None:
    azure = provider("azure", "gpt-4o", "house-mini")
    price("gpt-4o", None, "2.5", "10")
    price("gpt-4o", azure, "3", "12")
    html = admin_page(person).get("/llm/").content.decode()
    assert 'data-price-provider="" data-price-model="gpt-4o"' in html
    assert 'data-price-provider="azure" data-price-model="gpt-4o"' in html
    mini = html[html.index('data-offered="azure:house-mini"') :].split("</tr>")[0]
    assert 'class="badge unknown-price">unknown<' in mini and "0.0000" not in mini


def test_an_admin_sets_and_edits_a_providers_price_on_the_page_and_each_change_is_audited(
    person: Any,
) -> None:
    provider("azure", "gpt-4o")
    admin = person("admin")
    client = Client()
    client.force_login(admin)
    saved = client.post(
        "/llm/prices/",
        {"provider": "azure", "model": "gpt-4o", "input_per_million": "3", "output_per_million": "12"},
    )
    assert saved.status_code == 302
    form = client.get("/llm/?price_provider=azure&price_model=gpt-4o").content.decode()
    assert "Change the price of gpt-4o through azure" in form and 'value="12"' in form
    client.post(
        "/llm/prices/",
        {
            "editing": "1",
            "provider": "azure",
            "model": "gpt-4o",
            "input_per_million": "4",
            "output_per_million": "16",
        },
    )
    assert prices.price_of("azure", "gpt-4o").output_per_million == Decimal("16")
    client.post("/llm/prices/delete/", {"provider": "azure", "model": "gpt-4o"})
    assert not LLMPrice.objects.exists()
    actions = [(e.action, e.data["provider"], e.actor) for e in AuditEntry.objects.order_by("id")]
    assert actions == [
        ("llm_price.set", "azure", admin),
        ("llm_price.set", "azure", admin),
        ("llm_price.delete", "azure", admin),
    ]


@pytest.mark.parametrize(
    ("post", "field"),
    [
        ({"provider": "nope", "model": "gpt-4o"}, "provider:"),
        ({"provider": "azure", "model": "gpt-5"}, "model:"),
        ({"provider": "azure", "model": "gpt-4o", "input_per_million": "-1"}, "input_per_million:"),
    ],
)
def test_a_bad_price_on_the_page_is_shown_beside_the_form_naming_the_field(
    person: Any, post: dict[str, str], field: str
) -> None:
    provider("azure", "gpt-4o")
    sent = {"input_per_million": "1", "output_per_million": "1", **post}
    page = admin_page(person).post("/llm/prices/", sent)
    assert 400 <= page.status_code < 500
    html = page.content.decode()
    assert 'id="price-error"' in html and field in html
    assert not LLMPrice.objects.exists()
