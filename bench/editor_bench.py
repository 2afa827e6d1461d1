#!/usr/bin/env python3
"""Benchmark the browser editor: open and lay out 50, 500 and 2,000-node definitions, pan, save.

    .venv/bin/python bench/editor_bench.py                  # SIZES=50,500,2000 REPS=3
    SIZES=500 REPS=1 .venv/bin/python bench/editor_bench.py

Runs the real thing: embedded PostgreSQL and Valkey of `.data/bench-editor` (no durability;
with DATABASE_URL and REDIS_URL both set those servers are used instead: the database is
migrated and its `editor-bench-*` workflows replaced), Daphne serving the built assets
(`make assets` first), Debian's Chromium through Playwright. Each size is a workflow whose v1 draft is the layered DAG the 500-node browser
test imports (`layered_definition`, about sqrt(N) nodes per layer, 3 edges into each node:
5,865 edges at 2,000 nodes).

Per size and repetition, in a fresh browser context (no stored positions):
- drawn: navigation start -> every node on the canvas (fetch, parse, provisional layers);
- laid out: navigation start -> the automatic layout (static/shared/layout.js, in a Web Worker) applied and fitted;
- layout: the worker's own layout time, on opening;
- relayout: a click on Auto-layout -> the new places drawn (worker and drawing; median of 3);
- pan: 60 animation frames, each panning the view as a drag on the background does
  (zoomed out below 45 % labels are hidden, and on graphs of over 1,000 edges the edges
  too while the drag lasts); p50/p95 frame interval at the fitted zoom and at 100 %, after
  the browser is idle and 20 unmeasured frames; 16.7 ms (60 Hz) is the best possible;
- save: the POST of a changed draft until its answer (server validation, normalisation,
  checksum, write), after the editor's own pre-save validation round trip.
Medians over repetitions are printed as a Markdown table; everything goes to
bench/results/<UTC stamp>-editor/results.json.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts"), str(REPO / "bench")]

import harness  # noqa: E402
import services  # noqa: E402

SERVICES_DIR = REPO / ".data" / "bench-editor"
USER, PASSWORD = "bench-editor", "bench-editor-password-1"
PAN_FRAMES = 60
TIMEOUT_MS = 180_000

# Waits for the browser to be idle and pans 20 frames unmeasured first: the very first frames
# after opening pay for rasterising tiles and for collecting the garbage of the layout.
PAN_SCRIPT = """async (frames) => {
  const canvas = window.switchyardEditor.canvas;
  await new Promise((resolve) => requestIdleCallback(resolve, { timeout: 3000 }));
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
    canvas.panBy(i % 2 ? 5 : -5, 0);
  }
  const gaps = [];
  canvas.startPanning(); // what a drag on the background does first
  let last = performance.now();
  for (let i = 0; i <= frames; i++) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
    const now = performance.now();
    if (i > 0) gaps.push(now - last);
    last = now;
    canvas.panBy(i % 40 < 20 ? 9 : -9, 4);
  }
  canvas.stopPanning();
  return gaps;
}"""
RELAYOUTS = 3
RELAYOUT_SCRIPT = """async () => {
  const app = window.switchyardEditor;
  const started = performance.now();
  await app.autoLayout({ record: false });
  if (app.root.dataset.layout !== "done") throw new Error(document.getElementById("ed-status").textContent);
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  return performance.now() - started;
}"""
SAVE_SCRIPT = """async () => {
  const app = window.switchyardEditor;
  const before = app.version.revision;
  const started = performance.now();
  app.editDescription(`bench ${Date.now()}`);
  await app.save();
  if (app.version.revision !== before + 1) throw new Error(document.getElementById("ed-status").textContent);
  return { saveMs: app.timings.saveMs, totalMs: performance.now() - started };
}"""


def env_list(name: str, default: str) -> list[int]:
    return [int(part) for part in os.environ.get(name, default).split(",") if part.strip()]


def prepare(sizes: list[int]) -> dict[int, dict[str, Any]]:
    """Migrate, create the editor login and one workflow per size; return facts per size."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from tests.browser.editor_fixtures import layered_definition
    from workflows.store.models import Workflow
    from workflows.versions import publish as versions

    call_command("migrate", verbosity=0)
    user, _ = User.objects.get_or_create(username=USER)
    user.set_password(PASSWORD)
    user.save()
    user.groups.add(Group.objects.get_or_create(name="editor")[0])
    facts = {}
    for size in sizes:
        slug = f"editor-bench-{size}"
        Workflow.objects.filter(slug=slug).delete()
        definition = layered_definition(size, width=max(5, round(size**0.5)), fan_in=3)
        workflow = versions.create_workflow(slug, f"Editor bench, {size} nodes")
        versions.create_version(workflow, definition, comment="benchmark")
        size_kb = len(json.dumps(definition)) / 1024
        facts[size] = {"slug": slug, "edges": len(definition["edges"]), "definition_kb": round(size_kb, 1)}
    return facts


def measure_once(browser: Any, base: str, slug: str) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/workflows/{slug}/?version=1")
    page.wait_for_selector('#editor[data-layout="done"]', timeout=TIMEOUT_MS)
    page.wait_for_selector('#editor[data-validation="done"]', timeout=TIMEOUT_MS)
    timings = page.evaluate("window.switchyardEditor.timings")
    relayout = [page.evaluate(RELAYOUT_SCRIPT) for _ in range(RELAYOUTS)]
    pan_fit = page.evaluate(PAN_SCRIPT, PAN_FRAMES)
    page.evaluate("window.switchyardEditor.canvas.setView(40, 40, 1)")
    pan_full = page.evaluate(PAN_SCRIPT, PAN_FRAMES)
    saved = page.evaluate(SAVE_SCRIPT)
    context.close()
    return {
        "drawn_ms": timings["drawnAt"],
        "laid_out_ms": timings["laidOutAt"],
        "layout_ms": timings["layoutWorkerMs"],
        "relayout_ms": statistics.median(relayout),
        "fetch_ms": timings["fetchMs"],
        "pan_fit_p50_ms": statistics.median(pan_fit),
        "pan_fit_p95_ms": percentile(pan_fit, 95),
        "pan_full_p50_ms": statistics.median(pan_full),
        "pan_full_p95_ms": percentile(pan_full, 95),
        "save_ms": saved["saveMs"],
        "save_total_ms": saved["totalMs"],
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(base: str, facts: dict[int, dict[str, Any]], reps: int) -> dict[int, list[dict[str, Any]]]:
    from playwright.sync_api import sync_playwright

    from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS

    results: dict[int, list[dict[str, Any]]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        for size, fact in facts.items():
            results[size] = []
            for rep in range(reps):
                sample = measure_once(browser, base, fact["slug"])
                harness.log(
                    f"{size} nodes, rep {rep + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in sample.items())
                )
                results[size].append(sample)
        browser.close()
    return results


def table(facts: dict[int, dict[str, Any]], results: dict[int, list[dict[str, Any]]]) -> str:
    header = [
        "nodes",
        "edges",
        "JSON KB",
        "drawn ms",
        "laid out ms",
        "layout ms",
        "relayout ms",
        "pan fit p50/p95 ms",
        "pan 100% p50/p95 ms",
        "save ms",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for size, samples in results.items():

        def med(key: str, samples: list[dict[str, Any]] = samples) -> float:
            return statistics.median(s[key] for s in samples)

        row = [
            str(size),
            str(facts[size]["edges"]),
            f"{facts[size]['definition_kb']:.0f}",
            f"{med('drawn_ms'):.0f}",
            f"{med('laid_out_ms'):.0f}",
            f"{med('layout_ms'):.0f}",
            f"{med('relayout_ms'):.0f}",
            f"{med('pan_fit_p50_ms'):.1f} / {med('pan_fit_p95_ms'):.1f}",
            f"{med('pan_full_p50_ms'):.1f} / {med('pan_full_p95_ms'):.1f}",
            f"{med('save_ms'):.0f}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    sizes = env_list("SIZES", "50,500,2000")
    reps = int(os.environ.get("REPS", "3"))
    if not (REPO / "static" / "editor" / "dist" / "editor.js").exists():
        raise SystemExit("The editor is not built: run `make assets` first.")
    with contextlib.ExitStack() as stack:
        if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
            # Stopped on the way out unless another session of this folder still uses them.
            os.environ.update(stack.enter_context(services.shared(SERVICES_DIR, ephemeral=True)))
        facts, results, out = run(sizes, reps)
    print(f"\nEditor benchmark: median of {reps} runs per size, Chromium headless (software rendering)\n")
    print(table(facts, results))
    print(f"\nSamples: {out / 'results.json'}")


def run(
    sizes: list[int], reps: int
) -> tuple[dict[int, dict[str, Any]], dict[int, list[dict[str, Any]]], Path]:
    facts = prepare(sizes)
    out = harness.results_dir("editor")
    with harness.serving(out) as base:
        results = measure(base, facts, reps)
    (out / "results.json").write_text(json.dumps({"facts": facts, "samples": results}, indent=2))
    return facts, results, out


if __name__ == "__main__":
    main()
