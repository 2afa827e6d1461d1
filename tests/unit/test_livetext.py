"""What the broadcaster sends of a streamed text: new pieces, and the whole text now and then."""

from __future__ import annotations

from monitoring.services.livetext import TAIL_CHARS, WHOLE_EVERY_SECONDS, Text
from workflows.llm.streams import SoFar


def text(body: str = "") -> Text:
    return Text(run_id=1, workflow_id=2, node_id="ask", attempt=1, node_run_id=3, so_far=SoFar(body))


def test_the_first_message_is_whole_then_only_new_pieces_follow() -> None:
    t = text("Once upon")
    first = t.as_data(now=100.0)
    assert (first["whole"], first["offset"], first["text"]) == (True, 0, "Once upon")
    t.so_far.text += " a time"
    second = t.as_data(now=100.25)
    assert (second["whole"], second["offset"], second["text"]) == (False, 9, " a time")
    assert second["chars"] == len("Once upon a time")


def test_the_whole_text_is_sent_again_every_few_seconds_and_at_the_end() -> None:
    t = text("a")
    t.as_data(now=100.0)
    t.so_far.text += "b"
    assert t.as_data(now=100.0 + WHOLE_EVERY_SECONDS)["whole"], "a page that missed a piece catches up"
    t.so_far.text += "c"
    assert not t.as_data(now=100.5 + WHOLE_EVERY_SECONDS)["whole"]
    t.so_far.text += "d"
    t.so_far.end = {"output": {"content": "abcd"}}
    last = t.as_data(now=101.0 + WHOLE_EVERY_SECONDS)
    assert (last["whole"], last["done"], last["text"], last["offset"]) == (True, True, "abcd", 0)


def test_a_whole_text_longer_than_the_tail_starts_at_its_offset() -> None:
    t = text("x" * (TAIL_CHARS + 5))
    data = t.as_data(now=1.0)
    assert data["offset"] == 5 and len(data["text"]) == TAIL_CHARS


def test_pieces_laid_at_their_offsets_rebuild_the_text() -> None:
    t, rebuilt = text(), ""
    for n, word in enumerate([f"word{k}" for k in range(12)]):
        t.so_far.text += word + " "
        data = t.as_data(now=n * 0.25)
        rebuilt = rebuilt[: data["offset"]] + data["text"]
    assert rebuilt == t.so_far.text


def test_an_agent_turn_moving_on_sends_the_new_turn_whole() -> None:
    t = text("thinking")
    t.so_far.turn = {"seq": 1, "turn": 1, "state": "started"}
    t.as_data(now=1.0)
    t.so_far.text += " more"
    assert not t.as_data(now=1.25)["whole"]
    t.so_far.turn = {"seq": 1, "turn": 1, "state": "recorded"}
    assert t.as_data(now=1.5)["whole"], "the turn's new state"
    t.so_far.turn, t.so_far.turn_from = {"seq": 3, "turn": 2, "state": "started"}, len(t.so_far.text)
    t.so_far.text += "next"
    data = t.as_data(now=1.75)
    assert (data["whole"], data["offset"], data["text"], data["turn"]["turn"]) == (True, 0, "next", 2)
