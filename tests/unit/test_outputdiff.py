"""Differences between two outputs (workflows/core/outputdiff.py)."""

from __future__ import annotations

from workflows.core.outputdiff import diff_json, diff_text


def test_equal_outputs_have_no_changes() -> None:
    assert diff_json({"a": [1, {"b": 2.0}]}, {"a": [1, {"b": 2}]}).is_same


def test_each_differing_leaf_is_listed_at_its_path_in_document_order() -> None:
    before = {"name": "ana", "tags": ["x", "y"], "deep": {"n": 1, "gone": True}}
    after = {"name": "bo", "tags": ["x"], "deep": {"n": 1, "new": None}}
    found = [(c.path, c.kind, c.before, c.after) for c in diff_json(before, after).changes]
    assert found == [
        ("$.name", "changed", "ana", "bo"),
        ("$.tags[1]", "removed", "y", None),
        ("$.deep.gone", "removed", True, None),
        ("$.deep.new", "added", None, None),
    ]


def test_a_key_that_is_no_identifier_is_quoted_in_the_path() -> None:
    assert [c.path for c in diff_json({"a.b": 1}, {"a.b": 2}).changes] == ['$["a.b"]']


def test_a_boolean_is_not_a_number_and_a_type_change_is_a_change() -> None:
    assert [c.path for c in diff_json({"a": 1, "b": "1"}, {"a": True, "b": 1}).changes] == ["$.a", "$.b"]
    assert [c.kind for c in diff_json(None, {"a": 1}).changes] == ["changed"]


def test_the_list_of_changes_is_cut_at_the_limit_and_says_so() -> None:
    diff = diff_json(list(range(50)), list(range(1, 51)), limit=10)
    assert len(diff.changes) == 10 and diff.truncated


def test_a_deeply_nested_output_does_not_exhaust_the_stack() -> None:
    a: dict[str, object] = {}
    b: dict[str, object] = {}
    x, y = a, b
    for _ in range(5000):
        x["k"], y["k"] = {}, {}
        x, y = x["k"], y["k"]  # type: ignore[assignment]  # walking down the nested dicts just built
    y["leaf"] = 1
    assert [c.kind for c in diff_json(a, b).changes] == ["added"]


def test_text_diff_keeps_common_words_and_marks_the_others() -> None:
    assert diff_text("the red train is late", "the blue train is late") == [
        ("equal", "the "),
        ("delete", "red"),
        ("insert", "blue"),
        ("equal", " train is late"),
    ]
    assert "".join(t for op, t in diff_text("a b", "a b c") if op != "delete") == "a b c"
