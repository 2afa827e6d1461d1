#!/usr/bin/env python3
"""REST API benchmark: run starts per second and GET latency, through Daphne, beside plain Django.

    .venv/bin/python bench/api_bench.py                  # servers of .data/bench-api, started (and stopped) if needed
    REQUESTS=4000 CONCURRENCY=16 .venv/bin/python bench/api_bench.py

What is measured, each through its own Daphne process on this machine:
- `POST /api/v1/workflows/bench-4/runs`: API-key auth (key lookup, scope and role check,
  rate-limit counter in Redis), a fresh `Idempotency-Key` per request, a 4-node run created
  (run, 4 node rows, one event, one transaction), then its roots' job enqueued or, in a
  burst, the scheduler notified (runs.StartPacing). No scheduler or worker runs: this is the
  API's cost, not the engine's.
- the same POST again with an already used key and body (the idempotent replay path).
- `GET /api/v1/runs/<id>` of a run with 50 finished nodes (outputs, timings).
- the ratio to beat: a plain Django view (same settings and middleware, csrf-exempt, no auth)
  that parses the JSON body and does one INSERT, and one that SELECTs one row by id. It is
  served by the tiny ASGI app at the bottom of this file (`bench.api_bench:application`),
  so no production URL exists for it.

Throughput: CONCURRENCY client threads, each with a keep-alive connection, REQUESTS
requests in all after WARMUP; latency percentiles are per request as the client saw them.
The database is `switchyard_apibench` (dropped and recreated) and Redis database 3 (flushed)
of the servers DATABASE_URL/REDIS_URL name, or of the embedded ones in .data/bench-api.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when Daphne imports bench.api_bench
import harness  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
DATA = REPO / ".data" / "bench-api"
DB_NAME = "switchyard_apibench"
REDIS_DB = 3


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name) or default)


REQUESTS = env_int("REQUESTS", 2000)
CONCURRENCY = env_int("CONCURRENCY", 8)
WARMUP = env_int("WARMUP", 200)
LATENCY_REQUESTS = env_int("LAT", 500)
NODES = 50


def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- servers


def load_services() -> Any:
    spec = importlib.util.spec_from_file_location("services", REPO / "scripts" / "services.py")
    assert spec and spec.loader
    services = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(services)
    return services


def service_urls() -> tuple[str, str, bool]:
    """(DATABASE_URL of the bench database, REDIS_URL of the bench Redis database, whether
    this run started the embedded servers, and so stops them)."""
    started = False
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        db, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
    else:
        services = load_services()
        started = not services.is_up(DATA)
        urls = services.up(DATA)
        db, redis_url = urls["DATABASE_URL"], urls["REDIS_URL"]
    return (
        urlunsplit(urlsplit(db)._replace(path=f"/{DB_NAME}")),
        urlunsplit(urlsplit(redis_url)._replace(path=f"/{REDIS_DB}")),
        started,
    )


def recreate_database(url: str) -> None:
    import psycopg

    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")


def daphne(app: str, env: dict[str, str], name: str) -> tuple[subprocess.Popen[bytes], str]:
    port = harness.free_port()
    logfile = open(DATA / f"{name}.log", "ab")  # noqa: SIM115 - the process keeps it
    proc = subprocess.Popen(
        # The web process as `make run` starts it (its connection pool included).
        [str(BIN / "python"), "-m", "controlplane.webserver", "-b", "127.0.0.1", "-p", str(port), app],
        cwd=REPO,
        env=env,
        stdout=logfile,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, f"http://127.0.0.1:{port}"


def wait_up(url: str, deadline: float = 60.0) -> None:
    import httpx

    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer within {deadline:g} s; see {DATA}/*.log")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


# --------------------------------------------------------------------------- data


def prepare() -> dict[str, Any]:
    """Create the key, the workflows and a finished 50-node run (in this process, through the domain)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from workflows.integrations import keys
    from workflows.runs import actions as runs
    from workflows.store.models import NodeRun, Run
    from workflows.versions import publish as versions

    admin = get_user_model().objects.create_superuser("bench", "bench@example.test")
    _, token = keys.create_key(admin, "bench", ["admin"])
    four = versions.create_workflow("bench-4", "Bench, 4 nodes")
    nodes4 = [{"id": f"n{i}", "handler": "core.noop"} for i in range(4)]
    edges4 = [{"source": "n0", "target": t} for t in ("n1", "n2")] + [
        {"source": s, "target": "n3"} for s in ("n1", "n2")
    ]
    versions.publish_version(versions.create_version(four, {"nodes": nodes4, "edges": edges4}))
    fifty = versions.create_workflow("bench-50", "Bench, 50 nodes")
    nodes = [{"id": f"n{i:02d}", "handler": "core.noop"} for i in range(NODES)]
    edges = [{"source": f"n{i:02d}", "target": f"n{i + 1:02d}"} for i in range(NODES - 1)]
    versions.publish_version(versions.create_version(fifty, {"nodes": nodes, "edges": edges}))
    fifty.refresh_from_db()
    run, _ = runs.start_run(fifty, {"user_id": "u-1", "note": "x" * 200})
    now = timezone.now()
    for i, node in enumerate(NodeRun.objects.filter(run=run).order_by("id")):
        node.status, node.attempt, node.tries, node.worker = "succeeded", 1, 1, "bench-w1"
        node.queued_at = node.started_at = now
        node.finished_at = now + timezone.timedelta(milliseconds=3 + i)
        node.output = {"node": node.node_id, "value": i, "text": "y" * 100}
        node.save()
    Run.objects.filter(pk=run.pk).update(status="succeeded", finished_at=now)
    with connection.cursor() as cur:
        cur.execute(
            "CREATE TABLE bench_plain (id bigserial PRIMARY KEY, payload jsonb, at timestamptz DEFAULT now())"
        )
        cur.execute("INSERT INTO bench_plain (payload) VALUES ('{\"seed\": true}') RETURNING id")
        plain_id = cur.fetchone()[0]
    connection.close()
    return {"token": token, "run": run.pk, "plain_row": plain_id}


# --------------------------------------------------------------------------- load


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def load(
    base: str, total: int, concurrency: int, request: Callable[[Any, int], Any], expect: int
) -> dict[str, Any]:
    """Send `total` requests over `concurrency` keep-alive connections; return rate and latencies."""
    import httpx

    counter = iter(range(total))
    lock = threading.Lock()
    latencies: list[float] = []
    failures: list[str] = []

    def worker() -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                started = time.perf_counter()
                response = request(client, n)
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != expect:
                        failures.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    if failures:
        log(f"{len(failures)} unexpected answers, first: {failures[0]}")
    return {
        "requests": total,
        "rps": total / wall,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "errors": len(failures),
    }


def measure(api: str, plain: str, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    auth = {"Authorization": f"Bearer {data['token']}", "Content-Type": "application/json"}
    tag = uuid.uuid4().hex[:8]

    def start(client: Any, n: int) -> Any:
        headers = {**auth, "Idempotency-Key": f"{tag}-{n}"}
        return client.post(
            "/api/v1/workflows/bench-4/runs", content=json.dumps({"input": {"n": n}}), headers=headers
        )

    def replay(client: Any, n: int) -> Any:
        headers = {**auth, "Idempotency-Key": f"{tag}-{n % 100}"}
        return client.post(
            "/api/v1/workflows/bench-4/runs", content=json.dumps({"input": {"n": n % 100}}), headers=headers
        )

    def get_run(client: Any, n: int) -> Any:
        return client.get(f"/api/v1/runs/{data['run']}", headers=auth)

    def insert(client: Any, n: int) -> Any:
        return client.post("/plain/insert", content=json.dumps({"input": {"n": n}}), headers=auth)

    def select(client: Any, n: int) -> Any:
        return client.get(f"/plain/row/{data['plain_row']}")

    results = {}
    for name, base, request, expect in (
        ("api: start run (new key)", api, start, 201),
        ("api: start run (replayed key)", api, replay, 200),
        ("plain: insert one row", plain, insert, 201),
    ):
        log(f"{name}: warm-up {WARMUP}, then {REQUESTS} requests over {CONCURRENCY} connections")
        load(base, WARMUP, CONCURRENCY, request, expect)
        tag = uuid.uuid4().hex[:8] if name.endswith("(new key)") else tag
        results[name] = load(base, REQUESTS, CONCURRENCY, request, expect)
    for name, base, request in (
        (f"api: GET run ({NODES} nodes)", api, get_run),
        ("plain: GET one row", plain, select),
    ):
        log(f"{name}: {LATENCY_REQUESTS} requests one after the other, then {REQUESTS} concurrent")
        load(base, WARMUP, 1, request, 200)
        sequential = load(base, LATENCY_REQUESTS, 1, request, 200)
        concurrent = load(base, REQUESTS, CONCURRENCY, request, 200)
        results[name] = {
            **sequential,
            "rps": concurrent["rps"],
            "errors": sequential["errors"] + concurrent["errors"],
        }
    return results


def report(results: dict[str, dict[str, Any]]) -> None:
    print(f"\n| endpoint | req/s ({CONCURRENCY} conns) | p50 ms | p95 ms | errors |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['rps']:.0f} | {r['p50']:.2f} | {r['p95']:.2f} | {r['errors']} |")
    start, insert = results["api: start run (new key)"], results["plain: insert one row"]
    get, row = results[f"api: GET run ({NODES} nodes)"], results["plain: GET one row"]
    print(
        f"\nratios: run start / plain insert = {start['rps'] / insert['rps']:.2f}x throughput; "
        f"GET run ({NODES} nodes) / plain GET p50 = {get['p50'] / row['p50']:.2f}x latency\n"
        f"(p50/p95 of the throughput rows are under {CONCURRENCY} concurrent connections; "
        "GET rows' p50/p95 are one request at a time)"
    )


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    db_url, redis_url, started = service_urls()
    try:
        bench(db_url, redis_url)
    finally:
        if started:
            log("stopping the embedded services")
            load_services().down(DATA)


def bench(db_url: str, redis_url: str) -> None:
    recreate_database(db_url)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        # The limiter stays on (its Redis counter is part of the cost), out of reach.
        "SWITCHYARD_API_RATE_LIMIT_PER_MINUTE": "1000000000",
        "LOG_LEVEL": "WARNING",
        # Under ASGI each request runs in a thread of its own: a persistent connection per
        # thread piles up until PostgreSQL refuses clients (DB_CONN_MAX_AGE=600 here ran out
        # at 100). Django's advice: no persistent connections under ASGI, or a pool, which
        # the web process has (DB_POOL_SIZE, controlplane/webserver.py).
        "DB_CONN_MAX_AGE": os.environ.get("DB_CONN_MAX_AGE", "0"),
    }
    os.environ.update(env)
    subprocess.run([str(BIN / "python"), "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    data = prepare()
    procs = []
    try:
        api_proc, api = daphne("controlplane.asgi:application", env, "daphne-api")
        plain_proc, plain = daphne("bench.api_bench:application", env, "daphne-plain")
        procs = [api_proc, plain_proc]
        wait_up(f"{api}/api/v1/health/live")
        wait_up(f"{plain}/plain/row/{data['plain_row']}")
        results = measure(api, plain, data)
    finally:
        for proc in procs:
            stop(proc)
    report(results)
    (DATA / "results.json").write_text(json.dumps(results, indent=2))


# --------------------------------------------------------------------------- the plain app
# Served by Daphne as `bench.api_bench:application`: the same settings and middleware as
# Switchyard, one URLconf with the two baseline views and nothing else.


def __getattr__(name: str) -> Any:
    if name == "application":
        return plain_application()
    if name == "urlpatterns":
        return plain_urlpatterns()
    raise AttributeError(name)


def plain_application() -> Any:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    from django.conf import settings

    settings.ROOT_URLCONF = __name__
    from django.core.asgi import get_asgi_application

    return get_asgi_application()


def plain_urlpatterns() -> list[Any]:
    from django.db import connection
    from django.http import HttpRequest, JsonResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    @csrf_exempt
    def insert(request: HttpRequest) -> JsonResponse:
        payload = json.loads(request.body)
        with connection.cursor() as cur:
            cur.execute("INSERT INTO bench_plain (payload) VALUES (%s) RETURNING id", [json.dumps(payload)])
            row_id = cur.fetchone()[0]
        return JsonResponse({"id": row_id}, status=201)

    def row(request: HttpRequest, row_id: int) -> JsonResponse:
        with connection.cursor() as cur:
            cur.execute("SELECT id, payload, at FROM bench_plain WHERE id = %s", [row_id])
            found = cur.fetchone()
        return JsonResponse({"id": found[0], "payload": found[1], "at": found[2].isoformat()})

    return [path("plain/insert", insert), path("plain/row/<int:row_id>", row)]


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
