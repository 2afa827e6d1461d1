"""The comparison of two runs (workflows/forks/comparison.py) and a node's recorded calls, as the API answers them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from typing_extensions import TypedDict

from workflows.api.serializers import LLMUsageOut, RunSummary, run_summary
from workflows.core.outputdiff import JsonDiff
from workflows.forks import comparison as c
from workflows.llm.usage import Totals
from workflows.store.recordings import RecordedCall


class OutputChangeOut(TypedDict):
    path: str  # a JSON path: $, $.a.b, $.items[2], $["odd key"]
    kind: str  # added | removed | changed
    before: Any
    after: Any


class OutputDiffOut(TypedDict):
    same: bool
    changes: list[OutputChangeOut]
    truncated: bool


class TextSegmentOut(TypedDict):
    op: str  # equal | insert | delete
    text: str


class NodeSideOut(TypedDict):
    status: str
    attempt: int
    carried: bool
    output: Any
    error: str
    duration_ms: float | None
    llm_usage: LLMUsageOut


class NodeComparisonOut(TypedDict):
    node_id: str
    verdict: str  # same | changed | only_left | only_right
    left: NodeSideOut | None
    right: NodeSideOut | None
    output_diff: OutputDiffOut
    text_diff: list[TextSegmentOut] | None


class RunSideOut(TypedDict):
    run: RunSummary
    forked_from: int | None
    fork_node: str | None
    duration_ms: float | None
    attempts: int
    llm_usage: LLMUsageOut
    output: dict[str, Any]


class ComparisonOut(TypedDict):
    left: RunSideOut
    right: RunSideOut
    counts: dict[str, int]
    output_diff: OutputDiffOut
    nodes: list[NodeComparisonOut]


class RecordedCallOut(TypedDict):
    """One call that left the process, by the canonical hash of its request (core/callhash.py)."""

    kind: str  # llm | tool
    step: str
    attempt: int
    request_hash: str
    outcome: str  # live | replayed (answered from the record, cost nothing) | missing (recorded mode: failed)
    replayed_from_run: int | None
    created_at: datetime


def recorded_call(r: RecordedCall) -> RecordedCallOut:
    source = r.replayed_from
    return {
        "kind": r.kind,
        "step": r.step,
        "attempt": r.attempt,
        "request_hash": r.request_hash,
        "outcome": r.outcome,
        "replayed_from_run": source.run_id if source is not None else None,
        "created_at": r.created_at,
    }


def diff(d: JsonDiff) -> OutputDiffOut:
    changes = [cast(OutputChangeOut, ch.as_dict()) for ch in d.changes]
    return {"same": d.is_same, "changes": changes, "truncated": d.truncated}


def usage(t: Totals) -> LLMUsageOut:
    return cast(LLMUsageOut, t.as_dict())  # Totals.as_dict has the keys of LLMUsageOut


def side(n: c.NodeSide | None) -> NodeSideOut | None:
    if n is None:
        return None
    return {
        "status": n.status,
        "attempt": n.attempt,
        "carried": n.carried,
        "output": n.output,
        "error": n.error,
        "duration_ms": n.duration_ms,
        "llm_usage": usage(n.llm),
    }


def run_side(r: c.RunSide) -> RunSideOut:
    return {
        "run": run_summary(r.run),
        "forked_from": r.fork.origin_number if r.fork else None,
        "fork_node": r.fork.node_id if r.fork else None,
        "duration_ms": r.duration_ms,
        "attempts": r.attempts,
        "llm_usage": usage(r.llm),
        "output": r.output,
    }


def comparison(cmp: c.Comparison) -> ComparisonOut:
    return {
        "left": run_side(cmp.left),
        "right": run_side(cmp.right),
        "counts": cmp.counts,
        "output_diff": diff(cmp.output),
        "nodes": [
            {
                "node_id": n.node_id,
                "verdict": n.verdict,
                "left": side(n.left),
                "right": side(n.right),
                "output_diff": diff(n.output),
                "text_diff": [{"op": op, "text": t} for op, t in n.text] if n.text is not None else None,
            }
            for n in cmp.nodes
        ],
    }
