"""What each node of a workflow is known to output: the sample the editor's checks compare
placeholders against (core/contracts.template_gaps).

A node's known output is its output in the newest of the workflow's recent runs (test runs
included: an author's test run is the freshest sample there is) in which it succeeded. Only
the last RECENT_RUNS runs are read, so a node that has not succeeded lately is unknown, and
unknown is not checked.
"""

from __future__ import annotations

from typing import Any

from workflows.core.states import NodeStatus
from workflows.store.models import NodeRun, Run, Workflow

RECENT_RUNS = 20


def known_outputs(workflow: Workflow) -> dict[str, Any]:
    """Each node id -> its output in the newest recent run of `workflow` it succeeded in."""
    recent = Run.objects.filter(workflow=workflow).order_by("-id").values("id")[:RECENT_RUNS]
    rows = (
        NodeRun.objects.filter(run_id__in=recent, status=NodeStatus.SUCCEEDED)
        .order_by("node_id", "-run_id")
        .distinct("node_id")
        .values_list("node_id", "output")
    )
    return dict(rows)
