"""Edge conditions: what they accept, what they refuse, how they evaluate."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.core.conditions import MAX_CONDITION_LENGTH, Condition, ConditionError, parse_condition

OUTPUT: dict[str, Any] = {
    "score": 0.7,
    "label": "positive",
    "items": [{"name": "first"}, {"name": "second"}],
    "tags": ["a", "b"],
    "flag": True,
    "empty": [],
    "none": None,
    "content-type": "json",
    "count": 3,
}
INPUT: dict[str, Any] = {"user": {"tier": "gold", "age": 41}, "threshold": 0.5}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("output.score > 0.5", True),
        ("output.score > input.threshold", True),
        ("output.score <= 0.5", False),
        ("output.score >= 0.7 and output.score < 1", True),
        ("0.5 < output.score < 0.8", True),
        ("0.5 < output.score < 0.6", False),
        ("output.label == 'positive'", True),
        ('output.label != "positive"', False),
        ('output["content-type"] == "json"', True),
        ("output.items[0].name == 'first'", True),
        ("output.items[-1]['name'] == 'second'", True),
        ("'a' in output.tags", True),
        ("'z' not in output.tags", True),
        ("'label' in output", True),
        ("'missing' not in output", True),
        ("'pos' in output.label", True),
        ("input.user.tier in ['gold', 'platinum']", True),
        ("output.flag", True),
        ("output.flag == true", True),
        ("output.flag == True", True),
        ("not output.flag", False),
        ("output.empty", False),
        ("output.none == null", True),
        ("output.none == None", True),
        ("output.empty == []", True),
        ("output.count * 2 == 6", True),
        ("output.count + 1 > 3 and output.count - 1 < 3", True),
        ("output.count / 2 == 1.5", True),
        ("-output.count == -3", True),
        ("output.score > 0.9 or input.user.age > 40", True),
        ("(output.score > 0.9 or output.flag) and not (input.user.age < 18)", True),
        ("true", True),
        ("null", False),
        ("output.label", True),
    ],
)
def test_condition_evaluates_to_the_expected_result(source: str, expected: bool) -> None:
    assert parse_condition(source).evaluate(OUTPUT, INPUT) is expected


@pytest.mark.parametrize(
    "source",
    [
        "output.missing > 1",
        "output.missing == null",
        "output.missing != 1",
        "output.missing",
        "output.items[5].name == 'x'",
        "output.items.name == 'x'",
        "output.label.upper == 'x'",
        "output.tags['a'] == 'x'",
        "output.none.deeper == 1",
        "input.nothing.at.all",
        "'a' not in output.missing",
        "output.missing.x in ['a']",
    ],
)
def test_missing_keys_and_indexes_evaluate_false(source: str) -> None:
    assert parse_condition(source).evaluate(OUTPUT, INPUT) is False


@pytest.mark.parametrize(
    "source",
    [
        "output.label > 1",
        "output.tags < 'a'",
        "1 in output.count",
        "output[[1]] == 1",
        "output.label * 2 == 'positivepositive'",
        "output.count / 0 == 1",
        "output.flag + 1 == 2",
    ],
)
def test_type_errors_evaluate_false_instead_of_raising(source: str) -> None:
    assert parse_condition(source).evaluate(OUTPUT, INPUT) is False


@pytest.mark.parametrize("output", [None, 42, "text", [1, 2], {"score": "high"}])
def test_any_output_shape_evaluates_without_raising(output: object) -> None:
    assert parse_condition("output.score > 0.5").evaluate(output, None) is False


def test_not_of_a_missing_value_is_true() -> None:
    assert parse_condition("not output.missing").evaluate(OUTPUT, INPUT) is True


def test_attribute_access_reads_keys_never_python_attributes() -> None:
    assert parse_condition("output.items").evaluate({"items": 0}, None) is False
    assert parse_condition("output.keys").evaluate({}, None) is False


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("__import__('os')", "function calls are not allowed"),
        ("output.__class__", "attribute '__class__' is not allowed"),
        ("output.a.__dict__", "attribute '__dict__' is not allowed (column 10)"),
        ("(lambda: 1)()", "function calls are not allowed"),
        ("lambda: 1", "lambdas are not allowed"),
        ("[x for x in output]", "comprehensions are not allowed"),
        ("{x for x in output}", "comprehensions are not allowed"),
        ("open('x')", "function calls are not allowed"),
        ("output.keys()", "function calls are not allowed"),
        ("os", "unknown name 'os'"),
        ("output.score > limit", "unknown name 'limit'; use output, input"),
        ("output.score > limit", "(column 16)"),
        ("output[1:2]", "slices are not allowed in conditions (column 8)"),
        ("output.x ** 2", "'**' operators are not allowed"),
        ("output.x % 2", "'%' operators are not allowed"),
        ("~output.x", "'~' operators are not allowed"),
        ("output is None", "'is' comparisons are not allowed"),
        ("1 if output else 2", "conditional expressions are not allowed"),
        ("{'a': 1}", "dict literals are not allowed"),
        ("f'{output}'", "f-strings are not allowed"),
        ("b'x'", "bytes literals are not allowed"),
        ("(y := 1)", "assignment expressions are not allowed"),
        ("output.x >", "invalid syntax (column 11)"),
        ("output.x = 1", "column"),
        ("output.x && output.y", "column"),
        ("", "condition is empty"),
        ("   ", "condition is empty"),
    ],
)
def test_unsafe_or_malformed_condition_is_rejected_naming_the_problem(source: str, fragment: str) -> None:
    with pytest.raises(ConditionError) as caught:
        parse_condition(source)
    assert fragment in str(caught.value)


def test_condition_longer_than_the_limit_is_rejected() -> None:
    source = "output.x == " + "1" * MAX_CONDITION_LENGTH
    with pytest.raises(ConditionError, match="limit is 500"):
        parse_condition(source)


def test_condition_of_exactly_the_limit_is_accepted() -> None:
    source = "output.x == '" + "a" * (MAX_CONDITION_LENGTH - 14) + "'"
    assert len(source) == MAX_CONDITION_LENGTH
    assert parse_condition(source).evaluate({"x": "a" * (MAX_CONDITION_LENGTH - 14)}, None)


def test_column_counts_characters_not_bytes() -> None:
    with pytest.raises(ConditionError, match=r"column 14\)"):
        parse_condition("'ééé' == 1 + f(2)")


def test_conditions_with_equal_source_are_equal() -> None:
    assert parse_condition("output.x > 1") == Condition("output.x > 1")
    assert parse_condition("output.x > 1") != Condition("output.x > 2")


def test_condition_error_is_a_value_error() -> None:
    assert issubclass(ConditionError, ValueError)


@pytest.mark.parametrize("source", ["-" * 499 + "1", "not " * 120 + "true", "+".join(["1"] * 200)])
def test_deeply_nested_condition_is_rejected_not_a_recursion_error(source: str) -> None:
    with pytest.raises(ConditionError, match="nested more than 64 levels"):
        parse_condition(source)


def test_moderate_nesting_is_accepted() -> None:
    assert parse_condition("output" + ".a" * 40 + " == null").evaluate({}, None) is False
    assert parse_condition("-" * 60 + "1 == 1").evaluate(None, None) is True
