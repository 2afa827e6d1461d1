"""The record of calls that left the process, each with the canonical hash of its request.

One row per LLM call (llm.chat, an llm.agent turn) and per agent tool call made by an
attempt (workflows/llm/replays.py writes them): the hash (core/callhash.py), a summary of
the request (enough to say how another request differs, not the whole conversation again),
the response, and how it was answered: `live` (the callee was called), `replayed` (answered
from the record of the run a fork replays, `replayed_from`; it cost nothing) or `missing`
(a fork in `recorded` mode asked for a call its origin never made: the attempt failed).
A fork replays its origin's calls by looking them up here by (run, kind, hash).
Models are named by label: models.py imports this module at its end.
"""

from __future__ import annotations

from django.db import models


class RecordedCall(models.Model):
    LIVE, REPLAYED, MISSING = "live", "replayed", "missing"

    run = models.ForeignKey(
        "workflows.Run", on_delete=models.CASCADE, related_name="recorded_calls", db_index=False
    )
    node_run = models.ForeignKey(
        "workflows.NodeRun", on_delete=models.CASCADE, related_name="recorded_calls", db_index=False
    )
    node_id = models.CharField(max_length=64)
    attempt = models.PositiveIntegerField()
    kind = models.CharField(max_length=8)  # llm | tool
    step = models.CharField(max_length=100, blank=True)  # "turn 2", "tool search", "" for llm.chat
    request_hash = models.CharField(max_length=64)
    request = models.JSONField()  # callhash.summary
    response = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=8, default=LIVE)
    replayed_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["run", "kind", "request_hash"], name="recordedcall_lookup_idx"),
            models.Index(fields=["node_run", "id"], name="recordedcall_node_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} call {self.request_hash[:12]} of {self.run_id}:{self.node_id} ({self.outcome})"
