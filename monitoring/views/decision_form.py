"""The inbox's decision form, generated from an approval node's form schema (JSON schema).

Each top-level property becomes one input: an enum a select, a boolean a checkbox, a number
or integer a number input, a long or multi-line string a textarea, anything else (objects,
arrays) a JSON textarea. What the browser sends is converted back by type, and otherwise
left as typed: the schema check in approvals.decide then names the field that does not fit, so
the page never has a validation rule of its own that could disagree with the API's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

PREFIX = "field."  # form inputs of the schema's fields, beside decision, comment and data
LONG_TEXT = 200  # strings allowed to be longer than this get a textarea
MISSING = re.compile(r"^'([^']+)' is a required property$")


@dataclass
class Field:
    name: str
    label: str
    widget: str  # select, checkbox, number, textarea, text, json
    required: bool
    help: str = ""
    choices: list[Any] = field(default_factory=list)
    value: Any = None
    error: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def input_name(self) -> str:
        return PREFIX + self.name


def widget_of(prop: dict[str, Any]) -> str:
    kind = prop.get("type")
    if "enum" in prop:
        return "select"
    if kind == "boolean":
        return "checkbox"
    if kind in ("number", "integer"):
        return "number"
    if kind == "string":
        long = prop.get("maxLength", LONG_TEXT + 1) > LONG_TEXT or prop.get("format") == "textarea"
        return "textarea" if long else "text"
    return "json"


def fields_of(form: dict[str, Any] | None, values: dict[str, Any] | None = None) -> list[Field]:
    """The inputs of a form schema, filled with `values` (what was sent) or the defaults."""
    schema = form or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    values = values or {}
    found = []
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        widget = widget_of(prop)
        value = values.get(name, prop.get("default"))
        attrs = {k: prop[k] for k in ("minimum", "maximum", "minLength", "maxLength") if k in prop}
        if prop.get("type") == "integer":
            attrs["step"] = 1
        elif widget == "number":
            attrs["step"] = "any"
        found.append(
            Field(
                name=name,
                label=str(prop.get("title") or name.replace("_", " ").capitalize()),
                widget=widget,
                required=name in required,
                help=str(prop.get("description", "")),
                choices=list(prop.get("enum", [])),
                value=json.dumps(value, indent=2) if widget == "json" and value is not None else value,
                attrs=attrs,
            )
        )
    return found


def parse_fields(form: dict[str, Any] | None, post: QueryDict) -> dict[str, Any]:
    """The decision's fields from a POST, converted by the schema's types where they parse."""
    props = (form or {}).get("properties") or {}
    fields: dict[str, Any] = {}
    for name, prop in props.items():
        prop = prop if isinstance(prop, dict) else {}
        key = PREFIX + name
        if widget_of(prop) == "checkbox":
            fields[name] = key in post
            continue
        raw = post.get(key, "")
        if raw.strip() == "":
            continue  # left empty: absent, so a required field is reported missing by name
        fields[name] = convert(prop, raw)
    return fields


def convert(prop: dict[str, Any], raw: str) -> Any:
    kind = prop.get("type")
    if "enum" in prop:
        return next((choice for choice in prop["enum"] if str(choice) == raw), raw)
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
        if kind not in ("string", None):
            return json.loads(raw)
    except ValueError:
        return raw  # the schema check names the field and says what type it wants
    return raw


def field_errors(issues: list[Any]) -> dict[str, str]:
    """Map a refusal's issues (paths like fields.amount) to the form's field names."""
    errors: dict[str, str] = {}
    for issue in issues:
        path = str(getattr(issue, "path", "") or "")
        message = str(getattr(issue, "message", ""))
        name = path.removeprefix("fields.").split(".")[0] if path.startswith("fields.") else ""
        missing = MISSING.match(message) if path == "fields" else None
        if missing:  # jsonschema files a missing property under its parent
            name, message = missing.group(1), "is required"
        errors.setdefault(name or path, message)
    return errors
