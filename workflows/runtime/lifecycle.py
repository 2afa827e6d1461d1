"""The moves every status writer declares, and the attempt lifecycle written once as SQL.

The transitions modules (transitions.py: a task's attempts; transitions_runs.py: runs;
transitions_waits.py: waiting nodes; transitions_maps.py: map nodes and their items;
transitions_forks.py: forked runs) are the only code that changes a status. Each
function there declares the moves it performs (`@performs`), which must be moves of the one
table, core/states.py.

A task's attempts (NodeRun rows) and a map's items (MapItem rows) move by the same moves:
claim, requeue, start, finish, retry, dead, lost; each guarded by the row's id, its attempt
(or tries) and its status, so that two processes deciding the same thing change a row once.
`Attempts` renders each of these moves for one table, in one statement shape (`UPDATE <table>
SET <what the move sets> FROM <what each row is given> WHERE <id, guard, from-status>`),
the from-statuses read from the table of moves. What differs between the two lifecycles is
passed in by the transitions modules: the run joined in, a relaxed commit, history events,
what a statement returns. Texts are rendered once, at import, into those modules' `*_SQL`
constants (tests/unit/test_lifecycle.py shows both lifecycles' texts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.db import connection, models

from workflows.core.states import (
    Cause,
    NodeStatus as N,
    RunStatus as R,
    can_move_node,
    can_move_run,
    node_sources,
)
from workflows.store.statements import NODES, RUNS, column, table

# --------------------------------------------------------------------------- declared moves


@dataclass(frozen=True)
class Move:
    """The status changes one function's statements may make: (from, to) pairs, under a cause."""

    cause: Cause
    nodes: tuple[tuple[N | None, N], ...] = ()
    runs: tuple[tuple[R | None, R], ...] = ()

    def is_in_table(self) -> bool:
        return all(can_move_node(self.cause, a, b) for a, b in self.nodes) and all(
            can_move_run(self.cause, a, b) for a, b in self.runs
        )


PERFORMED: dict[str, Move] = {}  # function name -> the move it declares

F = TypeVar("F", bound=Callable[..., Any])


def pairs(moves: Mapping[Any, Iterable[Any]]) -> tuple[tuple[Any, Any], ...]:
    return tuple((source, target) for source, targets in moves.items() for target in targets)


def performs(
    cause: Cause,
    nodes: Mapping[N | None, Iterable[N]] | None = None,
    runs: Mapping[R | None, Iterable[R]] | None = None,
) -> Callable[[F], F]:
    """Declare the moves the decorated function's statements make; refuse one not in the table."""
    move = Move(cause, pairs(nodes or {}), pairs(runs or {}))
    if not move.is_in_table():
        raise ValueError(f"{move} is not in the table of moves (workflows/core/states.py).")

    def declare(func: F) -> F:
        PERFORMED[func.__name__] = move
        return func

    return declare


def check_move(cause: Cause, source: N | None, target: N) -> None:
    """Refuse a move chosen at run time (a parameter of a statement) that the table does not allow."""
    if not can_move_node(cause, source, target):
        raise ValueError(f"A node cannot move from {source} to {target} by {cause}.")


# --------------------------------------------------------------------------- running statements


def rows_of(cls: type[NamedTuple], rows: Iterable[Sequence[Any]]) -> list[Any]:
    return [cls(*row) for row in rows]


def execute(sql: str, params: Any) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else []


# --------------------------------------------------------------------------- the attempt lifecycle

# Joined into the FROM list of a single autocommit statement, this makes its commit skip the
# wait for the WAL flush (`SET LOCAL` in a statement of its own costs two round trips more).
# Only for changes that can be derived again from what is already durable: claims and
# decisions. If Postgres itself crashes and loses them, the reconciler decides again and
# the attempt runs again (delivery is at-least-once). Runs, results and dead letters are
# always committed synchronously.
RELAXED_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS relaxed_commit"
# The same, when the statement's %(relaxed)s parameter is true: a worker's store of results
# whose durability the next synchronous commit gives (execution.settle), and a lone start,
# which waits for its flush after it has sent its roots (runs.actions.create_run); nothing else.
RELAXED_COMMIT_IF = (
    "(SELECT CASE WHEN %(relaxed)s THEN set_config('synchronous_commit', 'off', true) END) AS relaxed_commit"
)


def flush_commits() -> None:
    """Commit synchronously a transaction that writes only a WAL record (a logical message
    nobody decodes): it returns once everything committed before it, relaxed commits
    included, is on disk. A read-only or no-op statement would not wait (no WAL, no flush)."""
    execute("SELECT pg_logical_emit_message(true, 'switchyard', 'flush')", None)


# What a finished attempt reports, one JSON record per row: psycopg adapting ten arrays
# element by element cost the worker more CPU than the rest of the statement (profiled).
RESULT_COLUMNS = (
    "id bigint, attempt int, status text, output text, error text, traceback text, "
    "started_at timestamptz, finished_at timestamptz, retryable bool"
)

# A run counts its waiting nodes (`waiting_nodes`), in the statement that moves them: the
# reconciler's stalled-run scan skips runs with any, by a partial index, so that its work per
# second does not grow with the number of runs waiting on people, events or timers.
# Joined as a CTE after `moved` (the rows moved, with their run_id), `sign` '+' or '-'.
#
# Such a statement locks the runs first (LOCK_RUNS, its first CTE), as every transaction
# that changes a run and its nodes does: an operator's cancel locks the run, then its nodes.
# Counting after `moved` alone would take the node, then the run, and the two deadlock
# (PostgreSQL aborts one with 40P01: CI saw a cancel of a child run aborted so). `moved`
# reads `locked_runs` (`AND n.run_id IN (SELECT id FROM locked_runs)`), so it is evaluated
# first; `ids` is a bigint[] expression of the node rows the statement moves.
LOCK_RUNS = f"""
locked_runs AS (
    SELECT r.id FROM {RUNS} r WHERE r.id IN (SELECT n.run_id FROM {NODES} n WHERE n.id = ANY({{ids}}))
    ORDER BY r.id FOR NO KEY UPDATE OF r
)"""
RUNS_LOCKED = "n.run_id IN (SELECT id FROM locked_runs)"
COUNT_WAITS = f"""
counted AS (
    UPDATE {RUNS} r SET waiting_nodes = r.waiting_nodes {{sign}} c.n
    FROM (SELECT run_id, count(*) AS n FROM moved GROUP BY run_id) AS c WHERE r.id = c.run_id
)"""


class InputRow(NamedTuple):
    """A row of what nodes are given: kind 'claim' (an attempt, its version and its run input,
    or None when the claim does not read it) or 'output' (a succeeded node's output; then
    version_id is 0)."""

    kind: str
    noderun_id: int
    attempt: int
    version_id: int
    node_id: str
    run_id: int
    value: Any
    priority: int = 0  # the run's, on the scheduler's claims: it picks the job's RQ lane


class Retry(NamedTuple):
    noderun_id: int  # or a map item's id
    tries: int  # the failed attempt's: a newer attempt makes the decision stale
    delay: float


class Kill(NamedTuple):
    noderun_id: int  # or a map item's id
    tries: int


class Lost(NamedTuple):
    noderun_id: int  # or a map item's id
    attempt: int
    error: str
    free: bool = True  # its worker is gone: the attempt does not count (FREE_LOST_ATTEMPTS)


@dataclass(frozen=True)
class Attempts:
    """A table of attempts (NodeRun, MapItem) and the alias its statements give its rows."""

    model: type[models.Model]
    alias: str

    @property
    def table(self) -> str:
        return table(self.model)

    def columns(self, *fields: str) -> str:
        """`n.id, n.run_id`: the columns of these fields, on this table's alias."""
        return ", ".join(f"{self.alias}.{column(self.model, f)}" for f in fields)

    def status_in(self, statuses: Iterable[N], *, unindexed: bool = False) -> str:
        """The from-status guard. `unindexed` (`status || ''`) keeps the planner off the partial
        status indexes, for statements driven by primary keys (see nodes.START_SQL)."""
        spelled = f"{self.alias}.status || ''" if unindexed else f"{self.alias}.status"
        guards = [f"{spelled} = '{s}'" for s in statuses]
        return guards[0] if len(guards) == 1 else f"({' OR '.join(guards)})"

    def update(
        self,
        cause: Cause,
        sets: str,
        given: str,
        *,
        guard: str = "",
        source: str | None = None,
        joins: str = "",
        where: str = "",
        returning: str = "",
    ) -> str:
        """`UPDATE t SET sets FROM given joins WHERE t.id = v.id guard AND source where RETURNING returning`.

        Each move's method passes its caller's `joins` (`, <from item>`), `where` (` AND ...`)
        and `returning` through; `source` defaults to `cause`'s from-statuses in the table of moves.
        """
        t = self.alias
        source = source or self.status_in(node_sources(cause))
        tail = f"\nRETURNING {returning}" if returning else ""
        return f"UPDATE {self.table} {t}\nSET {sets}\nFROM {given}{joins}\nWHERE {t}.id = v.id{guard} AND {source}{where}{tail}"

    def claim(self, source: str | None = None, given: str = "", **extra: str) -> str:
        """Pending or retrying rows: a new attempt (and try), queued in its job (`ids`, `job_ids`,
        or the rows `given` names as v(id, job_id))."""
        t = self.alias
        sets = (
            f"status = '{N.QUEUED}', attempt = {t}.attempt + 1, tries = {t}.tries + 1, queued_at = now(), "
            "due_at = NULL,\n    job_id = v.job_id, worker = ''"
        )
        given = given or "unnest(%(ids)s::bigint[], %(job_ids)s::text[]) AS v(id, job_id)"
        return self.update(Cause.CLAIM, sets, given, source=source, **extra)

    def requeue(self, **extra: str) -> str:
        """Queued rows, same attempt (`ids`, `attempts`): pointed at new jobs (`job_ids`)."""
        given = (
            "unnest(%(ids)s::bigint[], %(attempts)s::int[], %(job_ids)s::text[]) AS v(id, attempt, job_id)"
        )
        guard = f" AND {self.alias}.attempt = v.attempt"
        return self.update(Cause.REQUEUE, "queued_at = now(), job_id = v.job_id", given, guard=guard, **extra)

    def start(self, *, clock: str = "now()", unindexed: bool = False, **extra: str) -> str:
        """Queued attempts (`ids`, `attempts`): running on `worker` since `clock`."""
        sets = f"status = '{N.RUNNING}', worker = %(worker)s, started_at = {clock}"
        given = "unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS v(id, attempt)"
        guard = f" AND {self.alias}.attempt = v.attempt"
        source = self.status_in(node_sources(Cause.START), unindexed=unindexed)
        return self.update(Cause.START, sets, given, guard=guard, source=source, **extra)

    def finish(self, source: str, *, reported: str = "", sets: str = "", **extra: str) -> str:
        """Attempts still in `source` at their attempt: their results (`results`, RESULT_COLUMNS
        and `reported` columns, as JSON) stored. `retryable` false marks a failure that no
        retry can fix (handlers.HandlerError): the engine kills it without a retry."""
        stored = (
            "status = v.status, output = v.output::jsonb, error = v.error, traceback = v.traceback,\n"
            f"    started_at = v.started_at, finished_at = v.finished_at, retryable = coalesce(v.retryable, true){sets}"
        )
        given = f"json_to_recordset(%(results)s::json) AS v(\n    {RESULT_COLUMNS}{reported}\n)"
        guard = f" AND {self.alias}.attempt = v.attempt"
        return self.update(Cause.FINISH, stored, given, guard=guard, source=source, **extra)

    def retry(self, **extra: str) -> str:
        """Failed rows still at their tries (`ids`, `tries`): retrying, due after `delays` seconds."""
        sets = f"status = '{N.RETRYING}', due_at = now() + v.delay * interval '1 second'"
        given = "unnest(%(ids)s::bigint[], %(tries)s::int[], %(delays)s::float8[]) AS v(id, tries, delay)"
        return self.update(Cause.RETRY, sets, given, guard=f" AND {self.alias}.tries = v.tries", **extra)

    def kill(self, **extra: str) -> str:
        """Failed rows still at their tries (`ids`, `tries`): dead."""
        given = "unnest(%(ids)s::bigint[], %(tries)s::int[]) AS v(id, tries)"
        guard = f" AND {self.alias}.tries = v.tries"
        return self.update(
            Cause.DEAD, f"status = '{N.DEAD}', finished_at = now()", given, guard=guard, **extra
        )

    def lose(self, **extra: str) -> str:
        """Running attempts whose worker is gone (`ids`, `attempts`, `errors`, `free`): failed.

        An attempt lost with its worker is the platform's failure, not the handler's: it is
        given back to the retry budget (`tries` - 1, so even a node with max_attempts 1 runs
        again), at most FREE_LOST_ATTEMPTS (`cap`) times per row (`lost`), so a handler that
        kills its worker (OOM) still ends dead. An attempt that overran its timeout
        unreported counts like any failure.
        """
        t, free = self.alias, f"(v.free AND {self.alias}.lost < %(cap)s)::int"
        sets = f"status = '{N.FAILED}', error = v.error, traceback = '', retryable = true,\n  tries = {t}.tries - {free}, lost = {t}.lost + {free}"
        given = (
            "unnest(%(ids)s::bigint[], %(attempts)s::int[], %(errors)s::text[], %(free)s::bool[])\n"
            "  AS v(id, attempt, error, free)"
        )
        return self.update(Cause.LOST, sets, given, guard=f" AND {t}.attempt = v.attempt", **extra)


def retry_params(retries: Sequence[Retry]) -> dict[str, Any]:
    return {
        "ids": [r[0] for r in retries],
        "tries": [r[1] for r in retries],
        "delays": [r[2] for r in retries],
    }


def kill_params(kills: Sequence[Kill]) -> dict[str, Any]:
    return {"ids": [k[0] for k in kills], "tries": [k[1] for k in kills]}


def lost_params(lost: Sequence[Lost]) -> dict[str, Any]:
    return {
        "cap": settings.SWITCHYARD["FREE_LOST_ATTEMPTS"],
        "ids": [x.noderun_id for x in lost],
        "attempts": [x.attempt for x in lost],
        "errors": [x.error for x in lost],
        "free": [x.free for x in lost],
    }
