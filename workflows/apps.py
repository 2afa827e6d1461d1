from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class WorkflowsConfig(AppConfig):
    name = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import controlplane.checks  # noqa: F401  (registers the checks)
        from workflows.handlers import load_handler_modules

        load_handler_modules(
            [
                "workflows.handlers.waits",
                "workflows.llm.handler",
                "workflows.events.handler",
                "workflows.handlers.agent",
                "workflows.handlers.children",
                *settings.SWITCHYARD["HANDLER_MODULES"],
            ]
        )
        wire_runtime()
        wire_provider_kinds()
        from workflows.integrations import keycache

        keycache.watch_changes()
        from workflows.budgets import ledger
        from workflows.llm import providers

        providers.watch_changes()
        ledger.watch_changes()


def wire_runtime() -> None:
    """Plug the domain's node kinds, periodic duties and call gates into the runtime's seams."""
    from workflows.agents.kind import AgentLoop
    from workflows.budgets import holds as budget_holds, ledger as budget_ledger
    from workflows.budgets.gate import BudgetGate
    from workflows.children.kind import ChildRunKind
    from workflows.core.graph import WAIT_KINDS
    from workflows.handlers import caching
    from workflows.integrations import webhooks
    from workflows.mcp import catalog as mcp_catalog
    from workflows.operations import retention
    from workflows.providers_health import holds as provider_holds
    from workflows.providers_health.gate import ProviderGate
    from workflows.runs import startkeys
    from workflows.runtime import admission, duties, kinds
    from workflows.schedules import timetable
    from workflows.suites import evaluation as suite_evaluation, gate as suite_gate
    from workflows.versions import gates
    from workflows.waits import waiting
    from workflows.waits.kind import Waiting

    domain_kinds: tuple[kinds.NodeKind, ...] = (
        AgentLoop(),
        ChildRunKind(),
        *(Waiting(name) for name in WAIT_KINDS),
    )
    for kind in domain_kinds:
        kinds.register(kind)
    duties.register(duties.Duty("wait deadlines", waiting.DEADLINE_SECONDS, waiting.fire_deadlines))
    duties.register(duties.Duty("schedules", timetable.FIRE_SECONDS, timetable.fire_due))
    duties.register(duties.Duty("retention", retention.PRUNE_EVERY_SECONDS, retention.prune_and_report))
    duties.register(duties.Duty("webhooks", 0.0, webhooks.dispatch_round, exclusive=True))
    duties.register(duties.Duty("budget holds", budget_holds.OFFER_SECONDS, budget_holds.offer_held))
    duties.register(
        duties.Duty("deferred starts", startkeys.DEFERRED_SECONDS, startkeys.start_deferred, exclusive=True)
    )
    duties.register(duties.Duty("response cache expiry", caching.PRUNE_EVERY_SECONDS, caching.prune_expired))
    duties.register(duties.Duty("lost reservations", 5.0, budget_ledger.settle_lost, exclusive=True))
    duties.register(
        duties.Duty(
            "suite runs", suite_evaluation.EVERY_SECONDS, suite_evaluation.evaluate_ended, exclusive=True
        )
    )
    duties.register(
        duties.Duty(
            "MCP tool lists", mcp_catalog.STALE_CHECK_SECONDS, mcp_catalog.start_refresh, exclusive=True
        )
    )
    gates.register("required suites", suite_gate.check_publish)
    duties.register(duties.Duty("provider holds", provider_holds.OFFER_SECONDS, provider_holds.offer_held))
    if not any(isinstance(gate, BudgetGate) for gate in admission.GATES):
        admission.register(BudgetGate())
    if not any(isinstance(gate, ProviderGate) for gate in admission.GATES):
        # After the budgets: a call a budget holds never takes a probe or a place in a rate.
        provider_gate = ProviderGate()
        admission.register(provider_gate)
        admission.register_recheck(provider_gate)


def wire_provider_kinds() -> None:
    """Plug the LLM provider kinds other than OpenAI-compatible into `client.complete`."""
    from typing import cast

    from workflows.llm import anthropic_messages, client
    from workflows.store.models import LLMProvider

    client.register_kind(LLMProvider.ANTHROPIC, cast(client.KindCalls, anthropic_messages))
