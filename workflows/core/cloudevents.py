"""CloudEvents 1.0: read an event in structured JSON mode, batch mode or binary HTTP mode.

Pure (standard library only), checked by hand against the spec (cloudevents/spec v1.0.2:
the core attributes, the JSON format, the HTTP protocol binding):

- required: `id`, `source`, `specversion` (only "1.0"), `type`, each a non-empty string;
  an event missing any is refused naming every missing one (`BadEvent.missing`);
- optional: `datacontenttype`, `dataschema`, `subject`, `time` (RFC 3339);
- extension attributes: lower-case letters and digits, at most 20 characters (the spec's
  rule), with string, number or boolean values;
- data: `data` (any JSON), or `data_base64` (kept as its text: a run input is JSON);
- binary mode: the attributes are `ce-` headers, Content-Type is `datacontenttype`, and the
  body is the data (parsed when the type is JSON, else kept as text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

SPECVERSION: Final = "1.0"
REQUIRED: Final = ("id", "source", "specversion", "type")
OPTIONAL: Final = ("datacontenttype", "dataschema", "subject", "time")
CONTEXT: Final = frozenset(REQUIRED + OPTIONAL)
EXTENSION_NAME: Final = re.compile(r"^[a-z0-9]{1,20}$")
STRUCTURED_TYPE: Final = "application/cloudevents+json"
BATCH_TYPE: Final = "application/cloudevents-batch+json"
# The longest value kept of each attribute (the columns of store/topics.py).
MAX_LENGTHS: Final = {
    "id": 200,
    "source": 500,
    "type": 200,
    "subject": 500,
    "datacontenttype": 200,
    "dataschema": 500,
    "specversion": 10,
}
MAX_BATCH: Final = 1000  # events in one batch request


@dataclass(frozen=True)
class CloudEvent:
    id: str
    source: str
    type: str
    subject: str = ""
    time: datetime | None = None
    datacontenttype: str = ""
    dataschema: str = ""
    data: Any = None
    extensions: Mapping[str, Any] = field(default_factory=dict)

    def as_condition_input(self) -> dict[str, Any]:
        """The event as filters and input mappings read it (`input.type`, `input.data.total`)."""
        return {
            **self.extensions,
            "id": self.id,
            "source": self.source,
            "type": self.type,
            "subject": self.subject,
            "time": self.time.isoformat() if self.time else None,
            "specversion": SPECVERSION,
            "data": self.data,
        }


class BadEvent(ValueError):
    """An event the spec refuses; `missing` names the required attributes it lacks."""

    def __init__(self, message: str, missing: tuple[str, ...] = (), where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing
        self.where = where


def is_structured(content_type: str) -> bool:
    return media_type(content_type) == STRUCTURED_TYPE


def is_batch(content_type: str) -> bool:
    return media_type(content_type) == BATCH_TYPE


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_json_type(content_type: str) -> bool:
    kind = media_type(content_type)
    return kind in {"", "application/json", "text/json"} or kind.endswith("+json")


def from_structured(obj: Any, where: str = "") -> CloudEvent:
    """Read one event in the JSON format; raise BadEvent naming what is wrong (`where`: batch index)."""
    if not isinstance(obj, Mapping):
        raise BadEvent(f"{where or 'the body'}: a CloudEvent is a JSON object.", where=where)
    missing = tuple(name for name in REQUIRED if obj.get(name) in (None, ""))
    if missing:
        raise BadEvent(missing_message(missing, where), missing, where)
    attributes = {k: v for k, v in obj.items() if k not in {"data", "data_base64"}}
    data = obj["data_base64"] if "data_base64" in obj and "data" not in obj else obj.get("data")
    return build(attributes, data, where)


def from_batch(obj: Any) -> list[CloudEvent]:
    if not isinstance(obj, list):
        raise BadEvent("the body: a CloudEvents batch is a JSON array of events.")
    if len(obj) > MAX_BATCH:
        raise BadEvent(f"the body: at most {MAX_BATCH} events in one batch, not {len(obj)}.")
    return [from_structured(item, f"[{n}]") for n, item in enumerate(obj)]


def from_binary(headers: Mapping[str, str], body: bytes, content_type: str) -> CloudEvent:
    """Read an event in binary HTTP mode: `ce-` headers (case-insensitive) and the body as data."""
    attributes: dict[str, Any] = {
        name.lower()[3:]: value for name, value in headers.items() if name.lower().startswith("ce-")
    }
    missing = tuple(name for name in REQUIRED if not attributes.get(name))
    if missing:
        raise BadEvent(missing_message(missing, "", headers=True), missing)
    if content_type:
        attributes["datacontenttype"] = content_type
    return build(attributes, binary_data(body, content_type), "")


def binary_data(body: bytes, content_type: str) -> Any:
    if not body:
        return None
    text = body.decode("utf-8", errors="replace")
    if is_json_type(content_type):
        try:
            return json.loads(text)
        except ValueError:
            raise BadEvent(f"the body is not JSON, though Content-Type says {content_type!r}.") from None
    return text


def missing_message(missing: tuple[str, ...], where: str, headers: bool = False) -> str:
    names = ", ".join(f"ce-{m}" if headers else m for m in missing)
    return f"{where + ': ' if where else ''}the CloudEvent lacks required attributes: {names}."


def build(attributes: Mapping[str, Any], data: Any, where: str) -> CloudEvent:
    prefix = f"{where}." if where else ""
    if attributes.get("specversion") != SPECVERSION:
        message = f"{prefix}specversion: only {SPECVERSION!r} is read, not {attributes.get('specversion')!r}."
        raise BadEvent(message, where=where)
    for name in (*REQUIRED, *OPTIONAL):
        value, limit = attributes.get(name), MAX_LENGTHS.get(name, 100)
        if value is not None and not (isinstance(value, str) and len(value) <= limit):
            raise BadEvent(f"{prefix}{name}: a string of at most {limit} characters.", where=where)
    extensions = {k: v for k, v in attributes.items() if k not in CONTEXT}
    for name, value in extensions.items():
        if not EXTENSION_NAME.match(name):
            message = f"{prefix}{name}: an extension attribute's name is 1-20 lower-case letters or digits."
            raise BadEvent(message, where=where)
        if not isinstance(value, str | int | float | bool) or value is None:
            raise BadEvent(
                f"{prefix}{name}: an extension attribute is a string, number or boolean.", where=where
            )
    return CloudEvent(
        id=attributes["id"],
        source=attributes["source"],
        type=attributes["type"],
        subject=attributes.get("subject") or "",
        time=parse_time(attributes.get("time"), prefix, where),
        datacontenttype=attributes.get("datacontenttype") or "",
        dataschema=attributes.get("dataschema") or "",
        data=data,
        extensions=extensions,
    )


def parse_time(value: str | None, prefix: str, where: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise BadEvent(f"{prefix}time: an RFC 3339 timestamp with its offset, not {value!r}.", where=where)
    return parsed
