"""Which definitions reference which secrets, and what a save or publish is refused for.

A reference is checked where a definition is parsed (`versions/publish.parse`, used by draft
saves, publishing and activation): a secret referenced but missing is an issue naming the
node and the field (`nodes[2].config.headers.Authorization`), and so is a reference in a
field the worker does not resolve (`core/secretrefs.py`). A secret deleted after publishing
fails the node at call time instead, naming the secret.

"Which workflows use it" reads the versions' definitions as text in PostgreSQL
(`definition::text LIKE '%{secret.NAME}%'`): no index of references to keep in step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast

from workflows.core.definition import Issue
from workflows.core.secretrefs import RESOLVED_IN, references
from workflows.store.models import WorkflowVersion
from workflows.store.secrets import Secret


def secret_issues(definition: Any) -> list[Issue]:
    """The issues of a definition's secret references (none: fine)."""
    refs = references(definition)
    if not refs:
        return []
    known = set(Secret.objects.filter(name__in={r.name for r in refs}).values_list("name", flat=True))
    issues = []
    for ref in refs:
        where = f"(node '{ref.node_id}')"
        if not ref.is_resolved:
            fields = ", ".join(f"{h}'s {' / '.join(f)}" for h, f in RESOLVED_IN.items())
            message = (
                f"secret {ref.name!r} cannot be used here: secrets are resolved only in {fields} {where}"
            )
            issues.append(Issue(ref.path, message, "secret_not_allowed", ref.node_id))
        elif ref.name not in known:
            message = f"there is no secret {ref.name!r}; add it on the secrets page first {where}"
            issues.append(Issue(ref.path, message, "unknown_secret", ref.node_id))
    return issues


@dataclass(frozen=True)
class Use:
    """A workflow whose versions reference a secret: which version numbers, and whether the
    active one does."""

    slug: str
    versions: tuple[int, ...]
    active: bool


def workflows_using(name: str) -> list[Use]:
    """The workflows with a version that references `name`, by slug."""
    rows = (
        WorkflowVersion.objects.annotate(text=Cast("definition", TextField()))
        .filter(text__contains="{secret." + name + "}")
        .values_list("workflow__slug", "number", "workflow__active_version_id", "id")
        .order_by("workflow__slug", "number")
    )
    return uses_of(rows)


def uses_of(rows: Iterable[tuple[str, int, int | None, int]]) -> list[Use]:
    by_slug: dict[str, tuple[list[int], bool]] = {}
    for slug, number, active_id, version_id in rows:
        numbers, active = by_slug.setdefault(slug, ([], False))
        numbers.append(number)
        by_slug[slug] = (numbers, active or active_id == version_id)
    return [Use(slug, tuple(numbers), active) for slug, (numbers, active) in by_slug.items()]
