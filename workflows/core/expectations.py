"""Expectations of a suite case on a run's output, and their checks (pure).

Standard library, jsonschema and the core's JSON diff only. An expectation is a JSON object; `parse` turns it into
an `Expectation` or raises `BadExpectation` naming the field (the surfaces answer 422), and
`check` holds it against the output of a finished run, returning a `Verdict`.

    {"kind": "equals",      "value": ...}                       the whole target equals value
    {"kind": "path_equals", "path": "$.a.b[0]", "value": ...}   the value at the JSON path equals value
    {"kind": "contains",    "value": ...}                       text holds text, a list holds an item,
                                                                an object holds every key: value given
    {"kind": "schema",      "schema": {...}}                    the target matches a JSON Schema
    {"kind": "tolerance",   "value": 3.2, "tolerance": 0.1}     a number within value ± tolerance
    {"kind": "judge",       "rubric": "...", "provider", "model"}  an llm.chat call decides (see below)

Every kind takes an optional `node` (the target is that node's output; without it, the run's
final output: the outputs of its final nodes by node id, as `runs.run_output` gives) and an
optional `path` into the target. Values compare as JSON (1 and 1.0 are equal, 1 and true
are not). A JSON path is `$` followed by `.name`, `[index]` or `["name"]` steps; one that
does not parse is refused when the case is written, naming the character.

A judge is not decided here: `judge_messages` builds the chat it sends (the rubric as the
system message, the target as the user message) and `judge_verdict` reads its answer: the
first word PASS passes, anything else fails with the answer as the reason.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from workflows.core.outputdiff import Change, diff_json

KINDS = ("equals", "path_equals", "contains", "schema", "tolerance", "judge")
NAME = re.compile(r"[A-Za-z0-9_\-]+")
INDEX = re.compile(r"\[(-?\d+)\]")
QUOTED = re.compile(r"""\[(?:"((?:[^"\\]|\\.)*)"|'([^'\\]*)')\]""")
MISSING = object()
DIFFS_NAMED = 5  # differing leaves an equals failure names


class BadExpectation(ValueError):
    """An expectation that cannot be checked; `field` names what is wrong in it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Expectation:
    kind: str
    node: str | None = None
    path: str | None = None
    steps: tuple[str | int, ...] = ()
    value: Any = None
    schema: Any = None
    tolerance: float = 0.0
    rubric: str = ""
    provider: str | None = None
    model: str | None = None

    @property
    def is_judge(self) -> bool:
        return self.kind == "judge"

    def describe(self) -> str:
        """A short name for reports: `equals on node n3 at $.score`."""
        target = f"node {self.node}" if self.node else "the final output"
        at = f" at {self.path}" if self.path else ""
        return f"{self.kind} on {target}{at}"


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str  # why it failed (what was expected, what was found); "" when it passed


# --------------------------------------------------------------------------- JSON paths


def parse_path(path: str) -> tuple[str | int, ...]:
    """The steps of a JSON path (`$.a[0]["b c"]`); BadExpectation naming the character that does not parse."""
    if not isinstance(path, str) or not path.startswith("$"):
        raise BadExpectation("path", f"{path!r} is not a JSON path: it must start with $ (e.g. $.answer[0]).")
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        if path[at] == "." and (m := NAME.match(path, at + 1)):
            steps.append(m.group(0))
        elif m := INDEX.match(path, at):
            steps.append(int(m.group(1)))
        elif m := QUOTED.match(path, at):
            steps.append(json.loads(f'"{m.group(1)}"') if m.group(1) is not None else m.group(2))
        else:
            raise BadExpectation(
                "path",
                f"{path!r} does not parse at character {at + 1} ({path[at : at + 10]!r}); "
                'use .name, [index] or ["name"] steps.',
            )
        at = m.end()
    return tuple(steps)


def resolve(value: Any, steps: tuple[str | int, ...]) -> Any:
    """The value at `steps` in `value`, or MISSING."""
    for step in steps:
        value = step_into(value, step)
        if value is MISSING:
            break
    return value


def step_into(value: Any, step: str | int) -> Any:
    if isinstance(step, int):
        in_range = isinstance(value, list) and -len(value) <= step < len(value)
        return value[step] if in_range else MISSING
    return value[step] if isinstance(value, dict) and step in value else MISSING


# --------------------------------------------------------------------------- parsing


def parse(raw: Any) -> Expectation:
    """An expectation from its JSON; BadExpectation naming the field that is wrong."""
    if not isinstance(raw, dict):
        raise BadExpectation("expectation", "must be a JSON object with a kind.")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise BadExpectation("kind", f"{kind!r} is not a kind; use one of {', '.join(KINDS)}.")
    unknown = set(raw) - {
        "kind",
        "node",
        "path",
        "value",
        "schema",
        "tolerance",
        "rubric",
        "provider",
        "model",
    }
    if unknown:
        raise BadExpectation(sorted(unknown)[0], "is not a field of an expectation.")
    node = raw.get("node")
    if node is not None and (not isinstance(node, str) or not node):
        raise BadExpectation("node", "must be a node id.")
    path = raw.get("path")
    if kind == "path_equals" and path is None:
        raise BadExpectation("path", "path_equals needs a JSON path such as $.answer.")
    steps = parse_path(path) if path is not None else ()
    fields = {"kind": kind, "node": node, "path": path, "steps": steps}
    return Expectation(**fields, **kind_fields(kind, raw))


def kind_fields(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    if kind in ("equals", "path_equals", "contains") and "value" not in raw:
        raise BadExpectation("value", f"{kind} needs the value to compare with.")
    if kind == "schema":
        return {"schema": checked_schema(raw.get("schema"))}
    if kind == "tolerance":
        return {"value": number(raw, "value"), "tolerance": abs(number(raw, "tolerance"))}
    if kind == "judge":
        rubric = raw.get("rubric")
        if not isinstance(rubric, str) or not rubric.strip():
            raise BadExpectation("rubric", "a judge needs a rubric: what a passing answer must do.")
        return {
            "rubric": rubric,
            "provider": text_or_none(raw, "provider"),
            "model": text_or_none(raw, "model"),
        }
    return {"value": raw["value"]}


def checked_schema(schema: Any) -> Any:
    if not isinstance(schema, dict | bool):
        raise BadExpectation("schema", "must be a JSON Schema (an object).")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise BadExpectation("schema", f"is not a valid JSON Schema: {exc.message}") from None
    return schema


def number(raw: dict[str, Any], field: str) -> float:
    value = raw.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadExpectation(field, "must be a number.")
    return float(value)


def text_or_none(raw: dict[str, Any], field: str) -> str | None:
    value = raw.get(field)
    if value is not None and not isinstance(value, str):
        raise BadExpectation(field, "must be a string.")
    return value or None


# --------------------------------------------------------------------------- checking


def target_of(expectation: Expectation, final: dict[str, Any], nodes: dict[str, Any]) -> Any:
    """What the expectation looks at: a node's output (or the final output), then its path; MISSING if absent."""
    if expectation.node is None:
        base: Any = final
    elif expectation.node in nodes:
        base = nodes[expectation.node]
    else:
        return MISSING
    return resolve(base, expectation.steps)


def check(expectation: Expectation, final: dict[str, Any], nodes: dict[str, Any]) -> Verdict:
    """Hold a (non-judge) expectation against a run: its final output and its succeeded nodes' outputs."""
    assert not expectation.is_judge, "a judge is decided by its LLM call (judge_verdict)"
    target = target_of(expectation, final, nodes)
    if target is MISSING:
        where = (
            f"node {expectation.node!r} has no output"
            if expectation.node and expectation.node not in nodes
            else ""
        )
        where = where or f"nothing at {expectation.path}"
        return Verdict(False, f"{expectation.describe()}: {where}.")
    return CHECKS[expectation.kind](expectation, target)


def same_json(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)


def canonical(value: Any) -> str:
    def plain(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(value), sort_keys=True, separators=(",", ":"))


def short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_equals(e: Expectation, target: Any) -> Verdict:
    if same_json(target, e.value):
        return Verdict(True, "")
    if not isinstance(target, dict | list) or not isinstance(e.value, dict | list):
        return Verdict(False, f"{e.describe()}: expected {short(e.value)}, got {short(target)}.")
    diff = diff_json(e.value, target, DIFFS_NAMED)
    where = "; ".join(difference(c) for c in diff.changes) + ("; …" if diff.truncated else "")
    return Verdict(False, f"{e.describe()}: differs at {where}.")


def difference(change: Change) -> str:
    """One leaf that differs, from what was expected to what was found."""
    if change.kind == "added":
        return f"{change.path} (not expected: {short(change.after, 60)})"
    if change.kind == "removed":
        return f"{change.path} (missing; expected {short(change.before, 60)})"
    return f"{change.path} (expected {short(change.before, 60)}, got {short(change.after, 60)})"


def check_contains(e: Expectation, target: Any) -> Verdict:
    if isinstance(target, str) and isinstance(e.value, str):
        held = e.value in target
    elif isinstance(target, list):
        held = any(same_json(item, e.value) for item in target)
    elif isinstance(target, dict) and isinstance(e.value, dict):
        held = all(k in target and same_json(target[k], v) for k, v in e.value.items())
    else:
        held = False
    if held:
        return Verdict(True, "")
    return Verdict(False, f"{e.describe()}: {short(target)} does not contain {short(e.value)}.")


def check_schema(e: Expectation, target: Any) -> Verdict:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(e.schema).iter_errors(target))
    if error is None:
        return Verdict(True, "")
    at = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return Verdict(False, f"{e.describe()}: does not match the schema at {at}: {error.message}.")


def check_tolerance(e: Expectation, target: Any) -> Verdict:
    if isinstance(target, bool) or not isinstance(target, int | float):
        return Verdict(False, f"{e.describe()}: expected a number, got {short(target)}.")
    if abs(target - e.value) <= e.tolerance:
        return Verdict(True, "")
    return Verdict(False, f"{e.describe()}: expected {e.value:g} ± {e.tolerance:g}, got {target:g}.")


CHECKS = {
    "equals": check_equals,
    "path_equals": check_equals,
    "contains": check_contains,
    "schema": check_schema,
    "tolerance": check_tolerance,
}


# --------------------------------------------------------------------------- judges


def judge_messages(e: Expectation, target: Any) -> list[dict[str, str]]:
    """The chat a judge sends: the rubric, then the output it judges."""
    system = (
        f"You judge an AI workflow's output against this rubric:\n{e.rubric}\n"
        "Answer PASS or FAIL as the first word, then one sentence saying why."
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": json.dumps(target, sort_keys=True)},
    ]


def judge_verdict(e: Expectation, answer: str) -> Verdict:
    """Read a judge's answer: its first word PASS passes."""
    words = answer.strip().split(maxsplit=1)
    if words and words[0].strip(".:,!").upper() == "PASS":
        return Verdict(True, "")
    return Verdict(False, f"{e.describe()} (judge): {answer.strip()[:300] or 'no answer'}")
