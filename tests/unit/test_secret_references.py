"""Secret references in definitions (core/secretrefs.py) and redaction (store/redaction.py)."""

from __future__ import annotations

import io
import logging

import pytest

from workflows.core.secretrefs import names_used, references
from workflows.store import redaction


def test_references_name_node_field_and_path() -> None:
    definition = {
        "nodes": [
            {
                "id": "call",
                "handler": "http.request",
                "config": {
                    "url": "https://x.test/{secret.A}",
                    "headers": {"Authorization": "Bearer {secret.B}"},
                },
            },
            {"id": "ask", "handler": "llm.chat", "config": {"prompt": ["{secret.C}"]}},
        ]
    }
    found = [(r.node_id, r.path, r.name, r.is_resolved) for r in references(definition)]
    assert found == [
        ("call", "nodes[0].config.url", "A", True),
        ("call", "nodes[0].config.headers.Authorization", "B", True),
        ("ask", "nodes[1].config.prompt[0]", "C", False),
    ]
    assert names_used(definition) == {"A", "B", "C"}


@pytest.mark.parametrize("definition", [None, [], {"nodes": "x"}, {"nodes": [1, {"id": "a", "config": 3}]}])
def test_malformed_definitions_have_no_references(definition: object) -> None:
    assert references(definition) == []


def test_redaction_replaces_every_form_of_a_revealed_value() -> None:
    redaction.remember("QUOTED", 'pa"ss-wörd-1')
    text = 'raw pa"ss-wörd-1 and json "pa\\"ss-w\\u00f6rd-1"'
    assert redaction.redact(text) == 'raw [secret:QUOTED] and json "[secret:QUOTED]"'
    value = {'k pa"ss-wörd-1': ['x pa"ss-wörd-1 y', 3]}
    assert redaction.redact_value(value) == {"k [secret:QUOTED]": ["x [secret:QUOTED] y", 3]}


def test_log_lines_are_redacted() -> None:
    redaction.remember("LOGGED", "tok-5551234")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(redaction.RedactingFilter())
    log = logging.getLogger("test.redaction")
    log.addHandler(handler)
    try:
        log.warning("calling with %s", "tok-5551234")
        try:
            raise ValueError("bad tok-5551234")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    written = stream.getvalue()
    assert "tok-5551234" not in written
    assert "calling with [secret:LOGGED]" in written and "ValueError: bad [secret:LOGGED]" in written
