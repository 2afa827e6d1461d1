"""The response cache: answers of LLM and HTTP GET calls kept for a node's `cache.ttl_s`.

One row per distinct request (its canonical hash, core/callhash.py, salted with the hashes
of the secrets resolved into it: no secret is ever stored or hashed in clear): the response
as the handler recorded it (secret values redacted), the usage it cost, the run and node
that paid for it, when it expires and how often it was served. In PostgreSQL, so a Redis
flush loses no entry; expired rows are removed by a duty (workflows/llm/caching.py).
Models are named by label: models.py imports this module at its end.
"""

from __future__ import annotations

from django.db import models


class CachedResponse(models.Model):
    request_hash = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=8)  # llm | http
    response = models.JSONField()
    usage = models.JSONField(default=dict)  # llm: prompt/completion/total tokens of the paid call
    run_id = models.BigIntegerField()  # the run that paid for it (a plain id: runs are pruned)
    node_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    hits = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["expires_at"], name="cachedresponse_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.request_hash[:12]} (run {self.run_id}, until {self.expires_at})"
