"""Managing from the pages, in Chromium: keys, triggers, subscriptions, pause/resume, charts,
workers (counts and a drain), the dark theme, the shortcuts, and no console error anywhere."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import ConsoleMessage, Page, expect

from monitoring.services import charts
from tests.integration.conftest import node, publish, wait_finished
from tests.integration.runtime import Runtime, wait_for
from workflows.runs import actions as runs
from workflows.store.models import ApiKey, DeadLetter, NodeRun, Run, Trigger, WebhookDelivery, Workflow


def watch_console(page: Page) -> list[str]:
    """Collect the page's console errors and uncaught exceptions from now on."""
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(f"{page.url}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
    return errors


def quick_workflow(slug: str = "shop") -> Workflow:
    return publish(
        slug, {"nodes": [node("a", "core.echo"), node("b")], "edges": [{"source": "a", "target": "b"}]}
    )


def test_a_key_is_created_copied_and_used_against_the_api(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    page = page_as("admin")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_url)
    errors = watch_console(page)
    page.goto(f"{live_url}/keys/")
    page.fill(".key-form input[name=name]", "deploys")
    page.check(".key-form input[value=run]")
    page.click(".key-form button[type=submit]")
    field = page.locator("#new-key")
    expect(field).to_have_value(re.compile(r"^sy_[0-9a-f]{8}_"))
    page.click("[data-copy='#new-key']")
    expect(page.locator("[data-copied-for='#new-key']")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == field.input_value()
    screenshot(page, "key-created")

    answer = httpx.get(f"{live_url}/api/v1/workflows", headers={"Authorization": f"Bearer {copied}"})
    assert answer.status_code == 200, answer.text
    key = ApiKey.objects.get(name="deploys")
    assert key.scopes == ["read", "run"] and key.last_used_at is not None

    page.goto(f"{live_url}/keys/")
    row = page.locator(f'tr[data-key="{key.prefix}"]')
    expect(row.locator("[data-last-used] time")).to_have_count(1)
    assert copied not in page.content()  # shown once
    row.locator("[data-action=revoke]").click()
    expect(page.locator(f'tr[data-key="{key.prefix}"] .badge')).to_have_text("revoked")
    refused = httpx.get(f"{live_url}/api/v1/workflows", headers={"Authorization": f"Bearer {copied}"})
    assert refused.status_code == 401
    assert errors == []


def test_a_trigger_is_created_and_its_curl_example_starts_a_run(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    quick_workflow()
    page = page_as("admin")
    errors = watch_console(page)
    page.goto(f"{live_url}/workflows/shop/live/")
    page.click("text=Webhooks")
    page.fill("input[name=name][placeholder^='Trigger']", "orders")
    page.click("text=Create trigger")
    trigger = Trigger.objects.get(name="orders")
    expect(page.locator("#trigger-secret")).to_have_value(trigger.secret)
    example = page.locator("#curl-example").inner_text()
    assert trigger.secret in example and f"/api/v1/hooks/{trigger.pk}" in example
    screenshot(page, "trigger-created")

    done = subprocess.run(["bash", "-c", example], capture_output=True, text=True, timeout=30, check=True)
    run = Run.objects.get(pk=json.loads(done.stdout)["id"])
    assert run.input == {"order": 1} and run.idempotency_key.startswith(f"hook:{trigger.pk}:")

    page.click(f'tr[data-trigger="{trigger.pk}"] [data-action=rotate]')
    rotated = Trigger.objects.get(pk=trigger.pk).secret
    assert rotated != trigger.secret
    expect(page.locator("#trigger-secret")).to_have_value(rotated)
    stale = subprocess.run(["bash", "-c", example], capture_output=True, text=True, timeout=30)
    assert "does not match" in stale.stdout  # the old secret is refused
    assert errors == []


class Receiver(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.received.append({"event": self.headers["X-Switchyard-Event"], "body": json.loads(body)})
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


def test_a_subscription_shows_its_delivery_log_and_sends_again(
    runtime: Runtime, receiver: str, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = quick_workflow()
    page = page_as("admin")
    errors = watch_console(page)
    page.goto(f"{live_url}/workflows/shop/webhooks/")
    page.fill(".subscription-form input[name=url]", receiver)
    page.check(".subscription-form input[value='run.succeeded']")
    page.click("text=Subscribe")
    expect(page.locator("#subscription-secret")).to_be_visible()
    run, _ = runs.start_run(workflow, {"n": 1})
    wait_finished(run)
    delivery = wait_for(
        lambda: WebhookDelivery.objects.filter(status="succeeded").first(), 60, "the delivery to succeed"
    )
    page.click("text=Delivery log")
    row = page.locator(f'tr[data-delivery="{delivery.pk}"]')
    expect(row.locator("[data-status]")).to_have_text("succeeded")
    screenshot(page, "delivery-log")
    row.locator("[data-action=resend]").click()
    expect(page.locator(".message.success")).to_contain_text(f"Delivery {delivery.pk} is being sent again")
    wait_for(lambda: len(Receiver.received) >= 2 or None, 60, "the delivery to arrive again")
    assert [r["event"] for r in Receiver.received] == ["run.succeeded", "run.succeeded"]
    assert Receiver.received[0]["body"] == Receiver.received[1]["body"]
    wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).status == "succeeded" or None, 30, "resent")
    page.reload()
    expect(page.locator(f'tr[data-delivery="{delivery.pk}"] [data-status]')).to_have_text("succeeded")
    assert errors == []


def test_pause_and_resume_buttons_hold_and_start_runs(page_as: Any, live_url: str, screenshot: Any) -> None:
    workflow = quick_workflow()
    page = page_as("operator")
    errors = watch_console(page)
    page.goto(f"{live_url}/workflows/shop/live/")
    page.click("[data-action=pause]")
    expect(page.locator("#paused-badge")).to_be_visible()
    assert Workflow.objects.get(pk=workflow.pk).paused
    run, _ = runs.start_run(workflow, {})
    assert Run.objects.get(pk=run.pk).status == "waiting"
    screenshot(page, "paused")
    page.click("[data-action=resume]")
    expect(page.locator(".message.success")).to_contain_text("1 waiting run(s) started")
    assert Run.objects.get(pk=run.pk).status == "running" and not Workflow.objects.get(pk=workflow.pk).paused
    assert errors == []


def history(workflow: Workflow) -> None:
    """Finished runs, a dead letter and backlog samples inside the shortest window."""
    end = timezone.now() - timedelta(minutes=3)
    for n, status in enumerate(["succeeded"] * 4 + ["failed"]):
        run, _ = runs.start_run(workflow, {"n": n})
        Run.objects.filter(pk=run.pk).update(
            status=status,
            created_at=end - timedelta(seconds=n + 1),
            finished_at=end + timedelta(seconds=n * 20),
        )
    first = NodeRun.objects.filter(run=run, node_id="a").get()
    DeadLetter.objects.create(run=run, node_run=first, node_id="a", attempt=1, error="x")
    charts.sample_backlog({"default": 7}, {workflow.pk: 3}, end)


@pytest.mark.parametrize("where", ["/", "/workflows/shop/live/"], ids=["overview", "live"])
def test_charts_are_drawn_with_data_for_every_window(
    page_as: Any, live_url: str, screenshot: Any, where: str
) -> None:
    history(quick_workflow())
    page = page_as("viewer")
    errors = watch_console(page)
    page.goto(f"{live_url}{where}")
    boxes = page.locator("[data-chart]")
    expect(boxes).to_have_count(4)
    for n in range(4):  # drawn once: the charts' script is running, so a click is heard
        expect(boxes.nth(n)).to_have_attribute("data-state", "drawn")
    for name in charts.WINDOWS:
        page.click(f"button[data-window='{name}']")
        for n in range(4):
            box = boxes.nth(n)
            expect(box).to_have_attribute("data-window", name)
            expect(box).to_have_attribute("data-state", "drawn")
            expect(box.locator("canvas")).to_have_count(1)
            assert int(box.get_attribute("data-points") or 0) > 0, (name, box.get_attribute("data-chart"))
    screenshot(page, "charts")
    assert errors == []


def worker_cell(page: Page, worker: str, field: str) -> Any:
    return page.locator(f'tr[data-worker="{worker}"] [data-{field}]')


def test_workers_page_counts_and_a_drain_sends_work_to_the_others(
    runtime: Runtime, page_as: Any, live_url: str, screenshot: Any
) -> None:
    workflow = quick_workflow()
    runtime.wait_ready()
    page = page_as("admin")
    errors = watch_console(page)
    page.goto(f"{live_url}/workers/")
    expect(page.locator('tr[data-worker="worker-1"]')).to_be_visible()
    page.select_option("select[name=worker]", "worker-1")
    page.click("[data-action=drain]")
    expect(worker_cell(page, "worker-1", "drained")).to_be_visible()
    expect(worker_cell(page, "worker-1", "state")).to_have_text("drained", timeout=30_000)
    before = int(worker_cell(page, "worker-1", "processed").inner_text())

    started = [runs.start_run(workflow, {"n": n})[0] for n in range(6)]
    for run in started:
        wait_finished(run)
    assert set(NodeRun.objects.filter(run__in=started).values_list("worker", flat=True)) == {"worker-2"}
    expect(worker_cell(page, "worker-2", "processed")).not_to_have_text("0")
    assert int(worker_cell(page, "worker-1", "processed").inner_text()) == before
    screenshot(page, "worker-drained")

    page.select_option("select[name=worker]", "worker-1")
    page.click("[data-action=undrain]")
    expect(worker_cell(page, "worker-1", "drained")).to_have_count(0)
    expect(worker_cell(page, "worker-1", "state")).not_to_have_text("drained", timeout=30_000)
    assert errors == []


def test_the_dark_theme_follows_the_system_setting(page_as: Any, live_url: str, screenshot: Any) -> None:
    page = page_as("viewer")
    page.emulate_media(color_scheme="dark")
    page.goto(f"{live_url}/runs/")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(15, 19, 32)", background
    screenshot(page, "dark")
    page.emulate_media(color_scheme="light")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(244, 246, 249)"


def test_question_mark_lists_the_shortcuts_and_g_r_goes_to_runs(
    page_as: Any, live_url: str, screenshot: Any
) -> None:
    page = page_as("viewer")
    errors = watch_console(page)
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Dead letters")
    screenshot(page, "shortcuts")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.keyboard.press("g")
    page.keyboard.press("r")
    page.wait_for_url(f"{live_url}/runs/")
    page.keyboard.press("g")
    page.keyboard.press("d")
    page.wait_for_url(f"{live_url}/dead-letters/")
    assert errors == []


PAGES = [
    "/",
    "/runs/",
    "/dead-letters/",
    "/workers/",
    "/inbox/",
    "/workflows/",
    "/workflows/shop/live/",
    "/workflows/shop/webhooks/",
    "/keys/",
    "/mcp-servers/",
    "/api/v1/docs",
]


@pytest.mark.parametrize("width", [1400, 800])
def test_every_page_is_free_of_console_errors_and_fits(
    page_as: Any, live_url: str, screenshot: Any, width: int
) -> None:
    history(quick_workflow())
    page = page_as("admin")
    page.set_viewport_size({"width": width, "height": 900})
    errors = watch_console(page)
    for path in PAGES:
        page.goto(f"{live_url}{path}", wait_until="domcontentloaded", timeout=60_000)
        page.wait_for_load_state("load", timeout=60_000)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than {width} px"
        if width == 800 and "docs" not in path:  # the API docs page is too long for a full-page PNG
            screenshot(page, path.strip("/").replace("/", "-") or "overview")
    assert errors == []
