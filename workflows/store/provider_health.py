"""Provider breakers' decisions, as PostgreSQL keeps them (workflows/providers_health).

A breaker's live state is a small Redis hash that every worker reads and changes atomically;
each decision it takes (opened, half-opened, closed, forced) is also a row here, so that a
Redis restarted empty loses nothing that matters: a missing hash is rebuilt from the latest
row of its provider and model.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class BreakerDecision(models.Model):
    """One decision of the breaker of (provider, model): the state it left and until when."""

    provider = models.CharField(max_length=60)
    model = models.CharField(max_length=200)
    decision = models.CharField(max_length=20)  # opened, half_opened, closed, forced_open, forced_closed
    state = models.CharField(max_length=20)  # closed, open, half_open: the state after it
    until = models.DateTimeField(null=True, blank=True)  # an open breaker's end
    reason = models.TextField(blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["provider", "model", "-id"], name="breaker_latest_idx")]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model} {self.decision}"
