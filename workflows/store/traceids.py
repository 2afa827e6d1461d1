"""Trace and span ids of runs, attempts and agent steps, and which trace a run belongs to.

The one scheme of ids, used by the exporter (monitoring/services/tracing.py), which builds
spans after the fact, and by the workers, which send a W3C `traceparent` on outbound calls
(`traceparent_of`) so that the server's spans join the attempt's. Ids are derived from the
run, node, attempt and step (sha256), so any process computes the same ones.
"""

from __future__ import annotations

import hashlib

from workflows.store import runlinks


def id_from(text: str, bits: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[: bits // 8], "big") or 1


def trace_id(run_id: int, parents: dict[int, tuple[int, int]] | None = None) -> int:
    """The run's trace: the caller's when it sent a traceparent, else derived from the run id."""
    if parents and run_id in parents:
        return parents[run_id][0]
    return id_from(f"switchyard:run:{run_id}", 128)


def trace_parents(run_ids: set[int]) -> dict[int, tuple[int, int]]:
    """run id -> (trace id, parent span id) of the runs whose trace is not their own.

    A run started with a traceparent joins the caller's trace under the caller's span. A
    child run (a workflow.run node's, or an agent's workflow tool call's) joins its parent
    run's trace, under the attempt or the tool call that started it: one query per level
    of nesting, and only for runs that are children (store/runlinks.py, which remembers
    what the runs replay on the way).
    """
    parents: dict[int, tuple[int, int]] = {}
    links: dict[int, tuple[int, int]] = {}  # child run -> (parent run, span it starts under)
    todo = set(run_ids)
    while todo:
        traced, children = runlinks.read(todo)
        parents.update({run_id: (int(t, 16), int(s, 16)) for run_id, t, s in traced})
        for child, parent, node_id, attempt, step in children:
            if child not in parents:  # a run's own traceparent wins over its parent run's trace
                links[child] = (
                    parent,
                    step_span_id(step) if step else attempt_span_id(parent, node_id, attempt),
                )
        todo = {parent for parent, _ in links.values()} - set(parents) - set(links)

    def root_trace(run_id: int) -> int:
        while run_id in links:
            run_id = links[run_id][0]
        return parents[run_id][0] if run_id in parents else trace_id(run_id)

    parents.update({child: (root_trace(parent), span) for child, (parent, span) in links.items()})
    return parents


def run_span_id(run_id: int) -> int:
    return id_from(f"switchyard:run-span:{run_id}", 64)


def attempt_span_id(run_id: int, node_id: str, attempt: int) -> int:
    """A node attempt's span: known before the attempt ends, so a child run started by it
    can name it as its parent span."""
    return id_from(f"switchyard:attempt:{run_id}:{node_id}:{attempt}", 64)


def step_span_id(step_id: int) -> int:
    return id_from(f"switchyard:agent-step:{step_id}", 64)


def traceparent_of(run_id: int, node_id: str, attempt: int) -> str:
    """The W3C `traceparent` of an outbound call an attempt makes: the run's trace, the
    attempt's span as the parent, sampled."""
    trace = trace_parents({run_id}).get(run_id, (trace_id(run_id), 0))[0]
    return f"00-{trace:032x}-{attempt_span_id(run_id, node_id, attempt):016x}-01"


# Our own member of the W3C `tracestate` list: which run a call was made for, so a server's
# logs can name it (the key is ours: lowercase, the value without ',' or '=').
TRACESTATE_KEY = "switchyard"


def tracestate_of(run_id: int) -> str:
    """The W3C `tracestate` outbound calls carry: Switchyard's member, naming the run."""
    return f"{TRACESTATE_KEY}=r:{run_id}"


def trace_headers(run_id: int, node_id: str, attempt: int) -> dict[str, str]:
    """The `traceparent` and `tracestate` headers of an outbound call an attempt makes."""
    return {"traceparent": traceparent_of(run_id, node_id, attempt), "tracestate": tracestate_of(run_id)}


def run_traceparent(run_id: int) -> str:
    """The W3C `traceparent` of a call made about a whole run (a webhook delivery): the run's
    trace, the run's span as the parent, sampled."""
    trace = trace_parents({run_id}).get(run_id, (trace_id(run_id), 0))[0]
    return f"00-{trace:032x}-{run_span_id(run_id):016x}-01"
