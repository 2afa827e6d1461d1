"""Runtime sessions plan generically (workflows/runtime/pgsession.py); the runtime's scans keep their indexes."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from tests.factories import make_workflow
from workflows.integrations import webhooks
from workflows.runtime import advancing, capacity, pgsession, reconciler, transitions, transitions_runs

SCANS = {
    "due retries": (advancing.DUE_SQL, "noderun_retry_due_idx"),
    "held nodes": (advancing.DUE_SQL, "noderun_held_idx"),
    "capped attempts in flight": (capacity.IN_FLIGHT_SQL, "noderun_in_flight_idx"),
    "queued attempts": (reconciler.QUEUED_BEFORE_SQL, "noderun_in_flight_idx"),
    "running attempts": (reconciler.RUNNING_BEFORE_SQL, "noderun_in_flight_idx"),
    "stuck deliveries": (webhooks.RECLAIM_SQL, "delivery_due_idx"),
    "stalled runs": (reconciler.STALLED_RUNS_SQL, "run_stall_candidates_idx"),
}

# Driven by primary keys: under load the in-flight index holds every queued node, and a plan
# that walked it would cost each of these statements a scan of the whole backlog.
BY_KEY = {
    "scheduler's claim": transitions.CLAIM_SQL,
    "worker's claim": transitions.START_SQL,
    "worker's results": transitions.FINISH_SQL,
    "worker's results, successors queued": transitions.FINISH_FOLLOW_SQL,
    "worker's results, runs ended": transitions.FINISH_END_SQL,
    "worker's results, successors queued, runs ended": transitions.FINISH_FOLLOW_END_SQL,
}

# A run's end asks whether a parent waits on it (transitions_runs.NOBODYS_CHILD).
ENDS = {
    "a run's end": transitions_runs.FINISH_UNLINKED_RUNS_SQL,
    "worker's results, runs ended": transitions.FINISH_END_SQL,
}


def explain_generic(sql: str) -> str:
    """The generic plan of `sql` in this session (psycopg's `%(name)s` become `$1, $2, ...`)."""
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN (GENERIC_PLAN) {numbered}")
        return "\n".join(row[0] for row in cur.fetchall())


def generic_plan(sql: str) -> str:
    """The plan a runtime session runs `sql` with.

    Sequential scans are priced out, as in a runtime session, so that an index the plan
    cannot use shows as missing rather than as merely more expensive on small tables.
    """
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
    return explain_generic(sql)


AT_REST_RUNS = 2000

REST_SQL = """
WITH runs AS (
    INSERT INTO workflows_run (workflow_id, version_id, status, input, request_hash, epoch, created_at)
    SELECT %(workflow)s, %(version)s, 'succeeded', '{}', '', 0, now() FROM generate_series(1, %(runs)s)
    RETURNING id
)
INSERT INTO workflows_noderun (run_id, node_id, status, attempt, tries, queue, job_id, worker, error, traceback)
SELECT runs.id, n.node_id, 'succeeded', 1, 1, 'default', '', 'w', '', ''
FROM runs, unnest(ARRAY['a', 'b', 'c']) AS n(node_id)
"""


@pytest.fixture
def at_rest() -> None:
    """Tables as a plan made at rest sees them: many finished runs, nothing in flight, analyzed.

    Left to autovacuum, the statistics of the test database depend on what ran before.
    """
    workflow = make_workflow("at-rest")
    with connection.cursor() as cur:
        cur.execute(
            REST_SQL, {"workflow": workflow.pk, "version": workflow.active_version_id, "runs": AT_REST_RUNS}
        )
        cur.execute("ANALYZE workflows_run, workflows_noderun")


@pytest.mark.django_db
@pytest.mark.parametrize("scan", SCANS)
def test_the_generic_plan_of_a_runtime_scan_uses_its_partial_index(at_rest: None, scan: str) -> None:
    sql, index = SCANS[scan]
    assert index in generic_plan(sql)


@pytest.mark.django_db
@pytest.mark.parametrize("statement", BY_KEY)
def test_the_generic_plan_of_a_hot_statement_never_walks_the_in_flight_index(
    at_rest: None, statement: str
) -> None:
    plan = generic_plan(BY_KEY[statement])
    assert "noderun_in_flight_idx" not in plan and "workflows_noderun_pkey" in plan


@pytest.mark.django_db
@pytest.mark.parametrize("statement", ENDS)
def test_a_runs_end_finds_its_parent_link_by_the_childs_key(at_rest: None, statement: str) -> None:
    """Not by the open links' partial index, which a plan made while the table is empty (a
    fresh install) would walk whole at every end, however many parents wait."""
    plan = generic_plan(ENDS[statement])
    assert "workflows_childrun_child_id_key" in plan and "child_run_open_idx" not in plan


@pytest.mark.django_db
def test_a_status_given_as_a_parameter_would_lose_the_partial_index(at_rest: None) -> None:
    sql, index = SCANS["due retries"]
    assert index not in generic_plan(sql.replace("'retrying'", "%(status)s"))


@pytest.fixture
def runtime_session() -> Iterator[None]:
    pgsession.plan_generically()
    yield
    connection_created.disconnect(dispatch_uid="switchyard-generic-plans")
    connection.close()  # the next test gets a session with the default setting


def plan_cache_mode() -> str:
    with connection.cursor() as cur:
        cur.execute("SHOW plan_cache_mode")
        return cur.fetchone()[0]


@pytest.mark.django_db
@pytest.mark.parametrize("statement", BY_KEY)
def test_a_runtime_session_goes_by_key_even_while_the_tables_are_tiny(
    runtime_session: None, statement: str
) -> None:
    """The plan made while a fresh install's tables are tiny is kept as they grow."""
    assert "Seq Scan on workflows_noderun" not in explain_generic(BY_KEY[statement])


@pytest.mark.django_db(transaction=True)
def test_a_runtime_process_plans_generically_in_its_session_and_after_reconnecting(
    runtime_session: None,
) -> None:
    assert plan_cache_mode() == "force_generic_plan"
    connection.close()
    assert plan_cache_mode() == "force_generic_plan"
