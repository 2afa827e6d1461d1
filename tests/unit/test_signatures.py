"""Error signatures: what varies between occurrences of one failure is taken out."""

from __future__ import annotations

import pytest

from workflows.core.signatures import MAX_LENGTH, error_signature


@pytest.mark.parametrize(
    ("error", "signature"),
    [
        ("HTTP 503 from https://x/users/4411 after 2.5 s", "HTTP <n> from https://x/users/<n> after <n> s"),
        ("KeyError: 'user_42'", "KeyError: '…'"),
        ("lost job a1b2c3d4e5f6 at 2026-11-24T01:02:03Z", "lost job <hex> at <time>"),
        ("no row 123e4567-e89b-12d3-a456-426614174000", "no row <uuid>"),
        ("ValueError: bad\nTraceback (most recent call last):\n  line 7", "ValueError: bad"),
        ("", ""),
    ],
)
def test_signature_normalises_numbers_ids_times_and_quoted_values(error: str, signature: str) -> None:
    assert error_signature(error) == signature


def test_two_occurrences_of_one_failure_share_a_signature() -> None:
    assert error_signature("timeout after 30.1 s on run 7") == error_signature(
        "timeout after 29.9 s on run 8"
    )


def test_signature_is_bounded() -> None:
    assert len(error_signature("x" * 5000)) == MAX_LENGTH
