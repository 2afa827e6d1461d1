"""The wait kinds as the editor and the validator see them: registered names with schemas.

A wait node never reaches a worker (runtime/kinds.py claims it into `waiting`); its entry
here gives the editor its docstring and the JSON schema of its config (core/waits.py), and
lets definitions name it. The functions below only run if a job is somehow made for one.
Always loaded (workflows/apps.py), whatever `HANDLER_MODULES` lists: the kinds are the engine's.
"""

from __future__ import annotations

from typing import Any

from workflows.core import waits
from workflows.core.graph import APPROVAL, EVENT, TIMER
from workflows.handlers.registry import HandlerError, NodeContext, node


def never_in_a_worker(ctx: NodeContext) -> Any:
    raise HandlerError(f"Node {ctx.node_id!r} waits; it never runs in a worker.")


@node(APPROVAL, config_schema=waits.APPROVAL_SCHEMA)
def human_approval(ctx: NodeContext) -> Any:
    """Wait for a person to approve or reject, with a form, an SLA and escalation.

    The decision (approved or rejected, who, when, the form's fields, the comment, the
    edited data and what was edited) is the node's output: branch on it with edge
    conditions such as `output.decision == "approved"`.
    """
    return never_in_a_worker(ctx)


@node(EVENT, config_schema=waits.EVENT_SCHEMA)
def wait_event(ctx: NodeContext) -> Any:
    """Wait for an event posted on a key computed from the data (e.g. input.order_id).

    The event's payload is the node's output. An event posted before the node waits is
    kept for the retention time and consumed when it does.
    """
    return never_in_a_worker(ctx)


@node(TIMER, config_schema=waits.TIMER_SCHEMA)
def wait_timer(ctx: NodeContext) -> Any:
    """Wait for a duration, or until a time computed from the data, without holding a worker."""
    return never_in_a_worker(ctx)
