"""Drafts change in place until published; concurrent editors never overwrite each other.

Every save names the revision it was based on; a save based on an older revision is
refused with the current one, so the editor can show the conflict and offer a reload.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from workflows.core.definition import checksum, normalise
from workflows.store.errors import Conflict
from workflows.store.models import WorkflowVersion
from workflows.versions.publish import parse


class StaleRevision(Conflict):
    """The draft changed since the editor loaded it (HTTP 412 on the API)."""

    http_status = 412

    def __init__(self, current: WorkflowVersion) -> None:
        super().__init__(
            f"Version {current.number} was changed by someone else (now revision {current.revision}); "
            "reload it and apply your change again."
        )
        self.current = current


def etag(version: WorkflowVersion) -> str:
    return f'"{version.pk}-{version.revision}"'


def update_draft(
    version_id: int, definition: Any, based_on_revision: int, comment: str | None = None
) -> WorkflowVersion:
    """Replace a draft's definition if nobody saved it since `based_on_revision`."""
    with transaction.atomic():
        version = WorkflowVersion.objects.select_for_update().select_related("workflow").get(pk=version_id)
        parse(definition, version.workflow)
        if version.is_published:
            raise Conflict(f"Version {version.number} is published and immutable: save a new draft instead.")
        if version.revision != based_on_revision:
            raise StaleRevision(version)
        version.definition, version.checksum = normalise(definition), checksum(definition)
        version.revision += 1
        if comment is not None:
            version.comment = comment
        version.save(update_fields=["definition", "checksum", "revision", "comment"])
    return version
