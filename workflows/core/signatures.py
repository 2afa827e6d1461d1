"""The signature of an error: its text with what varies between occurrences taken out.

Pure: standard library only. Dead letters are grouped by (workflow, node, signature), so
"HTTP 503 from https://x/users/4411 after 2.5 s" and the same failure for user 4412 fall
in one group. Computed once, when the letter is filed, and stored on it.
"""

from __future__ import annotations

import re

MAX_LENGTH = 200
# Order matters: the wide shapes (uuids, hex ids) go before plain numbers eat their digits.
PATTERNS = (
    (
        re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
        "<uuid>",
    ),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"(?<![A-Za-z])[-+]?\d+(\.\d+)?(?![A-Za-z])"), "<n>"),
    (re.compile(r"'[^']{0,80}'"), "'…'"),
    (re.compile(r'"[^"]{0,80}"'), '"…"'),
    (re.compile(r"\s+"), " "),
)


def error_signature(error: str) -> str:
    """Return the first line of `error` with numbers, ids, times and quoted values normalised."""
    first = next((line for line in error.splitlines() if line.strip()), "")
    for pattern, replacement in PATTERNS:
        first = pattern.sub(replacement, first)
    return first.strip()[:MAX_LENGTH]
