"""Approvals waiting, made in this process as a scheduler would make them (no workers)."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import publish
from workflows.runs import actions as runs
from workflows.runtime import advancing
from workflows.store.models import NodeRun, Run, Wait

FORM = {
    "type": "object",
    "required": ["reason"],
    "properties": {
        "reason": {
            "type": "string",
            "minLength": 3,
            "maxLength": 500,
            "description": "Said to the customer.",
        },
        "amount_cap": {"type": "integer", "minimum": 1, "title": "Amount cap"},
        "channel": {"enum": ["email", "chat"]},
        "urgent": {"type": "boolean"},
    },
}


def approval_definition(**config: Any) -> dict[str, Any]:
    """draft -> ok (an approval shown the draft's output, proposing its `refund`) -> after."""
    settings = {
        "title": "Refund?",
        "instructions": "Check the amount against the order.",
        "form": FORM,
        "propose": "output.refund",
        "show_upstream": ["draft"],
        **config,
    }
    return {
        "nodes": [
            {"id": "draft", "handler": "core.echo"},
            {"id": "ok", "handler": "human.approval", "config": settings},
            {"id": "after", "handler": "core.noop"},
        ],
        "edges": [{"source": "draft", "target": "ok"}, {"source": "ok", "target": "after"}],
    }


def waiting_approval(
    slug: str = "refund",
    draft: Any = None,
    run_input: dict[str, Any] | None = None,
    **config: Any,
) -> tuple[Run, Wait]:
    """A run whose draft node finished with `draft` and whose approval now waits."""
    workflow = publish(slug, approval_definition(**config))
    run, _ = runs.start_run(workflow, run_input or {"order_id": "A-1", "amount": 12})
    output = draft if draft is not None else {"refund": {"amount": 12, "note": "Sorry about A-1."}}
    # As a worker would leave it: the draft succeeded with its output; the engine goes on.
    NodeRun.objects.filter(run=run, node_id="draft").update(status="succeeded", attempt=1, output=output)
    advancing.advance_runs([run.pk])
    advancing.advance_runs([run.pk])
    return run, Wait.objects.get(run=run, node_id="ok")
