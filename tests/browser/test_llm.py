"""LLM nodes in a real browser: streamed text reaches the pages live; providers and prices for admins."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.llm_server import FakeLLMServer
from tests.integration.conftest import publish, wait_finished
from tests.integration.runtime import LOGS, Runtime
from workflows.llm.providers import DEMO_LABEL
from workflows.runs import actions as runs
from workflows.store.models import LLMCall, LLMPrice, LLMProvider, NodeRun

KEY = "sk-browser-secret-5150"
WORDS = [f"token{n}" for n in range(30)]


def story(request: Any) -> dict[str, Any]:
    return {
        "model": "tiny-1",
        "choices": [{"message": {"role": "assistant", "content": " ".join(WORDS)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 30},
    }


@pytest.fixture
def fake(transactional_db: None) -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key=KEY, reply=story, chunk_delay=0.2) as server:
        LLMProvider.objects.create(
            name="fakeco", base_url=server.base_url, api_key=KEY, default_model="tiny-1", is_default=True
        )
        yield server


def ask_workflow() -> Any:
    node = {"id": "ask", "handler": "llm.chat", "config": {"prompt": "Tell me about {input.topic}"}}
    return publish("asker", {"nodes": [node], "edges": []})


def page_text(page: Page) -> str:
    return page.content() + page.evaluate("document.body.innerText")


def test_streamed_tokens_reach_the_run_page_and_the_live_page_before_the_node_finishes(
    runtime: Runtime, fake: FakeLLMServer, page_as: Any, live_url: str, screenshot: Any
) -> None:
    LLMPrice.objects.create(
        model="tiny-1", input_per_million=Decimal("1000"), output_per_million=Decimal("1000")
    )
    workflow = ask_workflow()
    fake.hold_at = 8  # the stream waits after a few words until the pages have shown them
    run_page = page_as("viewer")
    live_page = run_page.context.new_page()
    live_page.goto(f"{live_url}/workflows/{workflow.slug}/live/")
    run, _ = runs.start_run(workflow, {"topic": "trains"})
    run_page.goto(f"{live_url}/runs/{run.pk}/")
    run_page.locator('#run-graph [data-node="ask"]').click()
    stream = run_page.locator('#llm-streams [data-stream$=":ask"] pre')
    expect(stream).to_contain_text("token3")
    node = NodeRun.objects.get(run=run, node_id="ask")
    assert node.status == "running", "the text arrived while the node was still running"
    assert "token29" not in stream.inner_text()
    expect(run_page.locator('#node-detail [data-llm-node="ask"]')).to_contain_text("token")
    expect(live_page.locator("#llm-streams pre")).to_contain_text("token")
    screenshot(run_page, "run-page-streaming")
    screenshot(live_page, "live-page-streaming")
    late_page = run_page.context.new_page()  # opened mid-stream: it gets the next whole text
    late_page.goto(f"{live_url}/runs/{run.pk}/")
    expect(late_page.locator("#live")).to_have_attribute("data-connected", "true")
    fake.go.set()  # the stream goes on: its next piece brings the late page the whole text
    late_stream = late_page.locator('#llm-streams [data-stream$=":ask"] pre')
    expect(late_stream).to_contain_text("token0 token1 token2 token3")
    assert wait_finished(run).status == "succeeded"
    expect(stream).to_have_text(" ".join(WORDS))
    expect(late_stream).to_have_text(" ".join(WORDS))
    expect(run_page.locator('#llm-streams [data-stream$=":ask"]')).to_have_attribute("data-done", "true")
    expect(run_page.locator("#run-llm-usage")).to_contain_text("1 call · 9 in / 30 out tokens · cost 0.0390")
    screenshot(run_page, "run-page-streamed")
    for page in (run_page, live_page):
        assert KEY not in page_text(page)


def test_an_admin_adds_a_provider_and_a_price_and_never_sees_the_key_again(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    page = page_as("admin")
    page.goto(f"{live_url}/llm/")
    page.fill("input[name=name]", "acme")
    page.fill("input[name=base_url]", "https://llm.acme.test/v1")
    page.fill("input[name=api_key]", KEY)
    page.fill("input[name=default_model]", "acme-large")
    page.fill("textarea[name=models]", "acme-small\nacme-tiny")
    page.check("input[name=is_default]")
    page.click("text=Save provider")
    expect(page.locator(".message")).to_contain_text("Provider acme saved.")
    row = page.locator("#provider-acme")
    expect(row).to_contain_text("stored")
    expect(row).to_contain_text("acme-tiny")
    assert KEY not in page_text(page)
    row.locator("text=Edit").click()
    expect(page.locator("input[name=api_key]")).to_have_value("")
    assert KEY not in page_text(page)
    page.fill("input[name=default_model]", "acme-small")
    page.click("text=Save provider")
    expect(page.locator(".message")).to_contain_text("Provider acme saved.")
    assert LLMProvider.objects.get(name="acme").api_key == KEY, "an empty key field keeps the stored key"
    page.fill("#prices input[name=model]", "acme-small")
    page.fill("#prices input[name=input_per_million]", "0.15")
    page.fill("#prices input[name=output_per_million]", "0.6")
    page.click("text=Set price")
    expect(page.locator("#prices")).to_contain_text("acme-small")
    page.fill("input[name=name]", "Bad Name")
    page.fill("input[name=base_url]", "https://x.test/v1")
    page.fill("input[name=default_model]", "m")
    page.evaluate("document.querySelector('input[name=name]').removeAttribute('pattern')")
    page.click("text=Save provider")
    expect(page.locator("#provider-error")).to_contain_text("name:")
    screenshot(page, "llm-page")


def test_the_llm_page_is_for_admins_and_the_demo_provider_says_what_it_is(
    page_as: Any, live_url: str, transactional_db: None
) -> None:
    LLMProvider.objects.create(
        name="demo", base_url="http://127.0.0.1:9/v1", default_model="demo-scripted", demo=True
    )
    editor = page_as("editor")
    response = editor.goto(f"{live_url}/llm/")
    assert response is not None and response.status == 403
    editor.goto(f"{live_url}/")
    expect(editor.locator("nav.mainnav")).to_contain_text("Workflows")
    expect(editor.locator("nav.mainnav")).not_to_contain_text("LLM")
    admin = page_as("admin")
    admin.goto(f"{live_url}/llm/")
    expect(admin.locator("#provider-demo")).to_contain_text(DEMO_LABEL)


def test_a_key_never_reaches_the_worker_log_even_when_the_provider_echoes_it(
    runtime: Runtime, fake: FakeLLMServer, page_as: Any, live_url: str
) -> None:
    fake.status = 401
    fake.reply = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    run = wait_finished(runs.start_run(ask_workflow(), {"topic": "x"})[0])
    node = NodeRun.objects.get(run=run, node_id="ask")
    assert "answered 401" in node.error and KEY not in node.error
    assert all(KEY not in c.error for c in LLMCall.objects.filter(run=run))
    for log in LOGS.glob("worker-*.log"):
        assert KEY not in log.read_text(errors="replace"), log
    page = page_as("admin")
    page.goto(f"{live_url}/runs/{run.pk}/")
    page.locator('#run-graph [data-node="ask"]').click()
    expect(page.locator("#node-detail")).to_contain_text("answered 401")
    assert KEY not in page_text(page)


def test_an_admin_prices_a_model_per_provider_and_the_page_says_which_price_each_call_pays(
    page_as: Any, live_url: str, screenshot: Any, transactional_db: None
) -> None:
    LLMProvider.objects.create(
        name="openai",
        base_url="https://api.openai.test/v1",
        default_model="gpt-4o",
        offered_models=["house-mini"],  # not on the shipped price list: unknown
    )
    LLMProvider.objects.create(
        name="router", base_url="https://router.test/v1", default_model="openai/gpt-4o"
    )
    LLMPrice.objects.create(
        model="gpt-4o", input_per_million=Decimal("2.5"), output_per_million=Decimal("10")
    )
    page = page_as("admin")
    page.goto(f"{live_url}/llm/")
    mini = page.locator('[data-offered="openai:house-mini"]')
    expect(mini.locator(".unknown-price")).to_have_text("unknown")
    own = page.locator('[data-offered="openai:gpt-4o"]')
    expect(own).to_contain_text("any provider's")
    screenshot(page, "llm-prices-before")

    own.locator("text=Set openai's price").click()
    expect(page.locator("#price-edit select[name=provider]")).to_have_value("openai")
    expect(page.locator("#price-edit input[name=model]")).to_have_value("gpt-4o")
    page.fill("#price-edit input[name=input_per_million]", "3")
    page.fill("#price-edit input[name=output_per_million]", "12")
    page.click("#price-edit >> text=Set price")
    expect(page.locator(".message")).to_contain_text(
        "Price of model 'gpt-4o' through provider 'openai' saved."
    )
    expect(own).to_contain_text("openai's own")
    expect(own).to_contain_text("12")

    page.locator('[data-price-provider=""][data-price-model="gpt-4o"]').locator("text=Edit").click()
    expect(page.locator("#price-form")).to_have_text("Change the price of gpt-4o for any provider")
    expect(page.locator("#price-edit input[name=output_per_million]")).to_have_value("10")
    screenshot(page, "llm-price-editing")
    page.fill("#price-edit input[name=output_per_million]", "9")
    page.click("#price-edit >> text=Save price")
    expect(page.locator('[data-price-provider=""][data-price-model="gpt-4o"]')).to_contain_text("9")

    page.select_option("#price-edit select[name=provider]", "router")
    page.fill("#price-edit input[name=model]", "openai/gpt-4o")
    page.fill("#price-edit input[name=input_per_million]", "2.75")
    page.fill("#price-edit input[name=output_per_million]", "11")
    page.click("#price-edit >> text=Set price")
    expect(page.locator('[data-offered="router:openai/gpt-4o"]')).to_contain_text("router's own")
    screenshot(page, "llm-prices-after")

    page.locator('[data-price-provider="openai"][data-price-model="gpt-4o"]').locator("text=Delete").click()
    expect(own).to_contain_text("any provider's")
    stored = {
        (p.provider.name if p.provider else None, p.model, str(p.output_per_million))
        for p in LLMPrice.objects.all()
    }
    assert stored == {(None, "gpt-4o", "9.0000"), ("router", "openai/gpt-4o", "11.0000")}
