"""The attempt lifecycle is written once (runtime/lifecycle.py) and rendered for both tables.

No database: the statements are rendered texts, read here as a reviewer would read them. Each
move renders the same statement for NodeRun and MapItem but for the table and its alias, and
every column a statement sets names a column of its model.
"""

from __future__ import annotations

import re

import pytest

from workflows.core.states import Cause, node_sources
from workflows.runtime import transitions, transitions_maps
from workflows.runtime.lifecycle import Attempts
from workflows.store.models import MapItem, NodeRun
from workflows.store.statements import ITEMS, NODES

NODE = Attempts(NodeRun, "n")
ITEM = Attempts(MapItem, "i")

MOVES = {
    Cause.CLAIM: lambda a: a.claim(),
    Cause.REQUEUE: lambda a: a.requeue(),
    Cause.START: lambda a: a.start(),
    Cause.FINISH: lambda a: a.finish(a.status_in(node_sources(Cause.FINISH))),
    Cause.RETRY: lambda a: a.retry(),
    Cause.DEAD: lambda a: a.kill(),
    Cause.LOST: lambda a: a.lose(),
}


def as_node(sql: str) -> str:
    """A map item statement read as a node's: the table and the alias swapped."""
    return re.sub(r"\bi\.", "n.", sql.replace(f"UPDATE {ITEMS} i", f"UPDATE {NODES} n"))


@pytest.mark.parametrize("cause", list(MOVES))
def test_a_move_renders_one_statement_for_both_lifecycles(cause: Cause) -> None:
    render = MOVES[cause]
    assert render(NODE).startswith(f"UPDATE {NODES} n\nSET ")
    assert render(ITEM).startswith(f"UPDATE {ITEMS} i\nSET ")
    assert as_node(render(ITEM)) == render(NODE)


def test_the_claim_renders_as_the_table_of_moves_says() -> None:
    assert NODE.claim() == (
        f"UPDATE {NODES} n\n"
        "SET status = 'queued', attempt = n.attempt + 1, tries = n.tries + 1, queued_at = now(), due_at = NULL,\n"
        "    job_id = v.job_id, worker = ''\n"
        "FROM unnest(%(ids)s::bigint[], %(job_ids)s::text[]) AS v(id, job_id)\n"
        "WHERE n.id = v.id AND (n.status = 'pending' OR n.status = 'retrying')"
    )


def test_the_lost_attempt_is_given_back_to_the_retry_budget_on_both_tables() -> None:
    for table, alias in ((NODE, "n"), (ITEM, "i")):
        sql = table.lose(returning=table.columns("id"))
        assert f"tries = {alias}.tries - (v.free AND {alias}.lost < %(cap)s)::int" in sql
        assert sql.endswith(
            f"WHERE {alias}.id = v.id AND {alias}.attempt = v.attempt AND {alias}.status = 'running'\nRETURNING {alias}.id"
        )


def test_the_callers_own_parts_are_kept() -> None:
    assert "(SELECT set_config('synchronous_commit', 'off', true)) AS relaxed_commit" in transitions.CLAIM_SQL
    assert "n.status || '' = 'queued'" in transitions.START_SQL  # off the partial status indexes
    assert "n.status || '' = v.from_status" in transitions.FINISH_SQL
    assert "started_at = clock_timestamp()" in transitions_maps.START_ITEMS_SQL
    assert "i.status = 'queued'" in transitions_maps.START_ITEMS_SQL
    assert "RETURNING i.node_run_id, i.run_id" in transitions_maps.FINISH_ITEMS_SQL


def set_columns(sql: str) -> set[str]:
    """The columns an UPDATE's SET clause assigns."""
    assignments = re.search(r"\bSET\b(.*?)\bFROM\b", sql, re.S)
    assert assignments, sql
    return set(re.findall(r"(?:^|,)\s*(\w+)\s*=", assignments[1]))


@pytest.mark.parametrize("table", [NODE, ITEM], ids=["noderun", "mapitem"])
def test_every_column_a_move_sets_is_a_column_of_its_model(table: Attempts) -> None:
    columns = {field.column for field in table.model._meta.concrete_fields}
    for render in MOVES.values():
        assert set_columns(render(table)) <= columns, render(table)


def test_every_rendered_statement_is_a_module_constant() -> None:
    """So that psycopg prepares each once per connection (pgsession.py)."""
    constants = [
        transitions.CLAIM_SQL,
        transitions.REQUEUE_SQL,
        transitions.START_SQL,
        transitions.FINISH_SQL,
        transitions.FINISH_FOLLOW_SQL,
        transitions.FINISH_END_SQL,
        transitions.FINISH_FOLLOW_END_SQL,
        transitions.RETRY_SQL,
        transitions.DEAD_SQL,
        transitions.LOST_SQL,
        transitions_maps.CLAIM_ITEMS_SQL,
        transitions_maps.REQUEUE_ITEMS_SQL,
        transitions_maps.START_ITEMS_SQL,
        transitions_maps.FINISH_ITEMS_SQL,
        transitions_maps.RETRY_ITEMS_SQL,
        transitions_maps.KILL_ITEMS_SQL,
        transitions_maps.LOST_ITEMS_SQL,
    ]
    assert all(f"UPDATE {NODES} n\nSET" in sql for sql in constants[:10])
    assert all(f"UPDATE {ITEMS} i\nSET" in sql for sql in constants[10:])
    assert not any("{" in sql.replace("'{}'", "") for sql in constants)  # nothing left unrendered
