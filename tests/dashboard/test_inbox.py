"""The inbox pages: who sees what, filters, decisions and their refusals, escaping."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.dashboard.inbox_fixtures import waiting_approval
from workflows.store.models import NodeRun, Wait

pytestmark = pytest.mark.django_db


def test_an_operator_sees_a_waiting_approval_with_its_count_in_the_navigation(
    client_as: Any, redis_clean: None
) -> None:
    _, wait = waiting_approval()
    page = client_as("operator").get("/inbox/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'data-approval="{wait.pk}"' in html and "Refund?" in html
    assert 'data-inbox-count="1"' in html


def test_a_viewer_the_node_does_not_name_sees_nothing_to_decide_and_no_count(
    client_as: Any, redis_clean: None
) -> None:
    _, wait = waiting_approval(approvers={"roles": ["operator"]})
    page = client_as("viewer").get("/inbox/")
    html = page.content.decode()
    assert page.status_code == 200
    assert f'data-approval="{wait.pk}"' not in html and "Nothing waiting for you to decide" in html
    assert "data-inbox-count" not in html


def test_a_person_without_a_role_is_refused_the_inbox(client_as: Any) -> None:
    assert client_as(None).get("/inbox/").status_code == 403


def test_the_filters_narrow_the_list_by_workflow_node_age_and_assignee(
    client_as: Any, redis_clean: None
) -> None:
    _, refund = waiting_approval("refund", approvers={"users": ["alice"], "roles": ["operator"]})
    _, other = waiting_approval("payout")
    client = client_as("operator")

    def listed(query: str) -> set[int]:
        html = client.get(f"/inbox/?{query}", HTTP_HX_REQUEST="true").content.decode()
        return {w for w in (refund.pk, other.pk) if f'data-approval="{w}"' in html}

    assert listed("fragment=list") == {refund.pk, other.pk}
    assert listed("fragment=list&workflow=payout") == {other.pk}
    assert listed("fragment=list&node=ok") == {refund.pk, other.pk}
    assert listed("fragment=list&node=draft") == set()
    assert listed("fragment=list&assignee=alice") == {refund.pk}
    assert listed("fragment=list&age=1h") == set()
    Wait.objects.filter(pk=other.pk).update(created_at=other.created_at.replace(year=2020))
    assert listed("fragment=list&age=24h") == {other.pk}


def test_the_detail_pane_renders_the_form_from_the_schema_and_the_context(
    client_as: Any, redis_clean: None
) -> None:
    _, wait = waiting_approval()
    html = client_as("operator").get(f"/inbox/{wait.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert 'name="field.reason"' in html and 'name="field.amount_cap"' in html and 'step="1"' in html
    assert '<option value="email"' in html and 'type="checkbox" name="field.urgent"' in html
    assert 'name="data"' in html and "Sorry about A-1." in html
    assert "Check the amount against the order." in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_a_draft_containing_markup_is_shown_as_text(client_as: Any, redis_clean: None) -> None:
    draft = {"refund": {"amount": 1}, "text": "Dear customer,\n<script>alert('x')</script> <b>sorry</b>"}
    _, wait = waiting_approval(draft=draft, run_input={"note": "<img src=x onerror=alert(1)>"})
    html = client_as("operator").get(f"/inbox/{wait.pk}/").content.decode()
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>sorry" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &lt;b&gt;sorry&lt;/b&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_edit_then_approve_records_the_edits_and_the_fields(client_as: Any, redis_clean: None) -> None:
    run, wait = waiting_approval()
    client = client_as("operator")
    answer = client.post(
        f"/inbox/{wait.pk}/decide/",
        {
            "decision": "approve",
            "field.reason": "checked the order",
            "field.amount_cap": "20",
            "field.urgent": "on",
            "comment": "fine",
            "data": '{"amount": 10, "note": "Sorry about A-1."}',
        },
        HTTP_HX_REQUEST="true",
    )
    assert answer.status_code == 200, answer.content
    assert "data-done" in answer.content.decode() and answer["HX-Trigger"] == "sy:refresh-approvals"
    output = NodeRun.objects.get(run=run, node_id="ok").output
    assert output["decision"] == "approved" and output["comment"] == "fine"
    assert output["fields"] == {"reason": "checked the order", "amount_cap": 20, "urgent": True}
    assert output["edited"] == {"amount": {"from": 12, "to": 10}}


def test_a_field_failing_the_schema_is_refused_inline_naming_the_field(
    client_as: Any, redis_clean: None
) -> None:
    _, wait = waiting_approval()
    client = client_as("operator")
    short = client.post(
        f"/inbox/{wait.pk}/decide/", {"decision": "approve", "field.reason": "no"}, HTTP_HX_REQUEST="true"
    )
    assert short.status_code == 422
    html = short.content.decode()
    assert 'data-field-error="reason"' in html and "too short" in html
    assert ">no</textarea>" in html  # the form is shown again, as sent
    missing = client.post(f"/inbox/{wait.pk}/decide/", {"decision": "approve"}, HTTP_HX_REQUEST="true")
    assert missing.status_code == 422 and 'data-field-error="reason"' in missing.content.decode()
    assert "is required" in missing.content.decode()
    bad_json = client.post(
        f"/inbox/{wait.pk}/decide/",
        {"decision": "approve", "field.reason": "fine", "data": "{not json"},
        HTTP_HX_REQUEST="true",
    )
    assert bad_json.status_code == 422 and "not valid JSON" in bad_json.content.decode()
    assert Wait.objects.get(pk=wait.pk).closed_at is None


def test_deciding_twice_or_without_rights_or_past_the_deadline_is_refused_with_the_reason(
    client_as: Any, redis_clean: None
) -> None:
    _, wait = waiting_approval(approvers={"roles": ["operator"]})
    viewer = client_as("viewer").post(
        f"/inbox/{wait.pk}/decide/", {"decision": "approve"}, HTTP_HX_REQUEST="true"
    )
    assert viewer.status_code == 403 and "may not decide" in viewer.content.decode()
    operator = client_as("operator")
    ok = operator.post(f"/inbox/{wait.pk}/decide/", {"decision": "reject", "field.reason": "nope, wrong"})
    assert ok.status_code == 302
    again = operator.post(
        f"/inbox/{wait.pk}/decide/", {"decision": "approve", "field.reason": "fine"}, HTTP_HX_REQUEST="true"
    )
    assert again.status_code == 409 and "already decided" in again.content.decode()
    _, late = waiting_approval("late")
    Wait.objects.filter(pk=late.pk).update(expires_at=late.created_at)
    past = operator.post(
        f"/inbox/{late.pk}/decide/", {"decision": "approve", "field.reason": "fine"}, HTTP_HX_REQUEST="true"
    )
    assert past.status_code == 409 and "timed out" in past.content.decode()


def test_every_inbox_form_needs_its_csrf_token(role_user: Any, redis_clean: None) -> None:
    _, wait = waiting_approval(form={"type": "object"})
    client = Client(enforce_csrf_checks=True)
    client.force_login(role_user("operator"))
    assert client.post(f"/inbox/{wait.pk}/decide/", {"decision": "approve"}).status_code == 403
    assert client.post("/inbox/bulk/", {"decision": "approve", "ids": [wait.pk]}).status_code == 403
    assert Wait.objects.get(pk=wait.pk).closed_at is None


def test_bulk_approve_decides_each_selected_and_reports_the_refused(
    client_as: Any, redis_clean: None
) -> None:
    _, first = waiting_approval("one", form={"type": "object"})
    _, second = waiting_approval("two", form={"type": "object"})
    _, needs_reason = waiting_approval("three")
    answer = client_as("operator").post(
        "/inbox/bulk/",
        {"decision": "approve", "comment": "all fine", "ids": [first.pk, second.pk, needs_reason.pk]},
        follow=True,
    )
    html = answer.content.decode()
    assert "Approved 2 approvals." in html
    assert f"Approval {needs_reason.pk} (ok of run {needs_reason.run_id})" in html
    assert "&#x27;reason&#x27; is a required property" in html
    for wait in (first, second):
        output = NodeRun.objects.get(pk=wait.node_run_id).output
        assert output["approved"] is True and output["comment"] == "all fine" and output["via"] == "inbox"
    assert Wait.objects.get(pk=needs_reason.pk).closed_at is None


def test_the_overview_counts_pending_approvals_and_the_run_page_links_to_the_inbox(
    client_as: Any, redis_clean: None
) -> None:
    run, wait = waiting_approval()
    client = client_as("viewer")
    overview = client.get("/").content.decode()
    assert 'data-kpi="approvals_pending">1<' in overview and 'data-kpi="nodes_waiting">1<' in overview
    assert f'href="/inbox/{wait.pk}/"' in client.get(f"/runs/{run.pk}/").content.decode()
