"""The demo workflows: their handlers (deterministic, no network) and their definitions.

Every value is derived from the run input's `user_id` through `zlib.crc32`, never Python's
per-process randomized `hash()`, so any worker on any host computes the same output.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from workflows.handlers.registry import HandlerError, NodeContext, Tool, node

DEFAULT_USER_ID = "u-1"
NO_CONFIG: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

FIRST_NAMES = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim"]
LAST_NAMES = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman"]
LOCATIONS = [
    ("Lisbon", "PT", "Europe/Lisbon"),
    ("Berlin", "DE", "Europe/Berlin"),
    ("Nairobi", "KE", "Africa/Nairobi"),
    ("Toronto", "CA", "America/Toronto"),
    ("Sao Paulo", "BR", "America/Sao_Paulo"),
    ("Tokyo", "JP", "Asia/Tokyo"),
    ("Bangalore", "IN", "Asia/Kolkata"),
    ("Melbourne", "AU", "Australia/Melbourne"),
]
CATALOG = {
    "positive": ["premium-upgrade", "annual-plan", "referral-bonus", "beta-access", "team-seats"],
    "neutral": ["feature-tour", "weekly-digest", "template-pack", "webinar-invite", "tips-series"],
    "negative": ["support-call", "discount-20", "feedback-survey", "onboarding-redo", "pause-plan"],
}


def stable_hash(*parts: str) -> int:
    """Return a hash of the parts that is the same in every process."""
    return zlib.crc32(":".join(parts).encode())


def user_id_of(ctx: NodeContext) -> str:
    """Return the run input's user_id as text, or the default when it is missing."""
    value = ctx.input.get("user_id") if isinstance(ctx.input, dict) else None
    return DEFAULT_USER_ID if value in (None, "") else str(value)


def upstream_of(ctx: NodeContext, node_id: str) -> dict[str, Any]:
    """Return a predecessor's output; HandlerError naming it when it is absent."""
    output = ctx.upstream.get(node_id)
    if not isinstance(output, dict):
        raise HandlerError(f"Node {ctx.node_id!r} needs the output of {node_id!r}, which is missing.")
    return output


@node("demo.fetch_profile", config_schema=NO_CONFIG, batchable=True)
def fetch_profile(ctx: NodeContext) -> dict[str, Any]:
    """Look up a user's profile (name, email, account age) by the input's user_id."""
    user_id = user_id_of(ctx)
    h = stable_hash("profile", user_id)
    first, last = FIRST_NAMES[h % len(FIRST_NAMES)], LAST_NAMES[(h // 16) % len(LAST_NAMES)]
    return {
        "user_id": user_id,
        "name": f"{first} {last}",
        "email": f"{first.lower()}.{last.lower()}@example.com",
        "signup_days": h % 1500,
    }


@node("demo.enrich_location", config_schema=NO_CONFIG, batchable=True)
def enrich_location(ctx: NodeContext) -> dict[str, Any]:
    """Find the user's city, country and time zone by the input's user_id."""
    user_id = user_id_of(ctx)
    city, country, tz = LOCATIONS[stable_hash("location", user_id) % len(LOCATIONS)]
    return {"user_id": user_id, "city": city, "country": country, "timezone": tz}


@node("demo.sentiment_analysis", config_schema=NO_CONFIG, batchable=True)
def sentiment_analysis(ctx: NodeContext) -> dict[str, Any]:
    """Score the user's recent feedback from -1 (negative) to 1 (positive); needs fetch_profile."""
    profile = upstream_of(ctx, "fetch_profile")
    user_id = str(profile.get("user_id", DEFAULT_USER_ID))
    score = round((stable_hash("sentiment", user_id) % 2001 - 1000) / 1000, 3)
    return {"user_id": user_id, "sentiment": score, "label": sentiment_label(score)}


def sentiment_label(score: float) -> str:
    """Name a sentiment score: positive above 0.2, negative below -0.2, else neutral."""
    if score > 0.2:
        return "positive"
    return "negative" if score < -0.2 else "neutral"


@node("demo.recommendation_engine", config_schema=NO_CONFIG, batchable=True)
def recommendation_engine(ctx: NodeContext) -> dict[str, Any]:
    """Pick three offers for the user from their profile, location and sentiment."""
    profile = upstream_of(ctx, "fetch_profile")
    location = upstream_of(ctx, "enrich_location")
    mood = upstream_of(ctx, "sentiment_analysis")
    user_id = str(profile.get("user_id", DEFAULT_USER_ID))
    label: str = mood["label"] if mood.get("label") in CATALOG else "neutral"
    items = pick_items(CATALOG[label], stable_hash("items", user_id), 3)
    reason = (
        f"{label} sentiment, {profile.get('signup_days', 0)} days a customer, in {location.get('city', '?')}"
    )
    return {"user_id": user_id, "items": items, "reason": reason, "inputs": sorted(ctx.upstream)}


def pick_items(catalog: list[str], seed: int, count: int) -> list[str]:
    """Return `count` distinct catalog entries, rotated by `seed`."""
    start = seed % len(catalog)
    return [catalog[(start + i) % len(catalog)] for i in range(count)]


# --- definitions ----------------------------------------------------------------------------


def _node(node_id: str, handler: str, **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "handler": handler, "config": {}, "queue": "default", **fields}


def _edge(source: str, target: str) -> dict[str, str]:
    return {"source": source, "target": target}


def _profile_node(node_id: str) -> dict[str, Any]:
    retry = {"max_attempts": 3, "backoff_seconds": 0.2, "backoff_max_seconds": 5, "jitter": 0.1}
    return _node(node_id, f"demo.{node_id}", retry=retry, timeout_seconds=30)


# Every demo declares its input schema (the start dialog's typed form; a start that breaks it
# is refused with 422 naming the field). A field a node's template names is required.
NO_INPUT: dict[str, Any] = {
    "type": "object",
    "description": "Nothing is read from the input; any object is accepted.",
    "properties": {},
}
ORDER_ID: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Z]-[0-9]{1,6}$",
    "description": "The order, as a capital letter, a dash and digits: A-1001.",
}
USER_ID: dict[str, Any] = {"type": "string", "minLength": 1, "description": "Whose profile, as u-<number>."}

DEMO_PROFILE: dict[str, Any] = {
    "description": (
        "Enrich a user profile: fetch the profile and the location in parallel, analyse "
        'sentiment, then recommend offers from all three. Input: {"user_id": "u-42"}.'
    ),
    # Optional: without it the profile is the default user's. An agent calling this workflow
    # as a tool is offered this schema (demo-agent-workflow passes the user it was asked about).
    "input_schema": {
        "type": "object",
        "properties": {"user_id": USER_ID},
    },
    "nodes": [
        _profile_node("fetch_profile"),
        _profile_node("enrich_location"),
        _profile_node("sentiment_analysis"),
        _profile_node("recommendation_engine"),
    ],
    "edges": [
        _edge("fetch_profile", "sentiment_analysis"),
        _edge("fetch_profile", "recommendation_engine"),
        _edge("enrich_location", "recommendation_engine"),
        _edge("sentiment_analysis", "recommendation_engine"),
    ],
}

DEMO_RETRIES: dict[str, Any] = {
    "description": (
        "Retries and dead letters: flaky_call succeeds on its third attempt, always_fails "
        "exhausts its retries and becomes a dead letter, report runs after both (all_done)."
    ),
    "input_schema": NO_INPUT,
    "nodes": [
        _node("prepare", "core.echo", timeout_seconds=30),
        _node(
            "flaky_call",
            "core.flaky",
            config={"succeed_on_attempt": 3},
            retry={"max_attempts": 5, "backoff_seconds": 0.1, "backoff_max_seconds": 1},
            timeout_seconds=30,
        ),
        _node(
            "always_fails",
            "core.fail",
            config={"message": "upstream API is down (drill)"},
            retry={"max_attempts": 2, "backoff_seconds": 0.1},
            timeout_seconds=30,
        ),
        _node("report", "core.echo", join="all_done", timeout_seconds=30),
    ],
    "edges": [
        _edge("prepare", "flaky_call"),
        _edge("prepare", "always_fails"),
        _edge("flaky_call", "report"),
        _edge("always_fails", "report"),
    ],
}


@node("demo.draft_refund", config_schema=NO_CONFIG, batchable=True)
def draft_refund(ctx: NodeContext) -> dict[str, Any]:
    """Draft a refund for an order, as an LLM agent would: amount, reason and a customer note."""
    amount = ctx.input.get("amount", 20)
    order = ctx.input.get("order_id", "A-1001")
    note = f"We are sorry about order {order}; we refund {amount} EUR."
    return {"refund": {"order_id": order, "amount": amount, "note": note}}


# A refund drafted by an agent step waits for a person: approve (possibly editing the
# draft) pays it, reject tells the customer; past the SLA an admin is added.
DEMO_REFUND: dict[str, Any] = {
    "description": "An agent drafts a refund; a person approves, edits or rejects it.",
    "input_schema": {
        "type": "object",
        "properties": {
            "order_id": ORDER_ID,
            "amount": {"type": "number", "minimum": 0, "default": 20, "description": "Refund in EUR."},
        },
        "required": ["order_id"],
    },
    "nodes": [
        {"id": "draft", "handler": "demo.draft_refund"},
        {
            "id": "approve_refund",
            "handler": "human.approval",
            "config": {
                "title": "Approve this refund?",
                "instructions": "Check the amount against the order; edit the note if needed.",
                "form": {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}}},
                "propose": "output.refund",
                "show_upstream": ["draft"],
                "approvers": {"roles": ["operator"]},
                "due_seconds": 3600,
                "escalate_to": {"roles": ["admin"]},
                "timeout_seconds": 86400,
                "on_timeout": "reject",
            },
        },
        {"id": "pay_refund", "handler": "core.echo"},
        {"id": "tell_customer", "handler": "core.echo"},
    ],
    "edges": [
        {"source": "draft", "target": "approve_refund"},
        {"source": "approve_refund", "target": "pay_refund", "when": "output.approved"},
        {"source": "approve_refund", "target": "tell_customer", "when": "not output.approved"},
    ],
}


# --- tools for the agent demo (llm.agent): deterministic, no network ------------------------

ORDER_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {
        # The default is what the scripted demo provider fills in (workflows/llm/demo_server.py).
        "order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]{3,6}$", "default": "A-1001"}
    },
    "required": ["order_id"],
    "additionalProperties": False,
}
ORDER_STATES = ["processing", "shipped", "delivered", "returned"]
ITEMS = ["espresso grinder", "trail shoes", "mechanical keyboard", "rain jacket", "desk lamp", "tea set"]


@node("demo.lookup_order", config_schema=ORDER_ARGS, tool=Tool(timeout_seconds=5, max_attempts=2))
def lookup_order(ctx: NodeContext) -> dict[str, Any]:
    """Look up an order by id: its item, amount in EUR, status and shipping city."""
    order_id = str(ctx.config["order_id"])
    h = stable_hash("order", order_id)
    city = LOCATIONS[h % len(LOCATIONS)][0]
    return {
        "order_id": order_id,
        "item": ITEMS[(h // 8) % len(ITEMS)],
        "amount_eur": 20 + h % 180,
        "status": ORDER_STATES[(h // 64) % len(ORDER_STATES)],
        "ship_to": city,
    }


WEATHER_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 100}},
    "required": ["city"],
    "additionalProperties": False,
}
SKIES = ["sunny", "cloudy", "rain", "snow", "windy", "fog"]


@node("demo.get_weather", config_schema=WEATHER_ARGS, tool=Tool(timeout_seconds=5, max_attempts=2))
def get_weather(ctx: NodeContext) -> dict[str, Any]:
    """Tell today's weather in a city: sky and temperature in Celsius."""
    city = str(ctx.config["city"])
    h = stable_hash("weather", city.lower())
    return {"city": city, "sky": SKIES[h % len(SKIES)], "celsius": -5 + h % 35}


CALC_ARGS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "number"},
        "b": {"type": "number"},
        "op": {"enum": ["+", "-", "*", "/"]},
    },
    "required": ["a", "b", "op"],
    "additionalProperties": False,
}


@node("demo.calculator", config_schema=CALC_ARGS, tool=True, batchable=True)
def calculator(ctx: NodeContext) -> dict[str, Any]:
    """Compute `a op b` for op one of + - * /."""
    a, b, op = float(ctx.config["a"]), float(ctx.config["b"]), ctx.config["op"]
    if op == "/" and b == 0:
        raise HandlerError("division by zero: b must not be 0.")
    value = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0.0}[op]
    return {"value": value}


# An agent answers a customer about an order with the tools above; against the demo
# provider (no network) it calls a tool, then answers.
DEMO_AGENT: dict[str, Any] = {
    "description": "An LLM agent looks up the order and the weather at its destination, then answers.",
    # The order id as its lookup_order tool takes it (three digits at least).
    "input_schema": {
        "type": "object",
        "properties": {"order_id": {**ORDER_ID, "pattern": ORDER_ARGS["properties"]["order_id"]["pattern"]}},
        "required": ["order_id"],
    },
    "nodes": [
        {
            "id": "support_agent",
            "handler": "llm.agent",
            "config": {
                "system": "You are a support agent. Use the tools; answer in two sentences.",
                "prompt": "Customer asks: where is my order {input.order_id}, and will the weather delay it?",
                "tools": ["demo.lookup_order", "demo.get_weather", "demo.calculator"],
                "max_steps": 6,
                "timeout_seconds": 30,
            },
            "retry": {"max_attempts": 3, "backoff_seconds": 1},
            "timeout_seconds": 120,
            "queue": "agents",
        },
        {"id": "reply", "handler": "core.echo"},
    ],
    "edges": [{"source": "support_agent", "target": "reply"}],
}

# An agent that calls a workflow as a tool (`workflow_tools`, workflows/agents/tools.py):
# demo-profile runs as its child run while the agent's attempt waits without a worker, and
# the child's output is the tool's result. Against the demo provider (no network) it calls
# the workflow once (with the user_id its prompt names: demo_server.fill_object), then answers.
DEMO_AGENT_WORKFLOW: dict[str, Any] = {
    "description": (
        "An LLM agent calls the demo-profile workflow as a tool (a child run, linked both ways), "
        'then recommends offers. Input: {"user_id": "u-42"}.'
    ),
    "input_schema": {"type": "object", "properties": {"user_id": USER_ID}, "required": ["user_id"]},
    "nodes": [
        {
            "id": "concierge",
            "handler": "llm.agent",
            "config": {
                "system": "You are a concierge. Use the profile workflow; answer in two sentences.",
                "prompt": "Recommend offers for user {input.user_id}.",
                "workflow_tools": ["demo-profile"],
                "max_steps": 4,
                "timeout_seconds": 30,
            },
            "retry": {"max_attempts": 3, "backoff_seconds": 1},
            "timeout_seconds": 120,
            "queue": "agents",
        },
        {"id": "reply", "handler": "core.echo"},
    ],
    "edges": [{"source": "concierge", "target": "reply"}],
}

# An LLM step that streams: on a fresh machine the default provider is the scripted demo
# provider (`make run`), so the text grows live on the run page without a key or a network.
DEMO_LLM: dict[str, Any] = {
    "description": (
        "Fetch a profile, then ask the default LLM provider for a short welcome note (streamed "
        'live on the run page). Input: {"user_id": "u-42"}.'
    ),
    "input_schema": {"type": "object", "properties": {"user_id": USER_ID}},
    "nodes": [
        _profile_node("fetch_profile"),
        _node(
            "write_welcome",
            "llm.chat",
            config={
                "system": "You write short, friendly welcome notes.",
                "prompt": "Write a welcome note for {upstream.fetch_profile.name}, who joined "
                "{upstream.fetch_profile.signup_days} days ago.",
                "max_tokens": 200,
            },
            retry={"max_attempts": 2, "backoff_seconds": 1},
            timeout_seconds=120,
        ),
    ],
    "edges": [_edge("fetch_profile", "write_welcome")],
}


SUMMARISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "seconds": {"type": "number", "minimum": 0, "maximum": 60, "description": "Time to spend."}
    },
}


@node("demo.summarise_document", config_schema=SUMMARISE_SCHEMA)
def summarise_document(ctx: NodeContext) -> dict[str, Any]:
    """Summarise one document of a map (ctx.item: its text, or {"text", "broken"}): words and title."""
    document = ctx.item if isinstance(ctx.item, dict) else {"text": ctx.item}
    if document.get("broken"):
        raise HandlerError(f"document {ctx.index} is unreadable: {str(document.get('text', ''))[:80]!r}")
    time.sleep(float(ctx.config.get("seconds", 0)))
    text = str(document.get("text", ""))
    return {"index": ctx.index, "words": len(text.split()), "title": text[:40]}


# A research agent's fan-out: each document summarised on its own, ten at a time, then one
# report from the summaries in order.
DEMO_MAP: dict[str, Any] = {
    "description": (
        "Summarise each document (a map over input.documents, 10 at a time), then report. "
        'Input: {"documents": ["first text", "second text"]}.'
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "documents": {
                "type": "array",
                "description": 'The texts to summarise; {"text": "...", "broken": true} fails its item.',
                "items": {
                    "anyOf": [
                        {"type": "string"},
                        {
                            "type": "object",
                            "properties": {"text": {"type": "string"}, "broken": {"type": "boolean"}},
                        },
                    ]
                },
            }
        },
        "required": ["documents"],
    },
    "nodes": [
        {
            "id": "summarise",
            "handler": "demo.summarise_document",
            "map": "input.documents",
            "max_parallel": 10,
            "on_item_failure": "continue",
            "retry": {"max_attempts": 2, "backoff_seconds": 0.2},
        },
        {"id": "report", "handler": "core.echo"},
    ],
    "edges": [{"source": "summarise", "target": "report"}],
}


# --- the order saga -------------------------------------------------------------------------
# Each step that changes the world names the step that undoes it (`compensate`): when the
# run fails or is cancelled, the succeeded steps are undone newest first (core/compensation.py).
# Input: {"order_id": "A-7", "sku": "lamp", "card": "4242", "address": "1 Main St"};
# "card": "declined" fails the payment (the reservation is released), "address": "nowhere"
# fails the shipping (the charge is refunded, then the reservation released).


def order_of(ctx: NodeContext) -> str:
    return str(ctx.input.get("order_id") or "A-1") if isinstance(ctx.input, dict) else "A-1"


@node("demo.reserve_inventory", config_schema=NO_CONFIG)
def reserve_inventory(ctx: NodeContext) -> dict[str, Any]:
    """Reserve the order's item in the warehouse; return the reservation."""
    order = order_of(ctx)
    sku = str(ctx.input.get("sku") or "lamp")
    return {"reservation": f"R-{stable_hash('reserve', order) % 100000:05d}", "sku": sku, "order_id": order}


@node("demo.release_inventory", config_schema=NO_CONFIG)
def release_inventory(ctx: NodeContext) -> dict[str, Any]:
    """Undo reserve_inventory: release the reservation it made (its output is given as upstream)."""
    reserved = next(iter(ctx.upstream.values()), None)
    if not isinstance(reserved, dict) or "reservation" not in reserved:
        raise HandlerError(f"Node {ctx.node_id!r} needs the reservation to release; none was given.")
    return {"released": reserved["reservation"]}


@node("demo.charge_payment", config_schema=NO_CONFIG)
def charge_payment(ctx: NodeContext) -> dict[str, Any]:
    """Charge the customer's card; the card "declined" is refused."""
    card = str(ctx.input.get("card") or "4242")
    if card == "declined":
        raise HandlerError(f"The card for order {order_of(ctx)} was declined.")
    return {
        "charge": f"CH-{stable_hash('charge', order_of(ctx)) % 100000:05d}",
        "amount": ctx.input.get("amount", 25),
    }


@node("demo.refund_payment", config_schema=NO_CONFIG)
def refund_payment(ctx: NodeContext) -> dict[str, Any]:
    """Undo charge_payment: refund the charge it made (its output is given as upstream)."""
    charged = next(iter(ctx.upstream.values()), None)
    if not isinstance(charged, dict) or "charge" not in charged:
        raise HandlerError(f"Node {ctx.node_id!r} needs the charge to refund; none was given.")
    return {"refunded": charged["charge"]}


@node("demo.ship_order", config_schema=NO_CONFIG)
def ship_order(ctx: NodeContext) -> dict[str, Any]:
    """Hand the order to the carrier; the address "nowhere" cannot be shipped to."""
    address = str(ctx.input.get("address") or "1 Main St")
    if address == "nowhere":
        raise HandlerError(f"The carrier cannot ship order {order_of(ctx)} to {address!r}.")
    return {"tracking": f"TR-{stable_hash('ship', order_of(ctx)) % 100000:05d}"}


_QUICK_RETRY = {"max_attempts": 2, "backoff_seconds": 0.2}

DEMO_SAGA: dict[str, Any] = {
    "description": (
        'The order saga: reserve, charge, ship. Input {"order_id": "A-7", "card": "declined"} fails '
        'the payment and releases the reservation; "address": "nowhere" refunds, then releases.'
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "order_id": ORDER_ID,
            "sku": {"type": "string", "default": "lamp", "description": "The item to reserve."},
            "card": {"type": "string", "default": "4242", "description": '"declined" fails the payment.'},
            "address": {
                "type": "string",
                "default": "1 Main St",
                "description": '"nowhere" fails the shipping.',
            },
            "amount": {"type": "number", "minimum": 0, "default": 25, "description": "Charged in EUR."},
        },
    },
    "nodes": [
        _node(
            "reserve_inventory",
            "demo.reserve_inventory",
            compensate={"handler": "demo.release_inventory", "config": {}, "retry": _QUICK_RETRY},
        ),
        _node(
            "charge_payment",
            "demo.charge_payment",
            retry=_QUICK_RETRY,
            compensate={"handler": "demo.refund_payment", "config": {}, "retry": _QUICK_RETRY},
        ),
        _node("ship_order", "demo.ship_order"),
    ],
    "edges": [_edge("reserve_inventory", "charge_payment"), _edge("charge_payment", "ship_order")],
}

DEMO_WORKFLOWS: dict[str, tuple[str, dict[str, Any]]] = {
    "demo-profile": ("User profile enrichment", DEMO_PROFILE),
    "demo-retries": ("Retries and dead letters (drill)", DEMO_RETRIES),
    "demo-refund": ("Refund with human approval", DEMO_REFUND),
    "demo-agent": ("Support agent with tools (llm.agent)", DEMO_AGENT),
    "demo-agent-workflow": ("Agent calling a workflow as a tool", DEMO_AGENT_WORKFLOW),
    "demo-llm": ("LLM welcome note (streamed)", DEMO_LLM),
    "demo-map": ("Summarise documents (map)", DEMO_MAP),
    "demo-order-saga": ("Order saga with compensation", DEMO_SAGA),
}
