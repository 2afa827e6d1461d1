#!/usr/bin/env python3
"""Streamed LLM text under load: provider chunk -> websocket and SSE clients, and the engine's cost.

    .venv/bin/python bench/llm_stream_bench.py                       # 50 streams, 20 tokens/s, 20 s
    .venv/bin/python bench/llm_stream_bench.py --streams 200 --pairs 0  # the streams alone

Everything runs as `make run` runs it (2 RQ workers, scheduler, broadcaster, Daphne), set up by
bench/dashboard_bench.py's Bench (embedded servers in .data/bench-dash, database recreated),
the workers running the streams in slots (SWITCHYARD_WORKER_SLOTS: half the streams each, and
some to spare), and a scripted provider in this process whose every token is
`t<send time in µs>`:

1. streams: STREAMS runs of one llm.chat node, each streamed at RATE tokens/s for TOKENS
   tokens; per run one websocket client (topic llm:run:<id>, the run page's) and one SSE
   client (the attempt's endpoint), and one websocket client for them all (llm:workflow:<id>,
   the live page's), in a child process. The provider holds every stream until
   all clients are connected and every worker has asked, then sends; a token's delay is its
   arrival minus its send time (same clock).
   p50/p95/max per kind, tokens/s delivered, CPU of Daphne, the broadcaster and the workers
   (% of a core), and the machine's load average before and after (it is shared).
2. throughput: BATCH runs of the 4-node demo DAG, wall time to finish, node executions/s:
   alone, then while STREAMS streams run; PAIRS times, medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import harness
import psutil
from dashboard_bench import Bench

from workflows.llm.demo_server import chunk

MODEL = "bench-model"
CONNECT_BATCH = 25  # runs whose clients connect at once
SPARE_SLOTS = 20  # per worker, beyond its half of the streams: the throughput phase's nodes


# --------------------------------------------------------------------------- the provider


class TimedProvider(BaseHTTPRequestHandler):
    """Stream TOKENS tokens at RATE a second; each token is its own send time.

    Each request waits at the gate (`go`) before its first token, so that every stream's
    clients are connected before anything is sent: a token sent before its client connected
    would measure the connection's set-up, not the delivery.
    """

    protocol_version = "HTTP/1.1"
    rate = 20.0
    tokens = 400
    go = threading.Event()
    arrived = 0
    lock = threading.Lock()

    @classmethod
    def close_gate(cls) -> None:
        with cls.lock:
            cls.go.clear()
            cls.arrived = 0

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        with self.lock:
            TimedProvider.arrived += 1
        self.go.wait()
        start = time.monotonic()
        for n in range(self.tokens):
            time.sleep(max(0.0, start + n / self.rate - time.monotonic()))
            delta = {"content": f"t{int(time.time() * 1e6)} "}
            self.send(chunk(MODEL, [{"index": 0, "delta": delta, "finish_reason": None}]))
        self.send(chunk(MODEL, [{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        self.send({**chunk(MODEL, []), "usage": {"prompt_tokens": 5, "completion_tokens": self.tokens}})
        self.wfile.write(b"data: [DONE]\n\n")

    def send(self, event: dict[str, Any]) -> None:
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.wfile.flush()


class ProviderServer(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: hundreds of streams' calls connecting at once
    # overflowed it, and a call whose connection the kernel reset failed its node (ReadError;
    # the bench's nodes have one attempt), so that the phase waited for it forever.
    request_queue_size = 1024


def serve_provider(rate: float, tokens: int) -> str:
    TimedProvider.rate, TimedProvider.tokens = rate, tokens
    server = ProviderServer(("127.0.0.1", 0), TimedProvider)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


# --------------------------------------------------------------------------- the clients


def token_delays(text: str, arrival: float, since: float) -> list[float]:
    """Delays (ms) of the tokens in `text` sent after `since` (µs timestamps)."""
    found = []
    for word in text.split():
        if word.startswith("t") and word[1:].isdigit():
            sent = int(word[1:]) / 1e6
            if sent >= since:
                found.append((arrival - sent) * 1000)
    return found


async def websocket_client(
    c: dict[str, Any], topic: str, runs: list[int], out: list[float], ready: asyncio.Queue[int]
) -> None:
    """Follow `topic` as a page does; record the delay of every token of `runs` it brings."""
    from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol

    done = asyncio.get_running_loop().create_future()
    seen = dict.fromkeys(runs, 0)  # characters of each run's text placed so far
    finished: set[int] = set()
    since = [0.0]

    class Client(WebSocketClientProtocol):
        def onOpen(self) -> None:  # noqa: N802 - autobahn's API
            since[0] = time.time()
            ready.put_nowait(0)

        def onClose(self, was_clean: bool, code: Any, reason: Any) -> None:  # noqa: N802 - autobahn's API
            if not done.done():
                done.set_result(False)  # refused or dropped: its tokens count as not delivered

        def onMessage(self, payload: bytes, is_binary: bool) -> None:  # noqa: N802 - autobahn's API
            at = time.time()
            for s in json.loads(payload)["data"].get("streams", []):
                have = seen[s["run"]]
                if s["offset"] > have:
                    continue  # after a gap: wait for the whole text, as the page does
                out.extend(token_delays(s["text"][have - s["offset"] :], at, since[0]))
                seen[s["run"]] = max(have, s["offset"] + len(s["text"]))
                if s["done"]:
                    finished.add(s["run"])
            if len(finished) == len(runs) and not done.done():
                done.set_result(True)
                self.sendClose()

    host, port = c["ws"].split("//")[1].split("/")[0].split(":")
    factory = WebSocketClientFactory(
        f"{c['ws']}?topics={topic}", origin=c["origin"], headers={"Cookie": c["cookie"]}
    )
    factory.setProtocolOptions(openHandshakeTimeout=120)
    factory.protocol = Client
    await asyncio.get_running_loop().create_connection(factory, host, int(port))
    await asyncio.wait_for(done, 600)


async def sse_client(
    base: str, token: str, run_id: int, out: dict[str, list[float]], ready: asyncio.Queue[int]
) -> None:
    import httpx

    url = f"{base}/api/v1/runs/{run_id}/nodes/ask/attempts/1/stream"
    async with httpx.AsyncClient(timeout=600) as client:
        since = time.time()
        async with client.stream("GET", url, headers={"Authorization": f"Bearer {token}"}) as response:
            response.raise_for_status()
            ready.put_nowait(run_id)
            event, written = "", 0.0
            async for line in response.aiter_lines():
                if line.startswith("id: "):  # a Redis stream entry's id: the ms its XADD ran
                    written = int(line[4:].split("-")[0]) / 1000
                elif line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "text":
                    at, text = time.time(), json.loads(line[6:])["text"]
                    found = token_delays(text, at, since)
                    out["sse"] += found
                    # Where the time went: provider → the worker's write to Redis, then Redis → client.
                    out["sse_from_redis"] += [(at - written) * 1000] * len(found)
                    out["sse_to_redis"] += [d - (at - written) * 1000 for d in found]


def serve_clients(config: str) -> None:
    """Child process: per run a websocket client on its run page's topic and an SSE client,
    and one websocket client on the workflow's live page topic (every stream); print "ready"
    once all are connected, and the delays at the end."""
    c = json.loads(config)
    out: dict[str, list[float]] = {
        "ws": [],
        "ws_live": [],
        "sse": [],
        "sse_to_redis": [],
        "sse_from_redis": [],
    }

    async def main() -> None:
        # Connected in waves of CONNECT_BATCH runs: 400 handshakes at once on a busy Daphne
        # (2 shared cores) ran past autobahn's opening handshake timeout, every one of them.
        ready: asyncio.Queue[int] = asyncio.Queue()

        async def connected(count: int) -> None:
            for _ in range(count):
                await asyncio.wait_for(ready.get(), 120)

        tasks = []
        if c["live"]:
            live = websocket_client(c, f"llm:workflow:{c['workflow']}", c["all_runs"], out["ws_live"], ready)
            tasks.append(asyncio.create_task(live))
            await connected(1)
        for first in range(0, len(c["runs"]), CONNECT_BATCH):
            batch = c["runs"][first : first + CONNECT_BATCH]
            for run_id in batch:
                page = websocket_client(c, f"llm:run:{run_id}", [run_id], out["ws"], ready)
                tasks.append(asyncio.create_task(page))
                tasks.append(asyncio.create_task(sse_client(c["origin"], c["token"], run_id, out, ready)))
            await connected(2 * len(batch))
        print("ready", flush=True)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    print(json.dumps(out))


class Clients:
    """The clients in `procs` child processes, runs dealt out among them; the first also
    follows the live page. One process measured itself at 100 streams: its event loop, behind
    on 2,000 SSE events and 2,000 websocket messages a second, stamped arrivals late."""

    def __init__(self, config: dict[str, Any], procs: int) -> None:
        runs = config["all_runs"]
        self.children = []
        for n in range(procs):  # one after another: Daphne rejects a handshake not done in 5 s
            mine = {**config, "runs": runs[n::procs], "live": n == 0}
            child = subprocess.Popen(
                [sys.executable, __file__, "--serve-clients", json.dumps(mine)],
                stdout=subprocess.PIPE,
                text=True,
            )
            self.children.append(child)
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("the stream clients did not connect")

    def cpu_seconds(self) -> float:
        return sum(sum(psutil.Process(c.pid).cpu_times()[:2]) for c in self.children)

    def communicate(self, timeout: float) -> dict[str, list[float]]:
        delays: dict[str, list[float]] = {}
        for child in self.children:
            out, _ = child.communicate(timeout=timeout)
            for kind, found in json.loads(out).items():
                delays.setdefault(kind, []).extend(found)
        return delays


# --------------------------------------------------------------------------- the bench


class StreamBench(Bench):
    def prepare(self) -> None:
        super().prepare()
        from django.contrib.auth.models import User

        from workflows.integrations import keys
        from workflows.store.models import LLMProvider
        from workflows.versions import publish as versions

        url = serve_provider(self.args.rate, self.args.tokens)
        LLMProvider.objects.create(
            name="bench", base_url=url, default_model=MODEL, is_default=True, timeout_seconds=600
        )
        node = {"id": "ask", "handler": "llm.chat", "config": {"prompt": "go"}, "timeout_seconds": 900}
        self.llm = versions.create_workflow("llm-bench", "LLM bench")
        versions.publish_version(versions.create_version(self.llm, {"nodes": [node], "edges": []}))
        self.llm.refresh_from_db()
        viewer = User.objects.get(username="bench-viewer")
        self.token = keys.create_key(viewer, "bench", ["read"])[1]

    def start(self) -> None:
        """Start Bench's two workers with a slot for every stream (until 2026-11-27 this
        started one worker process per stream: an attempt held its worker while it streamed)."""
        self.env["SWITCHYARD_WORKER_SLOTS"] = str(self.args.streams // 2 + SPARE_SLOTS)
        super().start()
        time.sleep(2)  # settle

    def start_streams(self) -> tuple[list[int], Clients]:
        """Start the runs and their clients; open the gate once all are connected and streaming."""
        TimedProvider.close_gate()
        ids = [self.runs.start_run(self.llm, {})[0].pk for _ in range(self.args.streams)]
        config = {
            "all_runs": ids,
            "ws": f"ws://127.0.0.1:{self.port}/ws/monitor/",
            "workflow": self.llm.pk,
            "origin": f"http://127.0.0.1:{self.port}",
            "cookie": self.cookie,
            "token": self.token,
        }
        child = Clients(config, self.args.client_procs)
        deadline = time.monotonic() + 300
        while TimedProvider.arrived < self.args.streams:  # every worker has asked the provider
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {TimedProvider.arrived} of {self.args.streams} streams began")
            time.sleep(0.05)
        TimedProvider.go.set()
        return ids, child

    def stream_phase(self) -> dict[str, Any]:
        a = self.args
        harness.log(f"streams: {a.streams} x {a.tokens} tokens at {a.rate} tokens/s")
        ids, child = self.start_streams()
        names = ("broadcaster", "daphne", "worker-1", "worker-2")
        cpu0 = {n: sum(self.proc(n).cpu_times()[:2]) for n in names}
        clients0 = child.cpu_seconds()
        provider0 = sum(psutil.Process().cpu_times()[:2])  # this process: the provider's threads
        machine0 = psutil.cpu_times()
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        self.wait_finished(ids, 900)
        clients_cpu = child.cpu_seconds() - clients0
        provider_cpu = sum(psutil.Process().cpu_times()[:2]) - provider0
        machine = psutil.cpu_times()
        idle = (machine.idle - machine0.idle) + (machine.iowait - machine0.iowait)
        total = sum(machine) - sum(machine0)
        delays = child.communicate(timeout=120)
        wall = time.perf_counter() - t0
        cpu = {n: round((sum(self.proc(n).cpu_times()[:2]) - c) / wall * 100, 1) for n, c in cpu0.items()}
        cpu["clients"] = round(clients_cpu / wall * 100, 1)
        cpu["provider (this process)"] = round(provider_cpu / wall * 100, 1)
        return {
            "load_average_1min": [round(load0, 1), round(os.getloadavg()[0], 1)],
            "wall_s": round(wall, 1),
            "ws_delay_ms": harness.distribution(delays["ws"]),
            "ws_live_page_delay_ms": harness.distribution(delays["ws_live"]),
            "sse_delay_ms": harness.distribution(delays["sse"]),
            # the SSE delay in two: until the worker's XADD (the entry id's ms), and after it
            "sse_to_redis_ms": harness.distribution(delays["sse_to_redis"]),
            "sse_from_redis_ms": harness.distribution(delays["sse_from_redis"]),
            "tokens_per_s_delivered": {k: round(len(delays[k]) / wall, 1) for k in ("ws", "ws_live", "sse")},
            "cpu_pct": cpu,
            # the whole machine while the tokens flowed: every process above waits for a core
            # when this nears 100
            "machine_busy_pct": round((1 - idle / total) * 100, 1) if total else None,
        }

    def throughput_phase(self) -> dict[str, Any]:
        results: dict[str, list[float]] = {"alone": [], "with_streams": []}
        for _ in range(self.args.pairs):
            results["alone"].append(self.throughput())
            ids, child = self.start_streams()
            results["with_streams"].append(self.throughput())
            self.wait_finished(ids, 900)
            child.communicate(timeout=120)
            harness.log(
                f"throughput: {results['alone'][-1]:.0f} alone, {results['with_streams'][-1]:.0f} with streams"
            )
        return {k: round(statistics.median(v), 1) for k, v in results.items() if v}


def main() -> int:
    if sys.argv[1:2] == ["--serve-clients"]:
        serve_clients(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--rate", type=float, default=20.0, help="tokens per second per stream")
    parser.add_argument("--tokens", type=int, default=400, help="tokens per stream")
    parser.add_argument("--batch", type=int, default=500, help="demo runs per throughput measurement")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--client-procs", type=int, default=4, help="processes the clients run in")
    args = parser.parse_args()
    args.clients = 0  # Bench's fields
    bench = StreamBench(args)
    try:
        bench.prepare()
        bench.start()
        streams = bench.stream_phase()
        throughput = bench.throughput_phase()
    finally:
        bench.stop()
    result = {"args": vars(args), "streams": streams, "throughput_node_executions_per_s": throughput}
    print(json.dumps(result, indent=2))
    (bench.logdir / "llm-results.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
