"""Recorded calls and their replay, for any node that calls out (LLM calls and agent tool calls
through workflows/llm/replays.py).

Every call with an attempt row is recorded with the canonical hash of its request
(core/callhash.py, store/recordings.py). A fork made with a calls mode other than `live`
replays its origin's:

- `recorded`: a call whose request hashes like one the origin made is answered with that
  call's recorded response; any other call fails the attempt (`ReplayMiss`), naming its hash
  and the JSON paths where it differs from the nearest call the origin made at that node.
  Nothing new is sent.
- `recorded-then-live`: identical calls are replayed, new ones are made live (and recorded).

A suite's case run replays the run its case came from the same way (store/suites.py).
The mode and origin of a run are read once per process (a fork's row, and a case run's,
never changes after it is written). Beside the handlers, so that a built-in handler (`http.request`) uses it too.
A handler's slot variant reaches it through `arecorded_answer` and `arecord_live`, run where
the worker's slots say (registry.run_sync: their sync thread).
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any

from workflows.core import callhash
from workflows.handlers.registry import HandlerError, NodeContext, run_sync

if TYPE_CHECKING:  # the models are imported where used: the handlers import without Django set up
    from workflows.store.recordings import RecordedCall


class ReplayMiss(HandlerError):
    """A call a fork in `recorded` mode makes that its origin never made: the attempt fails."""


NEAREST_SCANNED = 50  # recorded calls of the node compared with a missed request, newest first


def replay_of(run_id: int) -> tuple[str, int | None] | None:
    """(mode, origin run id) of a fork, or of a suite's case run (store/suites.py), that replays
    its origin's calls; None for a live run. Read once per process and run (store/runlinks.py),
    with the run's trace links when its traceparent was asked for first."""
    from workflows.store import runlinks

    return runlinks.replay_of(run_id)


def is_known_live(run_id: int) -> bool:
    """Whether this process read already that the run makes its calls live: a slot's call then
    needs no hand-over to the sync thread to learn it (arecorded_answer's callers)."""
    from workflows.store import runlinks

    return runlinks.is_known_live(run_id)


def recorded_answer(ctx: NodeContext, request: dict[str, Any], step: str) -> RecordedCall | None:
    """The recorded call that answers `request` in a replaying fork (recorded as replayed here);
    None to make the call live. Raise HandlerError in `recorded` mode when the origin made no such call."""
    replay = replay_of(ctx.run_id) if ctx.recorded_as() is not None else None
    if replay is None:
        return None
    from workflows.store.recordings import RecordedCall

    mode, origin = replay
    digest = callhash.request_hash(request)
    found = None
    if origin is not None:
        calls = RecordedCall.objects.filter(run_id=origin, kind=request["kind"], request_hash=digest)
        found = calls.exclude(outcome=RecordedCall.MISSING).order_by("id").first()
    if found is not None:
        return write(ctx, request, digest, step, found.response, RecordedCall.REPLAYED, found)
    if mode == callhash.RECORDED:
        write(ctx, request, digest, step, None, RecordedCall.MISSING)
        raise ReplayMiss(miss(ctx, request, digest, step, origin))
    return None


def miss(ctx: NodeContext, request: dict[str, Any], digest: str, step: str, origin: int | None) -> str:
    """Why a call was not replayed: its hash, and where it differs from the nearest recorded call."""
    where = f"node {ctx.node_id!r}" + (f" {step}" if step else "")
    head = f"{where}: recorded mode: run {origin} made no {request['kind']} call with this request (hash {digest[:12]})"
    if origin is None:
        return f"{where}: recorded mode: the run this fork replays was deleted; nothing can be replayed."
    from workflows.store.recordings import RecordedCall

    wanted = callhash.summary(request)
    rows = RecordedCall.objects.filter(run_id=origin, kind=request["kind"], node_id=ctx.node_id).order_by(
        "-id"
    )
    nearest = [(callhash.differences(wanted, r.request), r) for r in rows[:NEAREST_SCANNED]]
    if not nearest:
        return f"{head}, nor any call at this node. Fork with recorded-then-live to make new calls live."
    paths, row = min(nearest, key=lambda pair: len(pair[0]))
    return (
        f"{head}; the nearest it made here (hash {row.request_hash[:12]}) differs at {', '.join(paths)}. "
        "Fork with recorded-then-live to make new calls live."
    )


def under(ctx: NodeContext, step: str) -> tuple[int, int, str]:
    """(NodeRun id, attempt, step) a call of this context is recorded under (NodeContext.recorded_as):
    only asked for a context that has them."""
    found = ctx.recorded_as(step)
    if found is None:
        raise ValueError(f"node {ctx.node_id!r}: a call made outside a worker is not recorded")
    return found


def write(
    ctx: NodeContext,
    request: dict[str, Any],
    digest: str,
    step: str,
    response: Any,
    outcome: str,
    source: RecordedCall | None = None,
) -> RecordedCall:
    from workflows.store.recordings import RecordedCall

    node_run_id, attempt, step = under(ctx, step)
    return RecordedCall.objects.create(
        run_id=ctx.run_id,
        node_run_id=node_run_id,
        node_id=ctx.node_id,
        attempt=attempt,
        kind=request["kind"],
        step=step[:100],
        request_hash=digest,
        request=callhash.summary(request),
        response=response,
        outcome=outcome,
        replayed_from=source,
    )


LIVE_COLUMNS = (
    "run_id",
    "node_run_id",
    "node_id",
    "attempt",
    "kind",
    "step",
    "request_hash",
    "request",
    "response",
    "outcome",
    "created_at",
)


def live_values(prefix: str = "") -> str:
    """The VALUES of a live call's INSERT (LIVE_COLUMNS), its parameter names prefixed."""
    return ", ".join(
        f"%({prefix}{c})s" + ("::jsonb" if c in ("request", "response") else "") for c in LIVE_COLUMNS
    )


def record_live(ctx: NodeContext, request: dict[str, Any], response: Any, step: str) -> None:
    """Record a call made live (nothing without an attempt row): one INSERT written out, as
    every call of every agent turn and tool makes one (the ORM's building of it cost more
    than the statement). An agent's step writes it in its own statement instead
    (`live_params`, workflows/agents/steps.py)."""
    from django.db import connection

    from workflows.store.recordings import RecordedCall
    from workflows.store.statements import table

    if ctx.recorded_as() is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(RecordedCall)} ({', '.join(LIVE_COLUMNS)}) VALUES ({live_values()})",
            live_params(ctx, request, response, step),
        )


def live_params(
    ctx: NodeContext, request: dict[str, Any], response: Any, step: str, prefix: str = ""
) -> dict[str, Any]:
    """The row of a call made live (LIVE_COLUMNS), its parameter names prefixed."""
    from workflows.store.recordings import RecordedCall

    node_run_id, attempt, step = under(ctx, step)
    row = {
        "run_id": ctx.run_id,
        "node_run_id": node_run_id,
        "node_id": ctx.node_id,
        "attempt": attempt,
        "kind": request["kind"],
        "step": step[:100],
        "request_hash": callhash.request_hash(request),
        "request": json.dumps(callhash.summary(request)),
        "response": None if response is None else json.dumps(response),
        "outcome": RecordedCall.LIVE,
        "created_at": datetime.datetime.now(datetime.UTC),
    }
    return {prefix + name: value for name, value in row.items()}


# --------------------------------------------------------------------------- from a slot's coroutine


async def arecorded_answer(ctx: NodeContext, request: dict[str, Any], step: str) -> RecordedCall | None:
    """`recorded_answer`, awaited from a slot's coroutine (on the slots' sync thread)."""
    return await run_sync(recorded_answer, ctx, request, step)


async def arecord_live(ctx: NodeContext, request: dict[str, Any], response: Any, step: str) -> None:
    """`record_live`, awaited from a slot's coroutine (on the slots' sync thread)."""
    await run_sync(record_live, ctx, request, response, step)
