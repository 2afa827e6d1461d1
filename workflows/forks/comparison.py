"""Two runs of a workflow side by side: per node, status, output, tokens, cost and duration.

Decisions:

- The runs must be of the same workflow (on any versions); the same run twice compares
  equal. Nodes are listed in the first run's graph order, then the nodes only the second
  run's version has; a node on one side only is `only_left` / `only_right`.
- Outputs are compared as JSON (core/outputdiff.py: each differing leaf at its path); when
  both outputs carry LLM text (`content`, as llm.chat and llm.agent answer), the text is
  also compared word by word.
- A node's verdict is `same` (status and output alike), `changed`, or one-sided. Errors are
  shown, not compared (they carry ids and times).
- Tokens and cost are the node's LLM calls in that run (carried nodes of a fork made none:
  their cost stays with the origin); duration is the node's, first start to finish.
- Totals: the run's status and duration (start to finish, or to now while it runs), the
  node attempts it executed, and its LLM calls, tokens and cost.
- Four queries per side however many nodes (runs of 500 nodes are compared in one page).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum
from django.utils import timezone

from workflows.core.outputdiff import JsonDiff, diff_json, diff_text
from workflows.llm.usage import Totals
from workflows.runs import actions as runs
from workflows.store.errors import Invalid
from workflows.store.forks import RunFork
from workflows.store.graphs import load_graph
from workflows.store.models import LLMCall, NodeRun, Run

TEXT_KEY = "content"  # where llm.chat and llm.agent put their text in their output


@dataclass(frozen=True)
class NodeSide:
    """One node in one run."""

    status: str
    attempt: int
    output: Any
    error: str
    duration_ms: float | None
    carried: bool
    llm: Totals


@dataclass(frozen=True)
class NodeComparison:
    node_id: str
    left: NodeSide | None
    right: NodeSide | None
    output: JsonDiff
    text: list[tuple[str, str]] | None  # the LLM text's word diff, when both sides have text that differs

    @property
    def verdict(self) -> str:
        if self.left is None:
            return "only_right"
        if self.right is None:
            return "only_left"
        same = self.left.status == self.right.status and self.output.is_same
        return "same" if same else "changed"


@dataclass(frozen=True)
class RunSide:
    """A run's totals."""

    run: Run
    fork: RunFork | None
    duration_ms: float | None
    attempts: int
    llm: Totals
    output: dict[str, Any]


@dataclass(frozen=True)
class Comparison:
    left: RunSide
    right: RunSide
    nodes: list[NodeComparison]
    output: JsonDiff
    counts: dict[str, int] = field(default_factory=dict)  # verdict -> nodes


def compare_runs(left_id: int, right_id: int) -> Comparison:
    """Compare run `left_id` (before) with run `right_id` (after); refuse runs of two workflows."""
    left, right = runs.get_run(left_id), runs.get_run(right_id)
    if left.workflow_id != right.workflow_id:
        raise Invalid(
            f"Run {right_id} is of workflow {right.workflow.slug!r}, run {left_id} of "
            f"{left.workflow.slug!r}: only runs of one workflow can be compared."
        )
    left_nodes, right_nodes = nodes_of(left), nodes_of(right)
    order = node_order(left, right)
    nodes = [compare_node(n, left_nodes.get(n), right_nodes.get(n)) for n in order]
    sides = run_side(left, left_nodes), run_side(right, right_nodes)
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.verdict] = counts.get(n.verdict, 0) + 1
    return Comparison(sides[0], sides[1], nodes, diff_json(sides[0].output, sides[1].output), counts)


def node_order(left: Run, right: Run) -> list[str]:
    first = list(load_graph(left.version_id).order)
    return first + [n for n in load_graph(right.version_id).order if n not in set(first)]


def nodes_of(run: Run) -> dict[str, NodeSide]:
    """Every node of the run's graph as one side of the comparison (compensation steps left out)."""
    graph = load_graph(run.version_id)
    fork = RunFork.objects.filter(run=run).only("carried").first()
    carried = set(fork.carried) if fork else set()
    llm = llm_by_node(run.pk)
    rows = NodeRun.objects.filter(run=run, node_id__in=list(graph.order)).only(
        "node_id", "status", "attempt", "output", "error", "started_at", "finished_at"
    )
    return {
        n.node_id: NodeSide(
            n.status,
            n.attempt,
            n.output,
            n.error,
            millis(n.started_at, n.finished_at),
            n.node_id in carried,
            llm.get(n.node_id, Totals()),
        )
        for n in rows
    }


def llm_by_node(run_id: int) -> dict[str, Totals]:
    """node id -> the totals of the run's LLM calls of that node, in one query."""
    rows = (
        LLMCall.objects.filter(run_id=run_id)
        .values("node_id")
        .annotate(
            n=Count("id"), i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"), priced=Count("cost")
        )
    )
    return {
        r["node_id"]: Totals(r["n"], r["i"] or 0, r["o"] or 0, r["c"], r["n"] - r["priced"]) for r in rows
    }


def compare_node(node_id: str, left: NodeSide | None, right: NodeSide | None) -> NodeComparison:
    if left is None or right is None:
        return NodeComparison(node_id, left, right, JsonDiff(()), None)
    output = diff_json(left.output, right.output)
    return NodeComparison(node_id, left, right, output, text_diff(left.output, right.output))


def text_diff(left: Any, right: Any) -> list[tuple[str, str]] | None:
    """The word diff of two outputs' LLM text, if both have text and it differs."""
    a = left.get(TEXT_KEY) if isinstance(left, dict) else None
    b = right.get(TEXT_KEY) if isinstance(right, dict) else None
    if not isinstance(a, str) or not isinstance(b, str) or a == b:
        return None
    return diff_text(a, b)


def run_side(run: Run, nodes: dict[str, NodeSide]) -> RunSide:
    llm = sum_totals([n.llm for n in nodes.values()])
    attempts = sum(0 if n.carried else n.attempt for n in nodes.values())
    fork = RunFork.objects.filter(run=run).first()
    end = run.finished_at or timezone.now()
    return RunSide(run, fork, millis(run.created_at, end), attempts, llm, runs.run_output(run))


def sum_totals(parts: list[Totals]) -> Totals:
    priced = [p.cost for p in parts if p.cost is not None]
    cost = sum(priced, Decimal(0)) if priced else None
    return Totals(
        sum(p.calls for p in parts),
        sum(p.input_tokens for p in parts),
        sum(p.output_tokens for p in parts),
        cost,
        sum(p.unpriced for p in parts),
    )


def millis(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 1)
