#!/usr/bin/env python3
"""The comparison of two 500-node runs: server time, and time to first byte and to drawn in Chromium.

    .venv/bin/python bench/compare_bench.py              # NODES=500 REPS=20
    NODES=200 REPS=5 .venv/bin/python bench/compare_bench.py

Runs the real thing: embedded PostgreSQL and Valkey of `.data/bench-compare` (no
durability; with DATABASE_URL and REDIS_URL both set those servers are used and the
`compare-bench` workflow replaced), Daphne, Debian's Chromium through Playwright. The rows
are written directly (no workers): a workflow of NODES `core.noop` nodes in one chain, a
finished run whose every node has an output of ~20 keys and an `llm.chat`-like `content` of
60 words plus one LLM call, and a fork of it at the middle of the chain (`forking.fork_run`,
so half the nodes are carried over) whose executed nodes are then finished with outputs of
which every other one differs (a key changed, a word of its text changed) and an LLM call each.

Measured, after two unmeasured requests: REPS sequential GETs of the API resource and of the
page (time to the last byte, as a client on this machine sees it: Daphne, Django, the
queries), p50 and p95; the page in Chromium, median of 5 loads: time to first byte
(navigation `responseStart`) and to drawn (`loadEventEnd`). Figures only: nothing is asserted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts"), str(REPO / "bench")]

import harness  # noqa: E402
import services  # noqa: E402
from pages_bench import percentile  # noqa: E402

SERVICES_DIR = REPO / ".data" / "bench-compare"
USER = "bench-compare"
SLUG = "compare-bench"
WORDS = " ".join(f"word{n}" for n in range(60))


def definition(nodes: int) -> dict[str, Any]:
    ids = [f"n{i:04d}" for i in range(nodes)]
    edges = [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]
    return {"nodes": [{"id": n, "handler": "core.noop"} for n in ids], "edges": edges}


def output(node_id: str, changed: bool) -> dict[str, Any]:
    fields = {f"field_{k}": f"{node_id}-{k}" for k in range(18)}
    if changed:
        fields["field_3"] = "changed"
    text = WORDS.replace("word7", "WORD7") if changed else WORDS
    return {**fields, "content": text, "usage": {"input_tokens": 100, "output_tokens": 60}}


def prepare(nodes: int) -> dict[str, Any]:
    """Migrate, write the two runs, log a user in; return the run ids and a session cookie."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.test import Client

    from tests.integration.conftest import publish
    from workflows.forks import forking
    from workflows.runs import actions as runs
    from workflows.store.models import LLMCall, NodeRun, Run, Workflow

    call_command("migrate", verbosity=0)
    Workflow.objects.filter(slug=SLUG).update(active_version=None)
    Run.objects.filter(workflow__slug=SLUG).delete()
    workflow = publish(SLUG, definition(nodes))
    origin, _ = runs.start_run(workflow, {"bench": True})
    finish(origin, changed=False)
    fork = forking.fork_run(origin.pk, f"n{(nodes // 2):04d}")
    finish(fork, changed=True)
    calls = [
        LLMCall(node_run=n, run_id=n.run_id, workflow=workflow, node_id=n.node_id, attempt=1, provider="p",
                model="m", input_tokens=100, output_tokens=60)
        for n in NodeRun.objects.filter(run__in=[origin, fork], attempt=1)
    ]  # fmt: skip
    LLMCall.objects.bulk_create(calls)
    user, _ = User.objects.get_or_create(username=USER)
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client = Client()
    client.force_login(user)
    return {"cookie": client.cookies["sessionid"].value, "origin": origin.pk, "fork": fork.pk, "nodes": nodes}


def finish(run: Any, changed: bool) -> None:
    """Finish the run's not-yet-finished nodes with outputs (every other one changed if `changed`)."""
    from django.db import connection

    from workflows.store.models import NodeRun

    rows = list(
        NodeRun.objects.filter(run=run, status__in=["pending", "queued"]).values_list("id", "node_id")
    )
    outputs = [json.dumps(output(n, changed and i % 2 == 0)) for i, (_, n) in enumerate(rows)]
    with connection.cursor() as cur:  # a bench's shortcut: the rows as workers would leave them
        cur.execute(
            """UPDATE workflows_noderun n SET status = 'succeeded', attempt = 1, tries = 1,
                      output = v.output::jsonb, started_at = now(), finished_at = now()
               FROM unnest(%s::bigint[], %s::text[]) AS v(id, output) WHERE n.id = v.id""",
            [[r[0] for r in rows], outputs],
        )
        cur.execute(
            "UPDATE workflows_run SET status = 'succeeded', finished_at = now() WHERE id = %s", [run.pk]
        )


def server_times(base: str, cookie: str, reps: int, paths: dict[str, str]) -> dict[str, list[float]]:
    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    out: dict[str, list[float]] = {}
    with httpx.Client(base_url=base, cookies={"sessionid": cookie}, timeout=120) as http:
        for label, path in paths.items():
            samples = []
            for n in range(reps + 2):
                started = time.perf_counter()
                response = http.get(path)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{label}: GET {path} answered {response.status_code}")
                if n >= 2:
                    samples.append(elapsed)
            out[label] = samples
            harness.log(f"{label}: p50 {statistics.median(samples):.1f} ms ({len(response.content):,} bytes)")
    return out


def drawn_times(base: str, cookie: str, path: str) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS

    first, drawn = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
        page = context.new_page()
        for n in range(6):
            page.goto(base + path, wait_until="load", timeout=180_000)
            timing = page.evaluate(
                "(() => { const t = performance.getEntriesByType('navigation')[0];"
                " return [t.responseStart, t.loadEventEnd]; })()"
            )
            if n:
                first.append(float(timing[0]))
                drawn.append(float(timing[1]))
        browser.close()
    return {"first byte": first, "drawn": drawn}


def main() -> None:
    nodes = int(os.environ.get("NODES", "500"))
    reps = int(os.environ.get("REPS", "20"))
    with contextlib.ExitStack() as stack:
        if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
            os.environ.update(stack.enter_context(services.shared(SERVICES_DIR, ephemeral=True)))
        facts = prepare(nodes)
        a, b = facts["origin"], facts["fork"]
        paths = {
            "API: GET /api/v1/runs/{a}/comparison/{b}": f"/api/v1/runs/{a}/comparison/{b}",
            "page: /runs/{a}/compare/{b}/": f"/runs/{a}/compare/{b}/",
            "page, only the nodes that differ": f"/runs/{a}/compare/{b}/?changed=1",
        }
        out = harness.results_dir("compare")
        with harness.serving(out) as base:
            server = server_times(base, facts["cookie"], reps, paths)
            drawn = drawn_times(base, facts["cookie"], paths["page: /runs/{a}/compare/{b}/"])
    shown = {k: v for k, v in facts.items() if k != "cookie"}
    (out / "results.json").write_text(
        json.dumps({"facts": shown, "server": server, "drawn": drawn}, indent=2)
    )
    print(
        f"\nComparison of two {nodes}-node runs (a run and its fork, half carried over); {reps} requests each\n"
    )
    print("| request | p50 ms | p95 ms |\n|---|---:|---:|")
    for label, samples in server.items():
        print(f"| {label} | {percentile(samples, 50):.1f} | {percentile(samples, 95):.1f} |")
    print("\n| page in Chromium | median ms |\n|---|---:|")
    for label, samples in drawn.items():
        print(f"| {label} | {statistics.median(samples):.0f} |")
    print(f"\nSamples: {out / 'results.json'}")


if __name__ == "__main__":
    main()
