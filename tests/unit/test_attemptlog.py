"""An attempt's log: logging and print captured while the handler runs, size-limited."""

from __future__ import annotations

import logging

from workflows.runtime.attemptlog import Capture, captured


def test_logging_and_print_during_the_block_are_captured_and_nothing_after() -> None:
    logger = logging.getLogger("handler.test")
    logger.setLevel(logging.INFO)
    with captured() as capture:
        logger.info("fetched %d rows", 3)
        print("plain print")
    logger.info("after the attempt")
    text = capture.text()
    assert "INFO handler.test: fetched 3 rows" in text
    assert "plain print" in text
    assert "after the attempt" not in text


def test_a_log_over_the_limit_is_cut_with_a_marker_saying_how_much() -> None:
    capture = Capture(limit=100)
    capture.write("a" * 60)
    capture.write("b" * 60)
    text = capture.text()
    assert text.startswith("a" * 60 + "b" * 40)
    assert "[log truncated: 20 more bytes dropped, limit 100 bytes]" in text


def test_multibyte_text_is_cut_on_a_character_boundary() -> None:
    capture = Capture(limit=5)
    capture.write("ééé")  # 6 bytes
    assert capture.text().startswith("éé")
