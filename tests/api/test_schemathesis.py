"""Property-based run of Schemathesis against the served OpenAPI document.

Every operation gets generated requests, valid (positive mode) and invalid (negative mode),
sent through the real Django app (WSGI, in this process, real PostgreSQL and Redis) with an
admin's key. Schemathesis' checks: no 5xx, status codes, content types, headers and bodies
as documented, invalid input refused with a 4xx. Bounded by MAX_EXAMPLES per operation and
mode so the run takes well under a minute.

Schemathesis' own pytest plugin does not work with pytest 9 yet (it reads a private
`_nodeid`), so each operation's Hypothesis strategy is driven here with `@given`.

One check is left out: `positive_data_acceptance` wants every schema-valid request to
succeed, but a schema cannot say "a cursor this API issued", "a user that exists" or "a
definition whose edges name its nodes"; those are refused with a 400/422 problem naming
the field, by design. Negative mode runs only where there is an input to make invalid.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.integration.conftest import publish
from workflows.handlers.demo import DEMO_PROFILE
from workflows.runtime import bus

MAX_EXAMPLES = 5
SCHEMA = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())
# Every request carries a valid admin key (auth has its own tests): keep it out of the data.
SCHEMA.config.generation.update(with_security_parameters=False)
OPERATIONS = {op.label: op for op in (result.ok() for result in SCHEMA.get_all_operations())}
CASES = [
    (label, mode)
    for label, op in sorted(OPERATIONS.items())
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE
    or op.definition.raw.get("parameters")
    or "requestBody" in op.definition.raw
]


@pytest.fixture
def app(db: Any, settings: Any) -> Iterator[Any]:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "API_RATE_LIMIT_PER_MINUTE": 0}
    publish("demo-profile", DEMO_PROFILE)  # a workflow for generated requests to find
    bus.heartbeat(bus.scheduler_key("schemathesis"), 600)  # so readiness answers 200
    bus.beat_worker("schemathesis", 600, {})
    # The WSGI handler closes "old" connections around each request, and inside the test's
    # transaction every connection looks old; Django's own test client unhooks this too.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield get_wsgi_application()
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.mark.parametrize(("label", "mode"), CASES)
def test_the_api_keeps_its_schema(label: str, mode: GenerationMode, app: Any, key_for: Any) -> None:
    auth = {"Authorization": f"Bearer {key_for()}"}

    @given(case=OPERATIONS[label].as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def check(case: Any) -> None:
        case.call_and_validate(headers=auth, excluded_checks=[positive_data_acceptance])

    check()
