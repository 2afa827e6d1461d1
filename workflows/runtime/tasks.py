"""RQ entry points: a few lines each; arguments are ids."""

from __future__ import annotations

import os
import socket

from rq import get_current_job

from workflows.runtime import execution, items, mapping, worker
from workflows.runtime.jobs import Given, Item


def run_nodes(items: list[Item], given: Given | None = None) -> int:
    """Execute a job's node attempts, given as (noderun id, attempt, version id, node id).

    `given`: what a direct job's attempts are given (jobs.claim_and_enqueue).
    """
    job = get_current_job()
    name = (job.worker_name if job else None) or f"{socket.gethostname()}.{os.getpid()}"
    worker.start_heartbeat(name)
    return execution.run_batch(items, name, given)


def run_map_items(job_items: list[mapping.JobItem]) -> int:
    """Execute a job's map items, given as (item id, attempt, version id, node id)."""
    job = get_current_job()
    name = (job.worker_name if job else None) or f"{socket.gethostname()}.{os.getpid()}"
    worker.start_heartbeat(name)
    return items.run_items(job_items, name)
