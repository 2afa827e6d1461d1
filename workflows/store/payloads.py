"""JSON as it goes into and comes out of the store: size-checked on the way in, parsed on the way out."""

from __future__ import annotations

import json
from typing import Any

from workflows.store.errors import Invalid


def check_json_size(value: Any, limit: int, what: str) -> str:
    """Serialise a JSON value, refusing what is not JSON or is over `limit` bytes."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Invalid(f"{what} is not valid JSON: {exc}.") from None
    if len(text.encode()) > limit:
        raise Invalid(f"{what} is {len(text.encode())} bytes; the limit is {limit} bytes.")
    return text


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
