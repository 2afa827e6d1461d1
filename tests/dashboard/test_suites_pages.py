"""The suites pages (workflows/pages/views_suites.py): behind the same role checks as the API, every
refusal a 4xx with its message beside the form. Rows are made directly (no workers): running
cases end to end is tests/integration/test_suites.py and the browser test."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.integration.conftest import node, publish
from workflows.runs import actions as runs
from workflows.store.models import NodeRun, Run
from workflows.store.suites import Suite, SuiteCase, SuiteRun
from workflows.suites import building
from workflows.versions import publish as versions

pytestmark = pytest.mark.django_db
CHAIN = {"nodes": [node("a"), node("b")], "edges": [{"source": "a", "target": "b"}]}


@pytest.fixture
def chain(redis_clean: None) -> Any:
    workflow = publish("chain", CHAIN)
    for n in range(3):
        run, _ = runs.start_run(workflow, {"n": n})
        NodeRun.objects.filter(run=run).update(status="succeeded", attempt=1, output={"n": n})
        Run.objects.filter(pk=run.pk).update(status="succeeded")
    return workflow


def test_an_editor_creates_a_suite_from_the_last_runs_and_a_viewer_may_only_look(
    client_as: Any, chain: Any
) -> None:
    editor, viewer = client_as("editor"), client_as("viewer")
    answer = editor.post("/workflows/chain/suites/", {"name": "recent", "last": "2"})
    suite = Suite.objects.get(name="recent")
    assert answer.status_code == 302 and answer["Location"] == f"/workflows/chain/suites/{suite.pk}/"
    assert suite.cases.count() == 2
    page = viewer.get("/workflows/chain/suites/")
    assert page.status_code == 200 and b"recent" in page.content and b"create-suite" not in page.content
    assert viewer.post("/workflows/chain/suites/", {"name": "mine"}).status_code == 403
    assert viewer.post(f"/workflows/chain/suites/{suite.pk}/runs/", {"target": "active"}).status_code == 403
    assert Suite.objects.count() == 1


def test_a_taken_name_is_refused_with_its_message_beside_the_form(client_as: Any, chain: Any) -> None:
    editor = client_as("editor")
    editor.post("/workflows/chain/suites/", {"name": "recent", "last": "0"})
    answer = editor.post("/workflows/chain/suites/", {"name": "recent", "last": "1"})
    assert answer.status_code == 409
    assert b"already has a suite" in answer.content and b'id="suite-error"' in answer.content


def test_a_malformed_upload_names_its_line_and_adds_nothing(client_as: Any, chain: Any) -> None:
    suite = building.create_suite(chain, "upload")
    upload = SimpleUploadedFile("cases.jsonl", b'{"input": {"n": 1}}\n{"input": \n')
    answer = client_as("editor").post(f"/workflows/chain/suites/{suite.pk}/cases/", {"jsonl": upload})
    assert answer.status_code == 422 and b"line 2: not JSON" in answer.content
    assert not SuiteCase.objects.exists()


def test_an_operator_runs_a_suite_on_the_active_version_but_not_on_a_draft(
    client_as: Any, chain: Any
) -> None:
    suite = building.create_suite(chain, "ops", cases=[building.CaseIn({"n": 1})])
    operator = client_as("operator")
    answer = operator.post(
        f"/workflows/chain/suites/{suite.pk}/runs/", {"target": "active", "mode": "recorded"}
    )
    suite_run = SuiteRun.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/suite-runs/{suite_run.pk}/"
    report = operator.get(answer["Location"])
    assert report.status_code == 200 and b'data-state="running"' in report.content
    assert b"every 2s" in report.content  # it polls while its cases run
    versions.create_version(chain, CHAIN)
    refused = operator.post(f"/workflows/chain/suites/{suite.pk}/runs/", {"target": "draft"})
    assert refused.status_code == 403 and b"needs the editor role" in refused.content
    assert SuiteRun.objects.count() == 1
