"""The table of status moves (workflows/core/states.py)."""

from __future__ import annotations

import pytest

from workflows.core.states import (
    NODE_IN_FLIGHT,
    NODE_MOVES,
    NODE_TERMINAL,
    RUN_MOVES,
    Cause,
    NodeStatus,
    NodeStatus as N,
    RunStatus,
    RunStatus as R,
    can_move_node,
    can_move_run,
)

ALLOWED_NODE_MOVES = [
    (Cause.CREATE, None, N.PENDING),
    (Cause.CREATE, None, N.QUEUED),
    (Cause.CLAIM, N.PENDING, N.QUEUED),
    (Cause.CLAIM, N.RETRYING, N.QUEUED),
    (Cause.REQUEUE, N.QUEUED, N.QUEUED),
    (Cause.START, N.QUEUED, N.RUNNING),
    (Cause.FINISH, N.RUNNING, N.SUCCEEDED),
    (Cause.FINISH, N.RUNNING, N.FAILED),
    (Cause.FINISH, N.QUEUED, N.SUCCEEDED),
    (Cause.SKIP, N.PENDING, N.SKIPPED),
    (Cause.SKIP, N.PENDING, N.UPSTREAM_FAILED),
    (Cause.RETRY, N.FAILED, N.RETRYING),
    (Cause.DEAD, N.FAILED, N.DEAD),
    (Cause.LOST, N.RUNNING, N.FAILED),
    (Cause.CANCEL, N.RETRYING, N.CANCELLED),
    (Cause.REPLAY, N.DEAD, N.PENDING),
    (Cause.REPLAY, N.UPSTREAM_FAILED, N.PENDING),
]

REFUSED_NODE_MOVES = [
    (Cause.CLAIM, N.QUEUED, N.QUEUED),  # a claim taken twice changes the row once
    (Cause.CLAIM, N.FAILED, N.QUEUED),  # a failed node is retried through retrying
    (Cause.START, N.PENDING, N.RUNNING),
    (Cause.FINISH, N.CANCELLED, N.SUCCEEDED),  # a cancelled attempt's result is dropped
    (Cause.FINISH, N.RUNNING, N.DEAD),
    (Cause.SKIP, N.QUEUED, N.SKIPPED),
    (Cause.LOST, N.QUEUED, N.FAILED),
    (Cause.REPLAY, N.SUCCEEDED, N.PENDING),  # no step is paid for twice
    (Cause.RETRY, N.DEAD, N.RETRYING),
    (Cause.CREATE, N.PENDING, N.PENDING),
]


@pytest.mark.parametrize(("cause", "source", "target"), ALLOWED_NODE_MOVES)
def test_the_table_allows_each_move_the_runtime_makes(cause: Cause, source: N | None, target: N) -> None:
    assert can_move_node(cause, source, target)


@pytest.mark.parametrize(("cause", "source", "target"), REFUSED_NODE_MOVES)
def test_the_table_refuses_moves_no_statement_may_make(cause: Cause, source: N | None, target: N) -> None:
    assert not can_move_node(cause, source, target)


def test_no_cause_moves_a_node_out_of_a_terminal_status_but_replay_and_rerun() -> None:
    for cause, moves in NODE_MOVES.items():
        left = {source for source in moves if source in NODE_TERMINAL}
        assert not left or cause in (Cause.REPLAY, Cause.RERUN), (cause, left)
    assert N.CANCELLED not in NODE_MOVES[Cause.RERUN]  # a cancel is final


def test_cancel_reaches_every_unfinished_node_and_only_those() -> None:
    assert set(NODE_MOVES[Cause.CANCEL]) == set(N) - NODE_TERMINAL
    assert all(targets == {N.CANCELLED} for targets in NODE_MOVES[Cause.CANCEL].values())


def test_only_create_writes_new_rows() -> None:
    for table in (NODE_MOVES, RUN_MOVES):
        for cause, moves in table.items():
            assert (None in moves) == (cause == Cause.CREATE), cause


def test_run_moves() -> None:
    assert can_move_run(Cause.CREATE, None, R.WAITING)
    assert can_move_run(Cause.RESUME, R.WAITING, R.RUNNING)
    assert can_move_run(Cause.FINISH, R.RUNNING, R.FAILED)
    assert can_move_run(Cause.CANCEL, R.WAITING, R.CANCELLED)
    assert can_move_run(Cause.REPLAY, R.FAILED, R.RUNNING)
    assert not can_move_run(Cause.FINISH, R.CANCELLED, R.SUCCEEDED)  # a cancel is final
    assert not can_move_run(Cause.CANCEL, R.SUCCEEDED, R.CANCELLED)
    assert not can_move_run(Cause.REPLAY, R.CANCELLED, R.RUNNING)
    assert not can_move_run(Cause.RESUME, R.RUNNING, R.RUNNING)


def test_every_status_the_engine_decides_is_reachable_in_the_table() -> None:
    reached = {target for moves in NODE_MOVES.values() for targets in moves.values() for target in targets}
    assert reached == set(N)
    assert NODE_IN_FLIGHT.isdisjoint(NODE_TERMINAL)


def test_the_engine_spells_statuses_with_the_enums() -> None:
    assert tuple(N) == tuple(NodeStatus) and tuple(R) == tuple(RunStatus)
    assert NodeStatus.PENDING is N.PENDING and RunStatus.WAITING is R.WAITING
    assert f"{N.UPSTREAM_FAILED}" == "upstream_failed" == N.UPSTREAM_FAILED
