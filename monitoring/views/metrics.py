"""`/metrics`: Prometheus text, for a bearer token (MONITOR["METRICS_TOKEN"]) or an admin.

Gauges are read at scrape time from the same cheap sources as the dashboard (in-flight rows
through partial indexes, queue depths, heartbeats, the schedulers' notice backlog); counters
and the duration histogram are the totals the broadcaster keeps in Redis (they start from
zero when Redis is emptied, which Prometheus treats as a counter reset).
"""

from __future__ import annotations

import hmac
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from controlplane import access
from monitoring.services import counters, snapshots, sources
from workflows.budgets import manage as budgets
from workflows.llm import usage
from workflows.providers_health import breaker, manage as provider_health
from workflows.store.models import Workflow

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def is_authorized(request: HttpRequest) -> bool:
    token = settings.MONITOR["METRICS_TOKEN"]
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return True
    return access.has_role(request.user, access.ADMIN)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not is_authorized(request):
        response = HttpResponse(
            "Send Authorization: Bearer <SWITCHYARD_METRICS_TOKEN>, or log in as an admin.\n", status=401
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwitchyardCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE)


class SwitchyardCollector:
    def collect(self) -> Iterator[Metric]:
        slugs = dict(Workflow.objects.values_list("id", "slug"))
        yield from self.gauges(slugs)
        yield from self.totals(slugs, counters.read_totals())
        yield from llm_metrics(usage.read_counters())
        yield from budget_metrics(budgets.figures())
        yield from breaker_metrics(provider_health.health())

    def gauges(self, slugs: dict[int, str]) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "switchyard_runs", "Runs not finished yet, by status.", labels=["workflow", "status"]
        )
        for workflow_id, status, n in sources.rows(sources.RUNS_IN_FLIGHT_SQL):
            runs.add_metric([slugs.get(workflow_id, str(workflow_id)), status], n)
        yield runs
        nodes = GaugeMetricFamily(
            "switchyard_nodes_in_flight",
            "Node attempts queued, running or waiting to retry.",
            labels=["workflow", "node", "status"],
        )
        for workflow_id, node_id, status, n in sources.rows(sources.IN_FLIGHT_SQL):
            nodes.add_metric([slugs.get(workflow_id, str(workflow_id)), node_id, status], n)
        yield nodes
        letters = GaugeMetricFamily(
            "switchyard_dead_letters_open", "Dead letters waiting for an operator.", labels=["workflow"]
        )
        for workflow_id, n in sources.rows(sources.OPEN_LETTERS_SQL):
            letters.add_metric([slugs.get(workflow_id, str(workflow_id))], n)
        yield letters
        state = sources.redis_state()
        depth = GaugeMetricFamily(
            "switchyard_queue_depth", "Jobs waiting in each RQ queue.", labels=["queue"]
        )
        for name, n in state["depths"].items():
            depth.add_metric([name], n)
        yield depth
        alive = [name for name, _ in snapshots.alive_workers(state["roster"], time.time())]
        yield GaugeMetricFamily(
            "switchyard_workers_alive", "Workers whose heartbeat is current.", value=len(alive)
        )
        yield worker_slots(sources.worker_beats(alive))
        yield GaugeMetricFamily(
            "switchyard_schedulers_alive",
            "Schedulers whose heartbeat is current.",
            value=len(state["schedulers"]),
        )
        notices = state["notices"]
        yield GaugeMetricFamily(
            "switchyard_scheduler_lag_seconds",
            "Age of the oldest notice no scheduler has read.",
            value=notices["age_seconds"],
        )
        yield GaugeMetricFamily(
            "switchyard_scheduler_backlog", "Notices no scheduler has read yet.", value=notices["count"]
        )
        tick = counters.last_tick()
        if tick is not None:
            yield GaugeMetricFamily(
                "switchyard_broadcaster_last_tick_seconds",
                "Unix time of the broadcaster's last tick.",
                value=tick,
            )

    def totals(self, slugs: dict[int, str], totals: dict[str, float]) -> Iterator[Metric]:
        attempts = CounterMetricFamily(
            "switchyard_node_executions",
            "Node attempts finished, by outcome.",
            labels=["workflow", "node", "status"],
        )
        finished = CounterMetricFamily(
            "switchyard_runs_finished", "Runs finished, by outcome.", labels=["workflow", "status"]
        )
        buckets: dict[tuple[str, str], list[float]] = defaultdict(
            lambda: [0.0] * (len(counters.DURATION_BUCKETS) + 1)
        )
        sums: dict[tuple[str, str], float] = defaultdict(float)
        for key, value in totals.items():
            kind, workflow_id, part, *rest = key.split("|", 3) + [""]
            workflow = slugs.get(int(workflow_id), workflow_id)
            if kind == "n":
                attempts.add_metric([workflow, rest[0], part], value)
            elif kind == "r":
                finished.add_metric([workflow, part], value)
            elif kind == "h":
                buckets[(workflow, rest[0])][int(part)] += value
            elif kind == "s":
                sums[(workflow, part)] += value
        yield attempts
        yield finished
        yield self.histogram(buckets, sums)

    def histogram(
        self, buckets: dict[tuple[str, str], list[float]], sums: dict[tuple[str, str], float]
    ) -> Metric:
        family = HistogramMetricFamily(
            "switchyard_node_duration_seconds", "Duration of node attempts.", labels=["workflow", "node"]
        )
        bounds = [str(b) for b in counters.DURATION_BUCKETS] + ["+Inf"]
        for labels, counts in sorted(buckets.items()):
            cumulative: list[tuple[str, Any]] = []
            running = 0.0
            for bound, n in zip(bounds, counts, strict=True):
                running += n
                cumulative.append((bound, running))
            family.add_metric(list(labels), cumulative, sum_value=sums.get(labels, 0.0))
        return family


def llm_metrics(found: dict[tuple[str, str], dict[str, float]]) -> Iterator[Metric]:
    """LLM calls, tokens and cost by provider and model (usage.count_call keeps them)."""
    labels = ["provider", "model"]
    calls = CounterMetricFamily("switchyard_llm_calls", "LLM calls, by outcome.", labels=[*labels, "outcome"])
    tokens = CounterMetricFamily(
        "switchyard_llm_tokens", "LLM tokens, input and output.", labels=[*labels, "kind"]
    )
    cost = CounterMetricFamily(
        "switchyard_llm_cost",
        "Cost of priced LLM calls (the provider's price, else any provider's).",
        labels=labels,
    )
    unpriced = CounterMetricFamily(
        "switchyard_llm_unpriced_calls",
        "LLM calls with no price for their provider and model.",
        labels=labels,
    )
    for (provider, model), values in sorted(found.items()):
        calls.add_metric([provider, model, "ok"], values.get("calls", 0))
        calls.add_metric([provider, model, "error"], values.get("errors", 0))
        tokens.add_metric([provider, model, "input"], values.get("input_tokens", 0))
        tokens.add_metric([provider, model, "output"], values.get("output_tokens", 0))
        cost.add_metric([provider, model], values.get("cost", 0))
        unpriced.add_metric([provider, model], values.get("unpriced", 0))
    yield from (calls, tokens, cost, unpriced)


def budget_metrics(found: list[budgets.Figures]) -> Iterator[Metric]:
    """Each spend budget in its current window (PostgreSQL, read at scrape time)."""
    labels = ["budget", "unit", "window"]
    amount = GaugeMetricFamily(
        "switchyard_budget_amount", "A spend budget's amount per window.", labels=labels
    )
    spent = GaugeMetricFamily(
        "switchyard_budget_spent",
        "Spent in the budget's current window (all its runs or tenants).",
        labels=labels,
    )
    reserved = GaugeMetricFamily(
        "switchyard_budget_reserved", "Reserved by LLM calls in flight under the budget.", labels=labels
    )
    held = GaugeMetricFamily("switchyard_budget_held", "Node attempts the budget holds now.", labels=labels)
    for f in found:
        names = [f.budget.name, f.budget.unit, f.budget.window]
        amount.add_metric(names, float(f.budget.amount))
        spent.add_metric(names, float(f.spent))
        reserved.add_metric(names, float(f.reserved))
        held.add_metric(names, f.held)
    yield from (amount, spent, reserved, held)


def breaker_metrics(found: list[provider_health.BreakerView]) -> Iterator[Metric]:
    """Each provider/model breaker (Redis, rebuilt from PostgreSQL when lost), read at scrape time."""
    labels = ["provider", "model"]
    state = GaugeMetricFamily(
        "switchyard_llm_breaker_state",
        "A provider/model breaker: 0 closed, 1 half-open (one probe in flight), 2 open.",
        labels=labels,
    )
    held = GaugeMetricFamily(
        "switchyard_llm_breaker_held", "Node attempts held until the breaker closes.", labels=labels
    )
    for view in found:
        names = [view.state.provider, view.state.model]
        state.add_metric(names, breaker.STATE_VALUES.get(view.state.state, 0))
        held.add_metric(names, view.held_count)
    yield from (state, held)


def worker_slots(beats: dict[str, dict[str, Any]]) -> GaugeMetricFamily:
    """Each live worker's slots (runtime/slots.py), used and free, from its last heartbeat."""
    slots = GaugeMetricFamily(
        "switchyard_worker_slots",
        "I/O-bound attempts a worker runs at once on its event loop: used and free.",
        labels=["worker", "state"],
    )
    for name, beat in sorted(beats.items()):
        if beat.get("slots"):
            slots.add_metric([name, "used"], beat.get("slots_used", 0))
            slots.add_metric([name, "free"], beat.get("slots_free", 0))
    return slots
