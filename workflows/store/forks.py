"""The link from a forked run to the run it was forked from (workflows/runs/forks.py).

A fork is an ordinary run (its own nodes, attempts, history and cost) with one more row:
this one, written in the transaction that creates the run. It says which run and node it
was forked from, which nodes were carried over (their outputs copied from the origin, never
executed in the fork) and the edited input the fork point was given, if any. Both ways are
one query: `run.fork` (this row, or none) and `origin.forks`. Runs are named by their label
("workflows.Run"): models.py imports this module at its end, so this one cannot import it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class RunFork(models.Model):
    """A run started from a node of another run, the nodes above it carried over."""

    run = models.OneToOneField(
        "workflows.Run", on_delete=models.CASCADE, primary_key=True, related_name="fork"
    )
    # SET_NULL: retention may delete the origin first; the fork still says it is one.
    origin = models.ForeignKey("workflows.Run", null=True, on_delete=models.SET_NULL, related_name="forks")
    origin_number = models.BigIntegerField()  # the origin's id, kept when the origin is deleted
    node_id = models.CharField(max_length=64)  # the fork point
    carried = ArrayField(models.CharField(max_length=64), default=list)
    edited_input = models.JSONField(null=True, blank=True)
    # How its LLM and tool calls are made (core/callhash.py MODES): live, or replayed from the origin's.
    calls = models.CharField(max_length=20, default="live")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-run"]

    def __str__(self) -> str:
        return f"run {self.run_id} forked from run {self.origin_number} at {self.node_id}"
