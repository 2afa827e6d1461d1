"""The identity of a call (workflows/core/callhash.py): what changes the hash, and how a miss is explained."""

from __future__ import annotations

from workflows.core.callhash import differences, llm_request, request_hash, summary, tool_request

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_the_hash_ignores_key_order_and_number_spelling() -> None:
    a = llm_request("p", "m", MESSAGES, None, {"temperature": 1, "max_tokens": 5})
    b = llm_request(
        "p",
        "m",
        [dict(reversed(list(m.items()))) for m in MESSAGES],
        [],
        {"max_tokens": 5, "temperature": 1.0},
    )
    assert request_hash(a) == request_hash(b)


def test_each_part_of_a_request_changes_the_hash() -> None:
    base = llm_request("p", "m", MESSAGES, None, {})
    variants = [
        llm_request("q", "m", MESSAGES, None, {}),
        llm_request("p", "n", MESSAGES, None, {}),
        llm_request("p", "m", MESSAGES[1:], None, {}),
        llm_request("p", "m", MESSAGES, [{"type": "function"}], {}),
        llm_request("p", "m", MESSAGES, None, {"temperature": 0}),
    ]
    assert len({request_hash(v) for v in [base, *variants]}) == 6
    assert request_hash(tool_request("t", {"a": 1})) != request_hash(tool_request("t", {"a": 2}))


def test_differences_name_the_paths_of_the_summary_that_differ() -> None:
    recorded = summary(llm_request("p", "m", MESSAGES, None, {"temperature": 1}))
    wanted = summary(
        llm_request("p", "m", [{"role": "system", "content": "Be long."}, MESSAGES[1]], None, {})
    )
    assert differences(wanted, recorded) == ["$.messages[0]", "$.options.temperature"]
    assert differences(recorded, recorded) == []
