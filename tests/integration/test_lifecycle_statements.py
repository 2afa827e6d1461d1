"""Every statement the transitions modules render runs on PostgreSQL (runtime/lifecycle.py).

Each is executed once with empty inputs: a misspelt column or table, or a fragment rendered
into the wrong place, fails here before any runtime test has to find it by a timeout.
"""

from __future__ import annotations

import pytest
from django.db import connection

from workflows.runtime import transitions, transitions_maps, transitions_runs, transitions_waits
from workflows.runtime.lifecycle import RUNS_LOCKED

EMPTY = {
    "ids": [],
    "job_ids": [],
    "attempts": [],
    "tries": [],
    "delays": [],
    "errors": [],
    "free": [],
    "cap": 1,
    "status": "pending",
    "direct": [],
    "upstream": [],
    "worker": "w",
    "results": "[]",
    "small_runs": [],
    "rows": "[]",
    "due": [],
    "id": 0,
    "attempt": 0,
    "run": 0,
    "limit": 1,
    "output": None,
    "error": "",
    "span": "{}",
    "follows": "[]",
    "follow_job": "",
    "relaxed": False,
    "epochs": [],
    "ends": [],
    "statuses": [],
}
TEMPLATES = {"LEAVE_WAIT_SQL"}  # formatted into DECIDE_SQL, EXPIRE_SQL, ... first
NEEDS_ROWS = {
    "CREATE_RUN_SQL",
    "CREATE_RUNS_SQL",
    "INSERT_ITEMS_SQL",
    "CREATE_STEPS_SQL",
}  # inserts: other tests run them

STATEMENTS = {
    f"{module.__name__.rsplit('.', 1)[1]}.{name}": sql
    for module in (transitions, transitions_runs, transitions_maps, transitions_waits)
    for name, sql in vars(module).items()
    if name.endswith("_SQL") and name not in TEMPLATES | NEEDS_ROWS
}


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_each_statement_runs_with_no_rows(name: str) -> None:
    with connection.cursor() as cur:
        cur.execute(STATEMENTS[name], EMPTY)


def test_both_lifecycles_are_covered() -> None:
    for move in ("CLAIM", "REQUEUE", "START", "FINISH", "RETRY", "LOST"):
        assert f"transitions.{move}_SQL" in STATEMENTS
        assert f"transitions_maps.{move}_ITEMS_SQL" in STATEMENTS
    assert "transitions.DEAD_SQL" in STATEMENTS and "transitions_maps.KILL_ITEMS_SQL" in STATEMENTS


def test_every_statement_counting_waits_locks_its_runs_before_its_nodes() -> None:
    """The lock order (lifecycle.LOCK_RUNS): a statement that moves nodes and then counts its
    runs' waiting nodes takes the runs first, and its `moved` reads them so that it runs after."""
    counting = {name: sql for name, sql in STATEMENTS.items() if "counted AS" in sql}
    assert len(counting) >= 5
    for name, sql in counting.items():
        assert sql.index("locked_runs AS") < sql.index("moved AS"), name
        assert RUNS_LOCKED in sql[sql.index("moved AS") : sql.index("counted AS")], name
