"""Node kinds in the runtime: how a node of each kind is claimed, executed and finished.

A node's kind (`Node.kind`, "task" by default) is decided in two places only: the engine's
`start_node` (what a ready node becomes) and `kind_of` here (how the runtime carries it out).
A ready task is claimed into a new attempt and an RQ job
(`jobs.claim_and_enqueue`: pending or retrying -> queued), a worker starts it (queued ->
running, `transitions.start_attempts`), calls its handler once under its timeout, and stores
the result (running, or queued for a direct job, -> succeeded or failed,
`transitions.finish_attempts`). Failed attempts are retried or killed by the engine
whatever the kind.

How a new kind plugs in (waiting nodes, maps, child runs, agent loops):
1. the engine: a branch in `engine.start_node` returning the kind's decision (a waiting node
   `WaitNode`, say), and the states it uses in core/states.py with their rows in the table
   of moves (a `waiting` status; causes such as `wait`, `decide`, `expire`);
2. transitions.py (or its family: transitions_runs.py, transitions_maps.py, transitions_waits.py): a function per new statement, each a conditional UPDATE declared with
   `@performs` (the table refuses a move it does not list);
3. a class with the methods of `NodeKind`, registered here with `register` (the runtime's own
   kinds below; a domain package's kind from its `kind` module, wired in workflows/apps.py, so
   the runtime never imports the domain):
   `claim` takes ready nodes of the kind out of pending (a waiting node: pending -> waiting,
   no job, no worker held); `execute` runs one attempt in a worker (an agent loop: its turns
   as durable steps under the attempt); a kind whose attempts never reach a worker does not
   use `execute` and finishes through its own statement in transitions (a decision, an
   event, a deadline, a child run's end);
4. the reconciler: what of the kind's in-flight states a crash can leave behind.
A kind uses only the causes the table lists for it: claim, start, finish, retry, dead and
lost for tasks; wait, decide, event and expire (and retry, dead) for wait nodes; cancel and
replay apply to every kind.

The agent kind (`llm.agent`, core/agent.py): claimed, started and finished as a task (the
same causes and statements); its `execute` runs the loop, whose steps are rows of their own
(AgentStep) written only while the attempt is the node's running one. The reconciler
treats it as a task: a lost attempt is failed and retried, and the retry reads the steps.
A call of a workflow as a tool (workflows/agents/tools.py) makes the running attempt wait
(cause call: running -> waiting, `Parked`: the worker stores nothing and moves on) while the
child runs; the child's end queues the same attempt again (cause child: waiting -> queued),
and a worker continues the loop from its steps. Nothing new for the reconciler: a kill
before the call's commit is a lost running attempt, after it a waiting node (no worker,
not stalled), and a resumed attempt's lost job is a queued attempt whose job waits nowhere.

The wait kinds (`human.approval`, `wait.event`, `wait.timer`, core/waits.py): a ready one
is claimed into `waiting` (pending or retrying -> waiting, a new attempt, no job: it holds
no worker, but keeps its place under the node's `max_in_flight`, capacity.py) with its Wait
row (workflows/waits/waiting.py); it leaves by a decision, an event or a deadline (`transitions.decide_waits`, `wake_waits`, `expire_waits`).
The reconciler has nothing to repair in it: the wait is all in Postgres, and a run whose
node waits is neither stalled nor finished (reconciler.STALLED_RUNS_SQL).

The map kind (`map`: a node with a `map` expression, core/maps.py, runtime/mapping.py): a
ready map node is claimed into `waiting` like a wait node (cause wait: no job, no worker),
its list computed and its items written as MapItem rows in one statement; the items are
claimed up to `max_parallel` (claim), run in workers (start, finish: `execute` here is the
item's handler, given `ctx.item` and `ctx.index`; on the worker's slots when the handler is
I/O-bound, `is_io_bound`), retried or made dead with a dead letter
each (retry, dead), by the same table of moves as task attempts. When none is left open,
one statement ends the node (cause gather: succeeded with the outputs in order, or dead by
a dead item under `on_item_failure: fail`; failed at once when its list cannot be
computed). Claims and the gather run under the run's row lock (transitions.lock_map). The
reconciler repairs items queued without a job, items on dead workers, and maps whose next
step a crash lost (mapping.reconcile). A cancel of the run cancels its open items.

The child-run kind (`workflow.run`, core/children.py) is claimed the same way, into
`waiting` with its child run created in the same transaction (workflows/children/start.py); it
leaves by its child's end (`transitions.settle_children`, in the transaction that ends the
child: workflows/runtime/parents.py). Nothing of it is in Redis either.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Protocol

from workflows import handlers
from workflows.core.graph import MAP, TASK, Node
from workflows.core.states import NodeStatus
from workflows.runtime import jobs, mapping


class Parked(Exception):
    """The attempt now waits, holding no worker (a workflow tool's call moved the node
    running -> waiting in its own transaction): the worker stores no result (execution.py)."""


class NodeKind(Protocol):
    name: str

    def claim(self, rows: list[jobs.Ready], workers: int, status: NodeStatus) -> int:
        """Take these ready nodes, all still in `status`, out of it; return how many moved."""
        ...

    def execute(self, node: Node, ctx: handlers.NodeContext) -> Any:
        """Run one attempt in a worker and return its output (JSON); raise to fail it."""
        ...

    def began(self, node: Node, ctx: handlers.NodeContext, job_started: datetime) -> datetime:
        """When the attempt this job ran began (an attempt may span several jobs)."""
        ...

    def is_io_bound(self, node: Node) -> bool:
        """Whether its attempts wait on I/O, so a worker runs them in slots (runtime/slots.py)."""
        ...

    async def execute_on_loop(self, node: Node, ctx: handlers.NodeContext) -> Any:
        """Run one attempt as a coroutine on the worker's loop (only when `is_io_bound`)."""
        ...


class Task:
    """Call the node's handler once per attempt."""

    name = TASK

    def claim(self, rows: list[jobs.Ready], workers: int, status: NodeStatus) -> int:
        return jobs.claim_and_enqueue(rows, workers, status)

    def execute(self, node: Node, ctx: handlers.NodeContext) -> Any:
        return handlers.get_handler(node.handler).func(ctx)

    def began(self, node: Node, ctx: handlers.NodeContext, job_started: datetime) -> datetime:
        return job_started

    def is_io_bound(self, node: Node) -> bool:
        return handlers.get_handler(node.handler).io_bound

    async def execute_on_loop(self, node: Node, ctx: handlers.NodeContext) -> Any:
        coroutine = handlers.get_handler(node.handler).on_loop
        assert coroutine is not None, f"node {node.id!r} is not I/O-bound"
        return await coroutine(ctx)


class Mapper(Task):
    """Run the node's handler once per item of a list, the node waiting meanwhile (runtime/mapping.py)."""

    name = MAP

    def claim(self, rows: list[jobs.Ready], workers: int, status: NodeStatus) -> int:
        return mapping.enter_maps(rows, status, workers)

    # is_io_bound and execute_on_loop are the task's: its items run in slots when the handler
    # has a coroutine, else one at a time under SIGALRM (runtime/items.py).


class HoldsNoWorker:
    """A kind whose attempts never reach a worker (waits, child runs): claimed into `waiting`."""

    name: str

    def execute(self, node: Node, ctx: handlers.NodeContext) -> Any:
        raise handlers.HandlerError(f"Node {node.id!r} waits ({self.name}); it never runs in a worker.")

    def began(self, node: Node, ctx: handlers.NodeContext, job_started: datetime) -> datetime:
        return job_started

    def is_io_bound(self, node: Node) -> bool:
        return False

    async def execute_on_loop(self, node: Node, ctx: handlers.NodeContext) -> Any:
        raise handlers.HandlerError(f"Node {node.id!r} waits ({self.name}); it never runs in a worker.")


KINDS: dict[str, NodeKind] = {TASK: Task(), MAP: Mapper()}


def register(kind: NodeKind) -> None:
    """Make a node kind known to the runtime (at app start, before any job runs)."""
    KINDS[kind.name] = kind


def began(node: Node, ctx: handlers.NodeContext, job_started: datetime) -> datetime:
    """When the attempt this job ran began: an agent's resumed after a workflow tool's child
    run began in an earlier job, so its span covers the whole attempt, the wait included
    (as a waiting node's attempt does)."""
    return kind_of(node).began(node, ctx, job_started)


def is_io_bound(node: Node) -> bool:
    """Whether a worker runs this node's attempts in slots, as coroutines (runtime/slots.py).

    Each kind decides, in one place: an agent loop (its turns and tool calls), a task whose
    handler registered a coroutine (`on_loop`: llm.chat, http.request) and a map's items
    of such a handler wait on I/O;
    everything else runs one at a time under SIGALRM.
    """
    return kind_of(node).is_io_bound(node)


async def execute_on_loop(node: Node, ctx: handlers.NodeContext) -> Any:
    """Run one attempt of an I/O-bound node (`is_io_bound`) as a coroutine; return its output."""
    return await kind_of(node).execute_on_loop(node, ctx)


def kind_of(node: Node) -> NodeKind:
    """The runtime side of a node's kind: the one place the runtime looks at it."""
    try:
        return KINDS[node.kind]
    except KeyError:
        raise ValueError(f"Node {node.id!r} has kind {node.kind!r}, which this runtime cannot run.") from None


def claim_ready(rows: list[jobs.Ready], workers: int, status: NodeStatus = NodeStatus.PENDING) -> int:
    """Claim ready nodes, each by its kind; return how many were claimed."""
    if all(row.kind == TASK for row in rows):  # the common case: no regrouping on the hot path
        return KINDS[TASK].claim(rows, workers, status)
    by_kind: dict[str, list[jobs.Ready]] = defaultdict(list)
    for row in rows:
        by_kind[row.kind].append(row)
    return sum(KINDS[kind].claim(group, workers, status) for kind, group in by_kind.items())


def marks_io_bound(node: Node) -> bool:
    """`is_io_bound` as jobs.py marks job ids with it (a kind not registered here: False)."""
    return node.kind in KINDS and is_io_bound(node)


jobs.use_io_bound(marks_io_bound)
