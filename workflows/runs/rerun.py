"""Re-run a finished run from a chosen node: that node and everything downstream of it.

Decision: in the same run, not a new one. The nodes above the chosen one keep their
outputs (checkpoint: no step is paid for twice) and the re-run nodes are given them again;
the re-run nodes start over with a fresh retry budget and no result, and their earlier
attempts stay in the run's history and trace (attempt numbers go on counting, so attempt 3
after a re-run is not mistaken for the attempt 3 before it). The run is running again at a
new epoch, as after a replay. Only a finished run (succeeded or failed) can be re-run:
a run still in flight would race its own scheduler, and a cancel is final. An open dead
letter of a re-run node is closed as replayed, naming the re-run. Audited; in the history.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from workflows.core.states import RunStatus
from workflows.runs.actions import locked_run, notify_committed
from workflows.runtime import transitions
from workflows.store import audit
from workflows.store.errors import Conflict, NotFound
from workflows.store.graphs import load_graph
from workflows.store.history import event, record_events
from workflows.store.models import DeadLetter, Run


def rerun_from_node(run_id: int, node_id: str, user: Any = None) -> list[str]:
    """Re-run `node_id` of a finished run and every node downstream of it; return those nodes."""
    with transaction.atomic():
        run = locked_run(run_id)
        graph = load_graph(run.version_id)
        if node_id not in graph.nodes:
            raise NotFound(f"Run {run_id} has no node {node_id!r}.")
        if run.status not in (RunStatus.SUCCEEDED, RunStatus.FAILED):
            raise Conflict(
                f"Run {run_id} is {run.status}; only a succeeded or failed run can be re-run from a node."
            )
        below = graph.descendants(node_id)
        nodes = [n for n in graph.order if n == node_id or n in below]
        if not transitions.rerun_nodes(run, nodes):
            raise Conflict(f"Run {run_id} changed meanwhile; reload and try again.")
        close_letters(run, nodes, user, node_id)
        by = audit.actor_label(user)
        record_events(event("run.rerun", run.pk, node_id, data={"by": by, "nodes": nodes}))
        audit.record(user, "run.rerun", run, node=node_id, nodes=nodes)
        transaction.on_commit(lambda: notify_committed([run.pk]))
    return nodes


def close_letters(run: Run, nodes: list[str], user: Any, node_id: str) -> None:
    """Close the open dead letters of the re-run nodes: the re-run replays them."""
    DeadLetter.objects.filter(run=run, node_id__in=nodes, status=DeadLetter.OPEN).update(
        status=DeadLetter.REPLAYED,
        resolved_at=timezone.now(),
        resolved_by=user if getattr(user, "is_authenticated", False) else None,
        reason=f"re-run of run {run.pk} from node {node_id}",
    )
