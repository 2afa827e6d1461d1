#!/usr/bin/env python3
"""Benchmark the operators' list, search and group pages over 100,000 runs and 40,000 dead letters.

    .venv/bin/python bench/pages_bench.py                   # RUNS=100000 LETTERS=40000 REPS=20
    RUNS=20000 LETTERS=8000 REPS=5 .venv/bin/python bench/pages_bench.py

Runs the real thing: embedded PostgreSQL and Valkey of `.data/bench-pages` (no durability;
with DATABASE_URL and REDIS_URL both set those servers are used, and their `pages-bench-*`
workflows replaced), Daphne, Debian's Chromium through Playwright. The rows are written
with a few INSERT ... SELECT generate_series statements (seconds, not minutes): runs of four
workflows over the last 7 days with inputs `{"customer": "cust-<n>", "order": {"total":
<n>}, "region": ...}`, three node rows each, and for the failed ones a dead letter on node
`b` or `c` whose error is one of a few templates with numbers in it (so they fall into a
handful of groups by signature), most open; then ANALYZE.

Per page, REPS sequential GETs with a logged-in session after two unmeasured ones: p50 and
p95 of the time to the last byte (Daphne, Django, the queries: the server's time as a
client on this machine sees it). For a few pages, time to a drawn page in Chromium
(navigation start to the load event, with the page's scripts run), median of 5.
Printed as one Markdown table; samples go to bench/results/<UTC stamp>-pages/results.json.
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

SERVICES_DIR = REPO / ".data" / "bench-pages"
USER = "bench-pages"
SLUGS = [f"pages-bench-{n}" for n in range(1, 5)]
ERRORS = [
    "HTTP 503 from https://api.example/users/' || (i %% 9000) || ' after ' || (i %% 30) || '.5 s",
    "Node ''c'' timed out after ' || (i %% 60) || ' s.",
    "KeyError: ''field_' || (i %% 40) || '''",
    "ValueError: order ' || i || ' has a negative total (' || -(i %% 500) || ')",
]


def insert_rows(runs: int, letters: int) -> None:
    """Write `runs` runs (3 nodes each) and `letters` dead letters with set-based SQL."""
    from django.db import connection

    from tests.integration.conftest import node, publish

    definition = {
        "nodes": [node("a"), node("b"), node("c")],
        "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
    }
    workflows = [publish(slug, definition) for slug in SLUGS]
    ids = [(w.pk, w.active_version_id) for w in workflows]
    failed_every = max(1, runs // letters)  # every k-th run failed and filed a letter
    error_sql = " WHEN ".join(f"{n} THEN '{text}'" for n, text in enumerate(ERRORS))
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO workflows_run (workflow_id, version_id, status, input, request_hash, epoch,
                                       created_at, finished_at)
            SELECT (%(w)s::bigint[])[1 + i %% 4], (%(v)s::bigint[])[1 + i %% 4],
                   CASE WHEN i %% %(k)s = 0 THEN 'failed' WHEN i %% 50 = 1 THEN 'running' ELSE 'succeeded' END,
                   jsonb_build_object('customer', 'cust-' || (i %% 5000), 'order',
                       jsonb_build_object('total', i %% 300), 'region', (ARRAY['eu','us','ap'])[1 + i %% 3]),
                   '', 0, now() - make_interval(secs => (%(n)s - i) * 604800.0 / %(n)s),
                   CASE WHEN i %% 50 = 1 THEN NULL
                        ELSE now() - make_interval(secs => (%(n)s - i) * 604800.0 / %(n)s - 2) END
            FROM generate_series(1, %(n)s) AS i
            """,
            {"w": [w for w, _ in ids], "v": [v for _, v in ids], "n": runs, "k": failed_every},
        )
        cur.execute(
            """
            INSERT INTO workflows_noderun (run_id, node_id, status, attempt, tries, queue, job_id, worker,
                                           error, traceback, output, started_at, finished_at)
            SELECT r.id, n.node_id,
                   CASE WHEN r.status = 'failed' AND n.node_id = 'c' THEN 'dead'
                        WHEN r.status = 'running' THEN 'pending' ELSE 'succeeded' END,
                   1, 1, 'default', '', '', '', '', '{}'::jsonb, r.created_at, r.finished_at
            FROM workflows_run r CROSS JOIN (VALUES ('a'), ('b'), ('c')) AS n(node_id)
            WHERE r.workflow_id = ANY(%(w)s)
            """,
            {"w": [w for w, _ in ids]},
        )
        cur.execute(
            f"""
            INSERT INTO workflows_deadletter (run_id, node_run_id, node_id, attempt, error, traceback,
                                              input_snapshot, status, created_at, reason, signature)
            SELECT r.id, n.id, n.node_id, 3, e.text, '', jsonb_build_object('input', r.input),
                   CASE WHEN i %% 10 = 0 THEN 'discarded' WHEN i %% 10 = 1 THEN 'replayed' ELSE 'open' END,
                   r.finished_at, '', ''
            FROM (SELECT id, input, finished_at, row_number() OVER (ORDER BY id) AS i
                  FROM workflows_run WHERE status = 'failed' AND workflow_id = ANY(%(w)s)) AS r
            JOIN workflows_noderun n ON n.run_id = r.id AND n.node_id = 'c'
            CROSS JOIN LATERAL (SELECT CASE i %% 4 WHEN {error_sql} END AS text) AS e
            LIMIT %(letters)s
            """,
            {"w": [w for w, _ in ids], "letters": letters},
        )
        # The signature as core.signatures computes it: one per distinct error (few thousand).
        cur.execute("SELECT DISTINCT error FROM workflows_deadletter WHERE signature = ''")
        from workflows.core.signatures import error_signature

        pairs = [(error, error_signature(error)) for (error,) in cur.fetchall()]
        cur.execute(
            """UPDATE workflows_deadletter d SET signature = v.sig
               FROM unnest(%s::text[], %s::text[]) AS v(error, sig) WHERE d.error = v.error""",
            [[p[0] for p in pairs], [p[1] for p in pairs]],
        )
        cur.execute("ANALYZE")


def prepare(runs: int, letters: int) -> dict[str, Any]:
    """Migrate, write the rows (unless they are there), log a user in; return facts and a cookie."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.test import Client

    from workflows.store.models import DeadLetter, Run

    call_command("migrate", verbosity=0)
    if Run.objects.filter(workflow__slug__in=SLUGS).count() < runs:
        harness.log(f"writing {runs} runs and {letters} dead letters")
        started = time.monotonic()
        Run.objects.filter(workflow__slug__in=SLUGS).delete()
        insert_rows(runs, letters)
        harness.log(f"rows written in {time.monotonic() - started:.1f} s")
    user, _ = User.objects.get_or_create(username=USER)
    user.groups.add(Group.objects.get_or_create(name="operator")[0])
    client = Client()
    client.force_login(user)
    middle = Run.objects.order_by("id").values_list("id", flat=True)[runs // 2]
    group = (
        DeadLetter.objects.filter(status="open").values("run__workflow__slug", "node_id", "signature").first()
    )
    return {
        "cookie": client.cookies["sessionid"].value,
        "runs": Run.objects.count(),
        "letters": DeadLetter.objects.count(),
        "open_letters": DeadLetter.objects.filter(status="open").count(),
        "middle": middle,
        "group": group,
    }


def pages(facts: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, method, path) of every list, search and group page measured."""
    g = facts["group"]
    group = f"workflow={g['run__workflow__slug']}&node={g['node_id']}&signature={g['signature']}"
    return [
        ("for scale: overview (a page not changed here)", "GET", "/"),
        ("for scale: workers (a page not changed here)", "GET", "/workers/"),
        ("runs: newest", "GET", "/runs/"),
        ("runs: status failed", "GET", "/runs/?status=failed"),
        ("runs: one workflow", "GET", f"/runs/?workflow={SLUGS[0]}"),
        ("runs: input customer=cust-42", "GET", "/runs/?input=customer%3Dcust-42"),
        ("runs: input order.total=17 + succeeded", "GET", "/runs/?input=order.total%3D17&status=succeeded"),
        ("runs: error contains 'timed out'", "GET", "/runs/?error=timed+out"),
        ("runs: failing node c", "GET", "/runs/?node=c"),
        ("runs: last 24 h", "GET", "/runs/?since=24h"),
        ("runs: older page (middle)", "GET", f"/runs/?before={facts['middle']}"),
        ("runs: newer page (middle)", "GET", f"/runs/?after={facts['middle']}"),
        ("runs: cancel all matching (count)", "POST", "/runs/bulk/?do=cancel-matching"),
        ("dead letters: groups (open)", "GET", "/dead-letters/"),
        ("dead letters: groups (any status)", "GET", "/dead-letters/?status=any"),
        ("dead letters: groups, last 24 h", "GET", "/dead-letters/?since=24h"),
        ("dead letters: list", "GET", "/dead-letters/?view=list"),
        ("dead letters: list, error contains", "GET", "/dead-letters/?view=list&error=negative"),
        ("dead letters: one group's letters", "GET", f"/dead-letters/?view=list&{group}"),
        (
            "dead letters: discard matching (count)",
            "POST",
            "/dead-letters/bulk/?action=discard&scope=matching",
        ),
        ("API: runs by input", "GET", "/api/v1/runs?input=customer%3Dcust-42"),
        ("API: dead-letter groups", "GET", "/api/v1/deadletters/groups"),
    ]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def server_times(base: str, cookie: str, reps: int, facts: dict[str, Any]) -> dict[str, list[float]]:
    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)
    out: dict[str, list[float]] = {}
    with httpx.Client(base_url=base, cookies={"sessionid": cookie}, timeout=60) as http:
        csrf = http.get("/runs/").cookies.get("csrftoken") or http.cookies.get("csrftoken", "")
        for label, method, path in pages(facts):
            url, _, form = path.partition("?") if method == "POST" else (path, "", "")
            body = dict(pair.split("=", 1) for pair in form.split("&") if pair) | {"reason": "bench"}
            samples = []
            for n in range(reps + 2):
                started = time.perf_counter()
                if method == "GET":
                    response = http.get(path)
                else:
                    response = http.post(url, data=body, headers={"X-CSRFToken": csrf, "Referer": base})
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{label}: {method} {path} answered {response.status_code}")
                if n >= 2:
                    samples.append(elapsed)
            out[label] = samples
            harness.log(f"{label}: p50 {statistics.median(samples):.1f} ms")
    return out


DRAWN = ["runs: newest", "runs: input customer=cust-42", "dead letters: groups (open)", "dead letters: list"]


def drawn_times(base: str, cookie: str, facts: dict[str, Any]) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS

    paths = {label: path for label, _, path in pages(facts)}
    out: dict[str, list[float]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
        page = context.new_page()
        for label in DRAWN:
            samples = []
            for n in range(6):
                page.goto(base + paths[label], wait_until="load", timeout=180_000)
                timing = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
                if n:
                    samples.append(float(timing))
            out[label] = samples
        browser.close()
    return out


def table(server: dict[str, list[float]], drawn: dict[str, list[float]]) -> str:
    lines = [
        "| page | server p50 ms | server p95 ms | drawn in Chromium, median ms |",
        "|---|---:|---:|---:|",
    ]
    for label, samples in server.items():
        shown = f"{statistics.median(drawn[label]):.0f}" if label in drawn else "–"
        lines.append(f"| {label} | {percentile(samples, 50):.1f} | {percentile(samples, 95):.1f} | {shown} |")
    return "\n".join(lines)


def main() -> None:
    runs = int(os.environ.get("RUNS", "100000"))
    letters = int(os.environ.get("LETTERS", "40000"))
    reps = int(os.environ.get("REPS", "20"))
    with contextlib.ExitStack() as stack:
        if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
            os.environ.update(stack.enter_context(services.shared(SERVICES_DIR, ephemeral=True)))
        facts = prepare(runs, letters)
        out = harness.results_dir("pages")
        with harness.serving(out) as base:
            server = server_times(base, facts["cookie"], reps, facts)
            (out / "server.json").write_text(json.dumps(server, indent=2))  # kept if Chromium fails
            drawn = drawn_times(base, facts["cookie"], facts)
    shown = {k: v for k, v in facts.items() if k != "cookie"}
    (out / "results.json").write_text(
        json.dumps({"facts": shown, "server": server, "drawn": drawn}, indent=2)
    )
    print(
        f"\nPages benchmark: {facts['runs']:,} runs, {facts['letters']:,} dead letters "
        f"({facts['open_letters']:,} open); {reps} requests per page, one at a time\n"
    )
    print(table(server, drawn))
    print(f"\nSamples: {out / 'results.json'}")


if __name__ == "__main__":
    main()
