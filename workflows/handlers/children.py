"""The child-run kind as the editor and the validator see it: `workflow.run` with its schema.

A `workflow.run` node never reaches a worker (runtime/kinds.py claims it into `waiting` and
starts its child run, workflows/children/start.py); this entry gives the editor its docstring and
config schema (core/children.py) and lets definitions name it. Always loaded (workflows/apps.py).
"""

from __future__ import annotations

from typing import Any

from workflows.core.children import CHILD_SCHEMA
from workflows.core.graph import CHILD
from workflows.handlers.registry import HandlerError, NodeContext, node


@node(CHILD, config_schema=CHILD_SCHEMA)
def workflow_run(ctx: NodeContext) -> Any:
    """Run another workflow as a child run and wait for it, holding no worker.

    The child's output (its last node's output, or its last nodes' outputs by id) is this
    node's output; a failed or cancelled child fails this node, and a retry starts a new
    child. Cancelling this run cancels the child.
    """
    raise HandlerError(f"Node {ctx.node_id!r} waits for a child run; it never runs in a worker.")
