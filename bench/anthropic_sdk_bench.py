#!/usr/bin/env python3
"""Anthropic streams: the official SDK (anthropic 2.14) against Switchyard's hand-written reader.

    .venv/bin/python bench/anthropic_sdk_bench.py            # 20,000 text deltas, 5 rounds
    .venv/bin/python bench/anthropic_sdk_bench.py --events 2000 --rounds 3

What it measures, each side reading the same server-sent events from memory (no socket, so
the figures are the reading, not the network):

1. per event: a stream of EVENTS text_delta events and one tool_use block (its input in
   input_json_delta pieces), read to the end with the text and the tool call assembled.
   - ours: `anthropic_messages.read_events` over the lines (what client.complete does);
   - SDK raw: `client.messages.create(stream=True)` iterated (typed events, no assembly);
   - SDK helper: `client.messages.stream(...)` and `get_final_message()` (the SDK's own
     assembly: what would replace ours).
   The SDK reads from an httpx2.MockTransport answer; ours from a list of lines. Median of
   ROUNDS, microseconds per event.
2. import: wall time and resident memory added by importing each side, in a fresh process
   with Django already set up (the workers' situation); median of 3 processes.

Printed as a table; docs/admins/llm-providers.md keeps the figures and the decision.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")


def events(count: int) -> list[tuple[str, dict[str, Any]]]:
    """A message of `count` text deltas, then one tool_use block in 20 JSON pieces."""
    start = {
        "id": "msg_b",
        "type": "message",
        "role": "assistant",
        "model": "claude-bench",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    out.append(
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
    )
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " token"}}
    out += [("content_block_delta", delta)] * count
    out.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    tool = {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {}}
    out.append(("content_block_start", {"type": "content_block_start", "index": 1, "content_block": tool}))
    text = json.dumps({"query": "x" * 200, "limit": 10})
    for n in range(0, len(text), len(text) // 20 + 1):
        piece = {"type": "input_json_delta", "partial_json": text[n : n + len(text) // 20 + 1]}
        out.append(("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": piece}))
    out.append(("content_block_stop", {"type": "content_block_stop", "index": 1}))
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": count},
    }
    out += [("message_delta", end), ("message_stop", {"type": "message_stop"})]
    return out


def sse_bytes(stream: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in stream).encode()


def time_ours(body: bytes) -> tuple[float, str]:
    import django

    django.setup()
    from workflows.llm import anthropic_messages as am
    from workflows.llm.client import _Call
    from workflows.llm.providers import Endpoint

    endpoint = Endpoint("b", "http://bench.test", "k", "claude-bench", 60, False, kind="anthropic")
    lines = body.decode().split("\n")
    started = time.perf_counter()
    call = _Call(endpoint, "bench", time.monotonic() + 600, time.monotonic())
    parts = am.read_events(am.sse_events(iter(lines), call), call, lambda _: None, None)
    done = parts.completion(call)
    took = time.perf_counter() - started
    assert done.tool_calls[0]["arguments"]["limit"] == 10
    return took, done.text[:12]


def sdk_client(body: bytes) -> Any:
    import anthropic
    import httpx2

    def answer(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    return anthropic.Anthropic(api_key="k", base_url="http://bench.test", http_client=http, max_retries=0)


def time_sdk_raw(body: bytes) -> tuple[float, str]:
    client = sdk_client(body)
    started = time.perf_counter()
    text = []
    for event in client.messages.create(
        model="claude-bench", max_tokens=10, messages=[{"role": "user", "content": "hi"}], stream=True
    ):
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            text.append(event.delta.text)
    took = time.perf_counter() - started
    return took, "".join(text)[:12]


def time_sdk_helper(body: bytes) -> tuple[float, str]:
    client = sdk_client(body)
    started = time.perf_counter()
    with client.messages.stream(
        model="claude-bench", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        for _ in stream.text_stream:
            pass
        final = stream.get_final_message()
    took = time.perf_counter() - started
    assert final.content[1].input["limit"] == 10
    return took, final.content[0].text[:12]


IMPORT_PROBE = """
import os, sys, time, psutil
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
import django
django.setup()
import workflows.llm.client
rss = psutil.Process().memory_info().rss
t = time.perf_counter()
{statement}
took = time.perf_counter() - t
print(took, psutil.Process().memory_info().rss - rss)
"""


def import_cost(statement: str) -> tuple[float, float]:
    runs = []
    for _ in range(3):
        probe = IMPORT_PROBE.format(root=ROOT, statement=statement)
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        seconds, rss = out.stdout.split()
        runs.append((float(seconds), float(rss)))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    import logging

    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request otherwise
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    stream = events(args.events)
    body = sse_bytes(stream)
    print(f"{len(stream)} events, {len(body) / 1024:.0f} KiB, median of {args.rounds} rounds")
    for name, timed in (
        ("ours", time_ours),
        ("SDK raw events", time_sdk_raw),
        ("SDK stream helper", time_sdk_helper),
    ):
        timed(body)  # warm: imports, first-call caches
        times = [timed(body)[0] for _ in range(args.rounds)]
        per_event = statistics.median(times) / len(stream) * 1e6
        print(f"{name:18} {per_event:7.2f} µs/event   ({statistics.median(times) * 1000:.1f} ms a stream)")
    for name, statement in (
        ("ours", "import workflows.llm.anthropic_messages"),
        ("SDK", "import anthropic; anthropic.Anthropic(api_key='k', max_retries=0)"),
    ):
        seconds, rss = import_cost(statement)
        print(f"import {name:5} {seconds * 1000:7.1f} ms   +{rss / 1e6:5.1f} MB resident")


if __name__ == "__main__":
    main()
