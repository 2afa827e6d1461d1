"""Regression suites: create and read suites, add cases (by hand, from runs, JSONL), run one, read a run."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpResponse
from ninja import Path, Router, Status

from workflows.api import inputs as i, inputs_suites as si, serializers_suites as ss
from workflows.api.auth import ApiRequest, allowed, authorize_actor
from workflows.api.parsing import MAX_ID
from workflows.api.schema import refuses
from workflows.runs.search import RunSearch
from workflows.store.models import Workflow
from workflows.store.suites import Suite
from workflows.suites import building, recent, reports, running
from workflows.versions import publish as versions

router = Router(tags=["suites"])
SlugPath = Annotated[str, Path(pattern=i.SLUG_PATTERN)]
SuiteId = Annotated[int, Path(ge=1, le=MAX_ID)]
MANAGE = allowed("manage_suites")


@router.get(
    "/workflows/{slug:slug}/suites", response=list[ss.SuiteOut], auth=allowed("view"), summary="List suites"
)
@refuses(404)
def list_suites(request: ApiRequest, slug: SlugPath) -> Any:
    """The workflow's regression suites, each with its case count and its latest suite run."""
    workflow = versions.get_workflow(slug)
    return [ss.suite_out(s) for s in workflow.suites.select_related("workflow")]


@router.post(
    "/workflows/{slug:slug}/suites", response={201: ss.SuiteDetail}, auth=MANAGE, summary="Create a suite"
)
@refuses(404, 409)
def create_suite(request: ApiRequest, response: HttpResponse, slug: SlugPath, body: si.SuiteIn) -> Any:
    """Create a suite with its cases: given ones, then built from runs (`from_runs`: picked ids, or the last
    N succeeded runs a runs-page filter finds; each becomes a case of its input, the run as origin, and
    its final output expected equal). All or nothing: a bad case is a 422 naming it and its field (a JSON
    path that does not parse names the character), a taken name a 409."""
    workflow = versions.get_workflow(slug)
    cases = [c.case() for c in body.cases]
    if body.from_runs is not None:
        cases += [building.case_of_run(r) for r in chosen_runs(workflow, body.from_runs)]
    suite = building.create_suite(
        workflow, body.name, body.description, body.required_to_publish, cases, user=request.auth
    )
    response["Location"] = f"/api/v1/suites/{suite.pk}"
    return Status(201, ss.suite_detail(suite))


def chosen_runs(workflow: Workflow, body: si.FromRunsIn) -> list[Any]:
    if body.runs is not None:
        return building.picked_runs(workflow, list(body.runs))
    search = RunSearch(
        status=body.status,
        version=body.version,
        input=body.input or {},
        created_after=body.created_after,
        created_before=body.created_before,
    )
    return building.recent_runs(workflow, body.last or 20, search)


@router.get("/suites/{id:suite_id}", response=ss.SuiteDetail, auth=allowed("view"), summary="Read a suite")
@refuses(404)
def get_suite(request: ApiRequest, suite_id: SuiteId) -> Any:
    """A suite with every case (input, origin run, expectations) and its latest suite run."""
    return ss.suite_detail(building.get_suite_by_id(suite_id))


@router.patch("/suites/{id:suite_id}", response=ss.SuiteOut, auth=MANAGE, summary="Change a suite")
@refuses(404)
def update_suite(request: ApiRequest, suite_id: SuiteId, body: si.SuitePatch) -> Any:
    """Mark the suite required to publish (a draft's publish is then refused unless it passed on it), or not."""
    suite = building.set_required(building.get_suite_by_id(suite_id), body.required_to_publish, request.auth)
    return ss.suite_out(suite)


@router.post(
    "/suites/{id:suite_id}/cases", response={201: list[ss.CaseOut]}, auth=MANAGE, summary="Add cases"
)
@refuses(404)
def add_cases(request: ApiRequest, response: HttpResponse, suite_id: SuiteId, body: si.CasesIn) -> Any:
    """Add cases, all or none: a bad one is a 422 naming `cases[i]` and its field."""
    suite = located(response, suite_id)
    return Status(201, [ss.case_out(c) for c in building.add_cases(suite, [c.case() for c in body.cases])])


def located(response: HttpResponse, suite_id: int) -> Suite:
    """The suite, its URL as the Location of the cases added to it."""
    suite = building.get_suite_by_id(suite_id)
    response["Location"] = f"/api/v1/suites/{suite.pk}"
    return suite


@router.post(
    "/suites/{id:suite_id}/cases/from-runs",
    response={201: list[ss.CaseOut]},
    auth=MANAGE,
    summary="Add cases from runs",
)
@refuses(404)
def add_cases_from_runs(
    request: ApiRequest, response: HttpResponse, suite_id: SuiteId, body: si.FromRunsIn
) -> Any:
    """Add a case per run: picked `runs`, or the `last` N succeeded runs a runs-page filter finds."""
    suite = located(response, suite_id)
    made = building.add_runs(suite, chosen_runs(suite.workflow, body), request.auth)
    return Status(201, [ss.case_out(c) for c in made])


@router.post(
    "/suites/{id:suite_id}/cases/upload",
    response={201: list[ss.CaseOut]},
    auth=MANAGE,
    summary="Upload cases",
)
@refuses(404)
def upload_cases(request: ApiRequest, response: HttpResponse, suite_id: SuiteId, body: si.UploadIn) -> Any:
    """Add the cases of a JSONL text, one case a line; a malformed line is a 422 naming its number, and
    nothing is added."""
    suite = located(response, suite_id)
    return Status(201, [ss.case_out(c) for c in building.upload(suite, body.jsonl, request.auth)])


@router.post(
    "/suites/{id:suite_id}/runs",
    response={201: ss.SuiteRunOut},
    auth=allowed("run_suite"),
    summary="Run a suite",
)
@refuses(404)
def start_suite_run(
    request: ApiRequest, response: HttpResponse, suite_id: SuiteId, body: si.SuiteRunIn
) -> Any:
    """Start every case as an ordinary run (lowest priority, counted against budgets) of a version, or of a
    draft (frozen first into a test-run snapshot: that needs the editor role, the `edit` scope for a key);
    cases with an origin replay its recorded calls in `mode`. A case whose input fails the version's input
    schema is a 422 naming the case and the field, and nothing starts. Poll the answer's `url` until its
    `state` is passed or failed."""
    suite = building.get_suite_by_id(suite_id)
    target = running.target_version(suite, body.version, body.draft)
    if not target.is_published:
        authorize_actor(request, "publish")
    suite_run = running.start_suite_run(suite, body.version, body.draft, body.mode, request.auth)
    response["Location"] = f"/api/v1/suite-runs/{suite_run.pk}"
    return Status(201, ss.suite_run_out(reports.report(suite_run.pk)))


@router.get(
    "/suites/{id:suite_id}/runs",
    response=list[ss.SuiteRunSummary],
    auth=allowed("view"),
    summary="List suite runs",
)
@refuses(404)
def list_suite_runs(request: ApiRequest, suite_id: SuiteId) -> Any:
    """The suite's newest 50 runs, newest first."""
    suite: Suite = building.get_suite_by_id(suite_id)
    return [ss.suite_run_summary(r) for r in suite.runs.select_related("version", "draft")[:50]]


@router.get(
    "/suite-runs/{id:suite_run_id}", response=ss.SuiteRunOut, auth=allowed("view"), summary="Read a suite run"
)
@refuses(404)
def get_suite_run(request: ApiRequest, suite_run_id: SuiteId) -> Any:
    """A suite run: `state` running, passed or failed; per case, its run, pass or fail with each
    expectation's verdict (a judge's marked `judge`), the nodes changed against its origin with a link
    to the comparison, and its LLM cost."""
    return ss.suite_run_out(reports.report(suite_run_id))


@router.post(
    "/workflows/{slug:slug}/suites/recent-runs",
    response={201: ss.SuiteRunOut},
    auth=allowed("run_suite"),
    summary="Test against recent runs",
)
@refuses(404)
def test_recent_runs(
    request: ApiRequest, response: HttpResponse, slug: SlugPath, body: si.RecentRunsIn
) -> Any:
    """What the editor's "Test against recent runs" does: the workflow's suite `recent runs` (made on first
    use) is given the last `last` succeeded runs as its cases (each expecting the output its run had), then
    run on version `version`, by default the newest draft (frozen first: that needs the editor role). Poll
    the answer's `url`. Mark that suite required to publish to gate publishing on it."""
    workflow = versions.get_workflow(slug)
    draft = body.version is None
    probe = Suite(workflow=workflow)
    if not running.target_version(probe, body.version, draft).is_published:
        authorize_actor(request, "publish")
    suite_run = recent.test_recent_runs(workflow, body.last, body.version, draft, body.mode, request.auth)
    response["Location"] = f"/api/v1/suite-runs/{suite_run.pk}"
    return Status(201, ss.suite_run_out(reports.report(suite_run.pk)))
