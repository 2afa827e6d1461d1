"""Usage and cost: one `LLMCall` row per call, priced from the price table, and the totals.

A call is priced when it is recorded (`prices.cost_of`); later price changes, or deleting
its provider, leave its recorded cost as it was.

A model without a price has a NULL cost, shown as "unknown", never as 0: totals say how many
calls were not priced, and their cost is None when no call was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, cast

from django.db import connection
from django.db.models import Count, F, QuerySet, Sum
from django.utils import timezone

from workflows.llm.client import Completion
from workflows.llm.prices import cost_of
from workflows.llm.providers import Endpoint
from workflows.runtime import bus
from workflows.store.models import LLMCall, NodeRun
from workflows.store.statements import NODES, RUNS, table


def plain(value: Decimal) -> str:
    """A decimal without exponent or trailing zeros: 10, 2.5, 0.000125."""
    return format(value.normalize(), "f")


CALL_COLUMNS = (
    "step",
    "provider",
    "model",
    "response_model",
    "demo",
    "latency_ms",
    "first_token_ms",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
    "finish_reason",
    "error",
    "input_tokens",
    "output_tokens",
    "created_at",
)
# The attempt's run, workflow, node and attempt number are taken from its row in the same
# statement (one round trip a call, not a read and then an insert).
RECORD_SQL = f"""
INSERT INTO {table(LLMCall)} (node_run_id, run_id, workflow_id, node_id, attempt, {", ".join(CALL_COLUMNS)})
SELECT n.id, n.run_id, r.workflow_id, n.node_id, n.attempt, {", ".join(f"%({c})s" for c in CALL_COLUMNS)}
FROM {NODES} n JOIN {RUNS} r ON r.id = n.run_id WHERE n.id = %(node_run_id)s
RETURNING id, run_id, workflow_id, node_id, attempt
"""


def record_call(
    *,
    node_run_id: int,
    endpoint: Endpoint,
    completion: Completion | None,
    error: str = "",
    step: str = "",
    cost: Decimal | None = None,
) -> LLMCall:
    """Write one row for one call (a failed call too: it may have been paid for).

    With `cost`, the call is not priced: a replayed call (llm/replays.py) costs 0, and is not
    counted in the provider's counters (it never reached the provider)."""
    call = call_row(node_run_id, endpoint, completion, error, step, cost)
    with connection.cursor() as cursor:
        cursor.execute(RECORD_SQL, {"node_run_id": node_run_id, **call_params(call)})
        found = cursor.fetchone()
    if found is None:
        raise NodeRun.DoesNotExist(f"no attempt row {node_run_id} to record an LLM call under")
    call.pk, call.run_id, call.workflow_id, call.node_id, call.attempt = found
    if cost is None:
        count_call(call)
    return call


def call_row(
    node_run_id: int,
    endpoint: Endpoint,
    completion: Completion | None,
    error: str = "",
    step: str = "",
    cost: Decimal | None = None,
) -> LLMCall:
    """The row of one call, priced unless `cost` is given, not yet written (`record_call`, or
    an agent's turn with its step: workflows/agents/steps.py, then `count_call`)."""
    tokens: dict[str, Any] = {"input_tokens": None, "output_tokens": None}
    if completion is not None:
        tokens = {"input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens}
    return LLMCall(
        node_run_id=node_run_id,
        step=step[:100],
        provider=endpoint.provider,
        model=endpoint.model,
        response_model=(completion.model if completion else "")[:200],
        demo=endpoint.demo,
        latency_ms=completion.latency_ms if completion else 0.0,
        first_token_ms=completion.first_token_ms if completion else None,
        cache_read_tokens=completion.cache_read_tokens if completion else None,
        cache_write_tokens=completion.cache_write_tokens if completion else None,
        cost=cost_of(endpoint.provider, endpoint.model, **tokens) if cost is None else cost,
        finish_reason=(completion.finish_reason or "")[:40] if completion else "",
        error=(error or "")[:2000],
        created_at=timezone.now(),
        **tokens,
    )


def call_params(call: LLMCall, prefix: str = "") -> dict[str, Any]:
    """RECORD_SQL's parameters of a call's row (CALL_COLUMNS), their names prefixed."""
    return {prefix + c: getattr(call, c) for c in CALL_COLUMNS}


# --- counters for /metrics (Redis: they restart from zero when Redis is emptied, as the
# runtime's own counters do; Prometheus reads that as a counter reset) ---------------------

COUNTERS = "sy:llm:counters"  # hash: "provider\tmodel\tname" -> total
SEP = "\t"


def count_call(call: LLMCall) -> None:
    """Add one call to the per provider and model counters."""
    prefix = f"{call.provider}{SEP}{call.model}{SEP}"
    pipe = bus.client().pipeline(transaction=False)
    pipe.hincrby(COUNTERS, prefix + ("errors" if call.error else "calls"), 1)
    pipe.hincrby(COUNTERS, prefix + "input_tokens", call.input_tokens or 0)
    pipe.hincrby(COUNTERS, prefix + "output_tokens", call.output_tokens or 0)
    if call.cost is None:
        pipe.hincrby(COUNTERS, prefix + "unpriced", 1)
    else:
        pipe.hincrbyfloat(COUNTERS, prefix + "cost", float(call.cost))
    pipe.execute()


def read_counters() -> dict[tuple[str, str], dict[str, float]]:
    """(provider, model) -> {calls, errors, input_tokens, output_tokens, cost, unpriced}."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    for field, value in cast(dict[str, str], bus.client().hgetall(COUNTERS)).items():
        provider, model, name = field.split(SEP, 2)
        found.setdefault((provider, model), {})[name] = float(value)
    return found


@dataclass(frozen=True)
class Totals:
    """Calls, tokens and cost of a set of calls; `cost` None means no call had a price."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = None
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_text(self) -> str:
        """The cost for people: "unknown" when nothing was priced, flagged when partly."""
        if self.cost is None:
            return "unknown" if self.calls else "0"
        shown = f"{self.cost:.4f}"
        return f"{shown} (+{self.unpriced} unpriced)" if self.unpriced else shown

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": None if self.cost is None else plain(self.cost),
            "unpriced_calls": self.unpriced,
        }


def totals(calls: QuerySet[LLMCall]) -> Totals:
    """Sum a set of calls in one query."""
    agg = calls.aggregate(
        n=Count("id"),
        i=Sum("input_tokens"),
        o=Sum("output_tokens"),
        c=Sum("cost"),
        priced=Count("cost"),
    )
    return Totals(agg["n"], agg["i"] or 0, agg["o"] or 0, agg["c"], agg["n"] - agg["priced"])


def run_totals(run_id: int) -> Totals:
    return totals(LLMCall.objects.filter(run_id=run_id))


def node_totals(node_run_id: int, attempt: int | None = None) -> Totals:
    calls = LLMCall.objects.filter(node_run_id=node_run_id)
    return totals(calls if attempt is None else calls.filter(attempt=attempt))


def workflow_totals(workflow_id: int, day: date | None = None) -> Totals:
    calls = LLMCall.objects.filter(workflow_id=workflow_id)
    return totals(calls if day is None else calls.filter(created_at__date=day))


def day_totals(day: date | None = None) -> Totals:
    return totals(LLMCall.objects.filter(created_at__date=day or timezone.localdate()))


def totals_by_node(run_id: int) -> dict[str, Totals]:
    """node id -> totals of one run's calls (for the run page)."""
    ids = LLMCall.objects.filter(run_id=run_id).values_list("node_id", flat=True).distinct()
    return {node_id: totals(LLMCall.objects.filter(run_id=run_id, node_id=node_id)) for node_id in ids}


def run_usage(run_id: int) -> dict[str, Any]:
    """A run's LLM usage as the API answers it: the run's totals and each LLM node's."""
    return {
        "run": run_totals(run_id).as_dict(),
        "nodes": {node_id: t.as_dict() for node_id, t in totals_by_node(run_id).items()},
    }


def card_context(workflow: Any = None) -> dict[str, Any]:
    """What templates/llm/usage_card.html shows: today's totals (of a workflow, or all) and the top spenders."""
    if workflow is None:
        return {"usage_today": day_totals(), "usage_top": top_workflows()}
    return {
        "usage_workflow": workflow,
        "usage_today": workflow_totals(workflow.pk, timezone.localdate()),
        "usage_all": workflow_totals(workflow.pk),
    }


def top_workflows(day: date | None = None, limit: int = 5) -> list[dict[str, Any]]:
    """The workflows that spent most on a day: slug, calls, tokens, cost (unpriced last)."""
    rows = (
        LLMCall.objects.filter(created_at__date=day or timezone.localdate())
        .values("workflow__slug")
        .annotate(calls=Count("id"), i=Sum("input_tokens"), o=Sum("output_tokens"), cost=Sum("cost"))
        .order_by(F("cost").desc(nulls_last=True), "-calls")[:limit]
    )
    return [
        {
            "slug": r["workflow__slug"],
            "calls": r["calls"],
            "tokens": (r["i"] or 0) + (r["o"] or 0),
            "cost": r["cost"],
        }
        for r in rows
    ]


def model_totals(day: date | None = None) -> list[dict[str, Any]]:
    """Calls, tokens and cost per provider and model on a day."""
    rows = (
        LLMCall.objects.filter(created_at__date=day or timezone.localdate())
        .values("provider", "model", "demo")
        .annotate(
            calls=Count("id"),
            i=Sum("input_tokens"),
            o=Sum("output_tokens"),
            spent=Sum("cost"),
            priced=Count("cost"),
        )
        .order_by("provider", "model")
    )
    return [{**r, "cost": r["spent"], "unpriced": r["calls"] - r["priced"]} for r in rows]
