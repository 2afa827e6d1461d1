"""RQ entry points: a few lines each; arguments are ids."""

from __future__ import annotations

import os
import socket

from rq import get_current_job

from workflows import execution, worker


def run_nodes(items: list[tuple[int, int]]) -> int:
    """Execute a job's node attempts, given as (noderun id, attempt, version id, node id)."""
    job = get_current_job()
    name = (job.worker_name if job else None) or f"{socket.gethostname()}.{os.getpid()}"
    worker.start_heartbeat(name)
    return execution.run_batch(items, name)
