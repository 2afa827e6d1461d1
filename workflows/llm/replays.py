"""Replay of recorded LLM calls (llm.chat, llm.agent turns); the recording and lookup of any call
are workflows/handlers/recordings.py (re-exported here for the agent loop's tool calls).

A replayed LLM call costs nothing and says so: its LLMCall row has a cost of 0 and a step
marked `replayed` (it is not counted in the provider's counters), and its record names the
call it was replayed from.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from workflows.handlers.recordings import (
    ReplayMiss as ReplayMiss,
    record_live as record_live,
    recorded_answer as recorded_answer,
    under,
)
from workflows.handlers.registry import NodeContext
from workflows.llm import usage
from workflows.llm.client import Completion
from workflows.llm.providers import Endpoint

# --------------------------------------------------------------------------- LLM calls


def completion_json(c: Completion) -> dict[str, Any]:
    return {
        "text": c.text,
        "tool_calls": c.tool_calls,
        "finish_reason": c.finish_reason,
        "model": c.model,
        "input_tokens": c.input_tokens,
        "output_tokens": c.output_tokens,
    }


def replayed_completion(
    ctx: NodeContext, endpoint: Endpoint, request: dict[str, Any], step: str
) -> Completion | None:
    """The recorded answer of an LLM call in a replaying fork, its LLMCall row written at no
    cost; None to call the model live."""
    found = recorded_answer(ctx, request, step)
    if found is None:
        return None
    r = found.response or {}
    completion = Completion(
        str(r.get("text") or ""),
        list(r.get("tool_calls") or []),
        r.get("finish_reason"),
        str(r.get("model") or endpoint.model),
        r.get("input_tokens"),
        r.get("output_tokens"),
        0.0,
    )
    node_run_id, _, marked = under(ctx, f"replayed {step}".strip())
    usage.record_call(
        node_run_id=node_run_id, endpoint=endpoint, completion=completion, step=marked, cost=Decimal(0)
    )
    return completion
