"""What links a run to other runs, read in one statement on the runtime's hot path.

A run may join a caller's trace (RunTraceParent), be a child run (ChildRun: the parent run
that started it, under one of its attempts or an agent's step), or replay the calls of
another run (a fork, RunFork; a suite's case run, SuiteCaseRun). An LLM or HTTP attempt needs
the first two for the `traceparent` of its calls (store/traceids.py) and the third before its
first call (handlers/recordings.py): `read` answers all three in one statement, and what it
says of replays is remembered per process and run (a fork's row, and a case run's, never
changes once written), so the call's lookup (`replay_of`) reads nothing more.
"""

from __future__ import annotations

from django.db import connection

from workflows.core import callhash
from workflows.store.forks import RunFork
from workflows.store.models import ChildRun, RunTraceParent
from workflows.store.statements import table
from workflows.store.suites import SuiteCaseRun

Replay = tuple[str, int | None]  # (calls mode, origin run id: None once the origin was deleted)
Traced = tuple[int, str, str]  # (run, trace id, parent span id)
Link = tuple[int, int, str, int, int | None]  # (child run, parent run, node, attempt, agent step)

REMEMBERED_AT_MOST = 4096
_replays: dict[int, Replay | None] = {}  # run id -> what `read` found (None: a live run)

LINKS_SQL = f"""
SELECT 't', run_id, trace_id, parent_span_id, NULL, NULL FROM {table(RunTraceParent)} WHERE run_id = ANY(%(ids)s)
UNION ALL
SELECT 'c', child_id, parent_run_id::text, node_id, attempt, agent_step_id FROM {table(ChildRun)}
WHERE child_id = ANY(%(ids)s)
UNION ALL
SELECT 'f', run_id, calls, origin_id::text, NULL, NULL FROM {table(RunFork)} WHERE run_id = ANY(%(ids)s)
UNION ALL
SELECT 's', run_id, calls, origin_id::text, NULL, NULL FROM {table(SuiteCaseRun)} WHERE run_id = ANY(%(ids)s)
"""


def read(run_ids: set[int]) -> tuple[list[Traced], list[Link]]:
    """The runs' trace parents and their child-run links; what they replay is remembered."""
    with connection.cursor() as cursor:
        cursor.execute(LINKS_SQL, {"ids": sorted(run_ids)})
        rows = cursor.fetchall()
    traced = [(r[1], r[2], r[3]) for r in rows if r[0] == "t"]
    children = [(r[1], int(r[2]), r[3], r[4], r[5]) for r in rows if r[0] == "c"]
    # A run is a fork or a case run, not both; were it both, its fork's row would win.
    origins = {r[1]: (r[2], r[3]) for kind in ("s", "f") for r in rows if r[0] == kind}
    if len(_replays) + len(run_ids) > REMEMBERED_AT_MOST:
        _replays.clear()
    for run_id in run_ids:
        _replays[run_id] = replay(origins.get(run_id))
    return traced, children


def replay(origin: tuple[str, str | None] | None) -> Replay | None:
    if origin is None or origin[0] == callhash.LIVE:
        return None
    return str(origin[0]), None if origin[1] is None else int(origin[1])


def replay_of(run_id: int) -> Replay | None:
    """(mode, origin run id) of a run that replays its origin's calls; None for a live run.
    Read once per process and run, with its trace links when the run's calls asked for
    their `traceparent` first."""
    if run_id not in _replays:
        read({run_id})
    return _replays[run_id]


def is_known_live(run_id: int) -> bool:
    """Whether this process read already that the run makes its calls live (no statement)."""
    return run_id in _replays and _replays[run_id] is None
