"""Provider health over the API: viewers read each breaker, operators force one open or
closed (audited, recorded in PostgreSQL), admins set a provider's limits; bad fields are
refused by name, unknown providers with 404; /metrics shows each breaker's state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client

from controlplane import access
from tests.api.conftest import Api, assert_problem
from workflows.providers_health import breaker
from workflows.runtime import bus
from workflows.store.models import AuditEntry, BreakerDecision, LLMProvider

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def acme(db: Any) -> Iterator[LLMProvider]:
    bus.client().flushdb()
    yield LLMProvider.objects.create(
        name="acme", base_url="https://llm.acme.test/v1", default_model="acme-large"
    )
    bus.client().flushdb()


def breaker_of(body: dict[str, Any], model: str = "acme-large") -> dict[str, Any]:
    (found,) = [b for b in body["breakers"] if (b["provider"], b["model"]) == ("acme", model)]
    return found


def test_an_operator_forces_a_breaker_open_then_closed_and_a_viewer_sees_it(
    api_as: Callable[..., Api],
) -> None:
    operator, viewer = api_as(access.OPERATOR, "operate"), api_as(access.VIEWER, "read")
    assert breaker_of(viewer.get("providers/health").json())["state"] == "closed"

    opened = operator.post("providers/acme/breaker", {"model": "acme-large", "state": "open", "seconds": 120})
    assert opened.status_code == 200, opened.content
    assert opened.json()["state"] == "open" and opened.json()["until"]
    seen = breaker_of(viewer.get("providers/health").json())
    assert seen["state"] == "open" and seen["decisions"][0]["decision"] == "forced_open"

    closed = operator.post("providers/acme/breaker", {"model": "acme-large", "state": "closed"})
    assert closed.status_code == 200 and closed.json()["state"] == "closed"
    decisions = list(BreakerDecision.objects.values_list("decision", flat=True))
    assert decisions == [breaker.FORCED_OPEN, breaker.FORCED_CLOSED]
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"breaker.force_open", "breaker.force_closed"} <= actions


def test_a_viewer_may_not_force_a_breaker_nor_an_operator_set_limits(api_as: Callable[..., Api]) -> None:
    body = {"model": "acme-large", "state": "open"}
    assert_problem(api_as(access.VIEWER, "read").post("providers/acme/breaker", body), 403)
    assert_problem(api_as(access.OPERATOR, "operate").put("providers/acme/limits", {"rpm_limit": 10}), 403)
    assert BreakerDecision.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({"model": "acme-large", "state": "ajar"}, ["state"]),
        ({"model": "acme-large", "state": "open", "seconds": 0}, ["seconds"]),
        ({"model": "acme-large", "state": "open", "seconds": 10**9}, ["seconds"]),
    ],
)
def test_a_bad_forced_decision_is_refused_naming_the_field(
    api: Api, body: dict[str, Any], paths: list[str]
) -> None:
    assert_problem(api.post("providers/acme/breaker", body), 422, *paths)
    assert BreakerDecision.objects.count() == 0


def test_an_unknown_provider_or_model_is_a_404(api: Api) -> None:
    assert_problem(api.post("providers/nobody/breaker", {"model": "x", "state": "open"}), 404)
    assert_problem(api.post("providers/acme/breaker", {"model": "acme-tiny", "state": "open"}), 404)
    assert_problem(api.put("providers/nobody/limits", {"rpm_limit": 10}), 404)


def test_an_admin_sets_a_providers_limits_and_bad_ones_are_refused_by_name(api: Api) -> None:
    saved = api.put("providers/acme/limits", {"rpm_limit": 600, "tpm_limit": 90_000, "breaker_failures": 3})
    assert saved.status_code == 200, saved.content
    row = LLMProvider.objects.get(name="acme")
    assert (row.rpm_limit, row.tpm_limit, row.breaker_failures) == (600, 90_000, 3)
    refused = api.put(
        "providers/acme/limits", {"rpm_limit": -5, "breaker_error_rate": 7, "breaker_failures": 0}
    )
    assert_problem(refused, 422, "rpm_limit", "breaker_failures", "breaker_error_rate")
    row.refresh_from_db()
    assert row.rpm_limit == 600


def test_metrics_show_each_breakers_state(api: Api, person: Callable[[str], Any]) -> None:
    api.post("providers/acme/breaker", {"model": "acme-large", "state": "open", "seconds": 60})
    client = Client()
    client.force_login(person(access.ADMIN))
    text = client.get("/metrics").content.decode()
    assert 'switchyard_llm_breaker_state{model="acme-large",provider="acme"} 2.0' in text
    assert 'switchyard_llm_breaker_held{model="acme-large",provider="acme"} 0.0' in text


def test_a_breaker_lost_with_redis_is_rebuilt_open_from_its_recorded_decision(api: Api) -> None:
    api.post("providers/acme/breaker", {"model": "acme-large", "state": "open", "seconds": 60})
    until = BreakerDecision.objects.get().until
    bus.client().flushdb()
    state = breaker.read("acme", "acme-large")
    assert state.state == breaker.OPEN and state.until is not None
    assert abs((state.until - until).total_seconds()) < 0.002  # Redis keeps milliseconds


def test_the_health_page_shows_each_breaker_and_its_controls_by_role(person: Callable[[str], Any]) -> None:
    client = Client()
    client.force_login(person(access.VIEWER))
    page = client.get("/providers/health/")
    assert page.status_code == 200
    assert (
        'data-breaker="acme/acme-large"' in page.content.decode()
        and "Force open" not in page.content.decode()
    )
    client.force_login(person(access.OPERATOR))
    assert "Force open" in client.get("/providers/health/").content.decode()
