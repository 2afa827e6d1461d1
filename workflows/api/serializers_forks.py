"""The comparison of two runs as the API answers it (workflows/forks/comparison.py)."""

from __future__ import annotations

from typing import Any, cast

from typing_extensions import TypedDict

from workflows.api.serializers import LLMUsageOut, RunSummary, run_summary
from workflows.core.outputdiff import JsonDiff
from workflows.forks import comparison as c
from workflows.llm.usage import Totals


class ChangeOut(TypedDict):
    path: str  # a JSON path: $, $.a.b, $.items[2], $["odd key"]
    kind: str  # added | removed | changed
    before: Any
    after: Any


class DiffOut(TypedDict):
    same: bool
    changes: list[ChangeOut]
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
    output_diff: DiffOut
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
    output_diff: DiffOut
    nodes: list[NodeComparisonOut]


def diff(d: JsonDiff) -> DiffOut:
    changes = [cast(ChangeOut, ch.as_dict()) for ch in d.changes]
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
