"""A draft's publish refused while a required suite has not passed on it (versions/gates.py).

"On it" means on the definition being published: the latest suite run of each suite marked
`required_to_publish` whose checksum is the draft's (a suite run of a draft keeps the draft's
checksum; any save that changes the definition needs a new suite run). It must have ended
and passed. The refusal (409) names each suite and its failing cases. Snapshots frozen for
test runs are not publishes of a draft and pass through.
"""

from __future__ import annotations

from workflows.store.errors import Conflict
from workflows.store.models import WorkflowVersion
from workflows.store.suites import Suite, SuiteRun
from workflows.versions import editing

NAMED_AT_MOST = 10


def check_publish(version: WorkflowVersion) -> None:
    """Refuse to publish `version` unless every required suite's latest run on it passed."""
    if version.is_published or editing.is_snapshot(version):
        return
    problems = [
        p
        for suite in Suite.objects.filter(workflow_id=version.workflow_id, required_to_publish=True)
        if (p := problem(suite, version)) is not None
    ]
    if problems:
        raise Conflict(
            f"Version {version.number} cannot be published: {'; '.join(problems)}. Run the suite on this "
            "draft (Test against recent runs, or POST /suites/{id}/runs) until it passes."
        )


def problem(suite: Suite, version: WorkflowVersion) -> str | None:
    last = SuiteRun.objects.filter(suite=suite, checksum=version.checksum).order_by("-id").first()
    if last is None:
        return f"required suite {suite.name!r} has not run on this draft"
    if last.passed is None:
        return f"required suite {suite.name!r} is still running on this draft (suite run {last.pk})"
    if last.passed:
        return None
    failing = list(last.cases.filter(passed=False).values_list("case_name", flat=True)[: NAMED_AT_MOST + 1])
    more = ", …" if len(failing) > NAMED_AT_MOST else ""
    return (
        f"required suite {suite.name!r} failed on this draft (suite run {last.pk}; failing cases: "
        f"{', '.join(failing[:NAMED_AT_MOST])}{more})"
    )
