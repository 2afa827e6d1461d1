"""The expectations of a suite case: parsing (errors name the field) and checks, without Django."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core import expectations as ex

FINAL = {"end": {"score": 0.82, "tags": ["a", "b"], "text": "the answer is 42", "odd key": 1}}
NODES = {"start": {"items": [{"id": 7}]}, "end": FINAL["end"]}


def verdict(raw: dict[str, Any]) -> ex.Verdict:
    return ex.check(ex.parse(raw), FINAL, NODES)


@pytest.mark.parametrize(
    ("raw", "passed"),
    [
        ({"kind": "equals", "value": FINAL}, True),
        ({"kind": "equals", "value": {"end": {}}}, False),
        ({"kind": "equals", "node": "start", "value": {"items": [{"id": 7.0}]}}, True),
        ({"kind": "path_equals", "path": "$.end.tags[1]", "value": "b"}, True),
        ({"kind": "path_equals", "path": '$.end["odd key"]', "value": 1}, True),
        ({"kind": "path_equals", "path": "$.end.tags[-1]", "value": "a"}, False),
        ({"kind": "path_equals", "node": "start", "path": "$.items[0].id", "value": 7}, True),
        ({"kind": "path_equals", "path": "$.end.score", "value": True}, False),
        ({"kind": "contains", "path": "$.end.text", "value": "42"}, True),
        ({"kind": "contains", "path": "$.end.text", "value": "43"}, False),
        ({"kind": "contains", "path": "$.end.tags", "value": "a"}, True),
        ({"kind": "contains", "node": "end", "value": {"score": 0.82}}, True),
        ({"kind": "contains", "node": "end", "value": {"score": 0.8}}, False),
        ({"kind": "schema", "node": "end", "schema": {"type": "object", "required": ["score"]}}, True),
        ({"kind": "schema", "node": "end", "schema": {"properties": {"score": {"type": "string"}}}}, False),
        ({"kind": "tolerance", "path": "$.end.score", "value": 0.8, "tolerance": 0.05}, True),
        ({"kind": "tolerance", "path": "$.end.score", "value": 0.7, "tolerance": 0.05}, False),
        ({"kind": "tolerance", "path": "$.end.text", "value": 1, "tolerance": 1}, False),
    ],
)
def test_each_kind_passes_or_fails_as_its_target_says(raw: dict[str, Any], passed: bool) -> None:
    result = verdict(raw)
    assert result.passed is passed
    assert (result.message == "") is passed


def test_a_failure_names_the_expectation_what_was_expected_and_what_was_found() -> None:
    message = verdict({"kind": "path_equals", "path": "$.end.tags[0]", "value": "z"}).message
    assert message == 'path_equals on the final output at $.end.tags[0]: expected "z", got "a".'


def test_an_equals_failure_on_objects_names_each_differing_path() -> None:
    expected = {"end": {"score": 0.5, "tags": ["a", "b"], "gone": 1}}
    message = verdict({"kind": "equals", "value": expected}).message
    assert message.startswith("equals on the final output: differs at ")
    assert "$.end.score (expected 0.5, got 0.82)" in message
    assert "$.end.gone (missing; expected 1)" in message
    assert '$.end.text (not expected: "the answer is 42")' in message


def test_a_missing_node_or_path_fails_naming_it() -> None:
    assert "node 'nope' has no output" in verdict({"kind": "equals", "node": "nope", "value": 1}).message
    assert (
        "nothing at $.end.missing" in verdict({"kind": "equals", "path": "$.end.missing", "value": 1}).message
    )


def test_a_schema_failure_names_where_the_output_breaks_it() -> None:
    schema = {"properties": {"tags": {"items": {"enum": ["a"]}}}}
    assert "at $.tags[1]" in verdict({"kind": "schema", "node": "end", "schema": schema}).message


@pytest.mark.parametrize(
    ("path", "character"),
    [("$.a..b", 4), ("$.a[x]", 4), ("$[1", 2), ("$.a b", 4)],
)
def test_a_json_path_that_does_not_parse_is_refused_naming_the_character(path: str, character: int) -> None:
    with pytest.raises(ex.BadExpectation) as caught:
        ex.parse({"kind": "path_equals", "path": path, "value": 1})
    assert caught.value.field == "path"
    assert f"at character {character}" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("equals", "expectation"),
        ({"kind": "nearly"}, "kind"),
        ({"kind": "equals"}, "value"),
        ({"kind": "path_equals", "value": 1}, "path"),
        ({"kind": "equals", "value": 1, "extra": 2}, "extra"),
        ({"kind": "path_equals", "path": "a.b", "value": 1}, "path"),
        ({"kind": "schema", "schema": {"type": "nonsense"}}, "schema"),
        ({"kind": "tolerance", "value": "1", "tolerance": 0.1}, "value"),
        ({"kind": "tolerance", "value": 1, "tolerance": True}, "tolerance"),
        ({"kind": "judge", "rubric": " "}, "rubric"),
        ({"kind": "equals", "node": "", "value": 1}, "node"),
    ],
)
def test_a_bad_expectation_is_refused_naming_its_field(raw: Any, field: str) -> None:
    with pytest.raises(ex.BadExpectation) as caught:
        ex.parse(raw)
    assert caught.value.field == field


def test_a_judge_sends_its_rubric_and_the_target_and_passes_only_on_pass() -> None:
    judge = ex.parse({"kind": "judge", "node": "end", "path": "$.text", "rubric": "It names a number."})
    assert judge.is_judge
    messages = ex.judge_messages(judge, "the answer is 42")
    assert "It names a number." in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": '"the answer is 42"'}
    assert ex.judge_verdict(judge, "PASS. It names 42.").passed
    failed = ex.judge_verdict(judge, "FAIL: no number")
    assert not failed.passed and failed.message.endswith("(judge): FAIL: no number")
