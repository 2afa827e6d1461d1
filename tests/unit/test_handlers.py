"""Handlers: registry rules, the built-ins and the demo, each called with a hand-made context."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from workflows import handlers
from workflows.core.definition import DefinitionError, parse_definition
from workflows.handlers import builtin, demo
from workflows.handlers.registry import Handler, Registry, UnknownHandlerError

REPO = Path(__file__).resolve().parents[2]
HANDLER_MODULES = ["workflows.handlers.builtin", "workflows.handlers.demo", "workflows.llm.handler"]


def ctx(
    config: dict[str, Any] | None = None,
    *,
    input: dict[str, Any] | None = None,
    upstream: dict[str, Any] | None = None,
    attempt: int = 1,
    timeout: float = 30.0,
    node_id: str = "n",
) -> handlers.NodeContext:
    return handlers.NodeContext(
        run_id=7,
        node_id=node_id,
        attempt=attempt,
        idempotency_key=f"7:{node_id}:{attempt}",
        input=input or {},
        upstream=upstream or {},
        config=config or {},
        deadline=time.monotonic() + timeout,
    )


def call(name: str, context: handlers.NodeContext) -> Any:
    return handlers.get_handler(name).func(context)


# --- registry -------------------------------------------------------------------------------


def documented(ctx: handlers.NodeContext) -> dict[str, Any]:
    """Do a documented thing.

    More detail that the summary leaves out.
    """
    return {}


def also_documented(ctx: handlers.NodeContext) -> dict[str, Any]:
    """Do another thing."""
    return {}


def test_node_registers_the_function_with_its_docstring_and_schema() -> None:
    registry = Registry()
    schema = {"type": "object", "additionalProperties": False}
    returned = registry.node("team.step", config_schema=schema)(documented)
    handler = registry.get("team.step")
    assert returned is documented
    assert (handler.name, handler.func, handler.config_schema) == ("team.step", documented, schema)
    assert handler.summary() == "Do a documented thing."
    assert "More detail" in handler.doc
    assert handler.batchable is False


async def documented_on_loop(ctx: handlers.NodeContext) -> dict[str, Any]:
    return {}


def test_a_handler_given_a_coroutine_is_io_bound_and_a_batchable_one_cannot_be() -> None:
    registry = Registry()
    registry.node("team.wait")(documented)
    registry.node("team.quick", batchable=True)(also_documented)
    registry.add_coroutine("team.wait", documented_on_loop)

    assert registry.get("team.wait").io_bound and registry.get("team.wait").func is documented
    with pytest.raises(ValueError, match="batchable"):
        registry.add_coroutine("team.quick", documented_on_loop)
    assert not registry.get("team.quick").io_bound


def test_the_built_in_handlers_that_wait_on_io_are_the_io_bound_ones() -> None:
    io_bound = {name for name, h in handlers.registered().items() if h.io_bound}
    assert {"llm.chat", "http.request"} <= io_bound
    assert not io_bound & {"core.noop", "core.delay", "core.echo"}


def test_a_duplicate_name_is_refused_naming_both_functions() -> None:
    registry = Registry()
    registry.node("team.step")(documented)
    with pytest.raises(ValueError) as err:
        registry.node("team.step")(also_documented)
    assert "test_handlers.documented" in str(err.value)
    assert "test_handlers.also_documented" in str(err.value)
    assert registry.get("team.step").func is documented


def test_the_same_function_registering_again_is_a_reload_not_a_clash() -> None:
    registry = Registry()
    registry.node("team.step")(documented)
    registry.node("team.step", batchable=True)(documented)
    assert registry.get("team.step").batchable is True


@pytest.mark.parametrize(
    "name", ["", "Core.echo", "1core", "core-echo", "core echo", ".core", "a" * 101, None]
)
def test_an_invalid_name_is_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="invalid"):
        Registry().node(name)


@pytest.mark.parametrize("name", ["a", "core.echo", "team_a.step_2", "a" * 100])
def test_valid_names_are_accepted(name: str) -> None:
    registry = Registry()
    registry.node(name)(documented)
    assert list(registry.all()) == [name]


def test_a_handler_without_a_docstring_is_refused() -> None:
    def bare(ctx: handlers.NodeContext) -> None:
        return None

    with pytest.raises(ValueError, match="'team.bare'.*needs a docstring"):
        Registry().node("team.bare")(bare)


@pytest.mark.parametrize("schema", [["not", "a", "dict"], {"type": "array"}])
def test_a_config_schema_must_describe_an_object(schema: Any) -> None:
    with pytest.raises(TypeError, match="'team.step'"):
        Registry().node("team.step", config_schema=schema)


def test_an_unknown_name_raises_a_key_error_with_a_suggestion() -> None:
    registry = Registry()
    registry.node("core.echo")(documented)
    with pytest.raises(KeyError) as err:
        registry.get("core.ecko")
    assert isinstance(err.value, UnknownHandlerError)
    message = str(err.value)
    assert message.startswith("No handler named 'core.ecko' is registered.")
    assert "Did you mean core.echo?" in message
    assert "HANDLER_MODULES" in message


def test_registered_and_schemas_are_sorted_by_name() -> None:
    registry = Registry()
    registry.node("b.two", config_schema={"type": "object"})(also_documented)
    registry.node("a.one")(documented)
    assert list(registry.all()) == ["a.one", "b.two"]
    assert registry.schemas() == {"a.one": None, "b.two": {"type": "object"}}


def test_loading_handler_modules_twice_is_harmless() -> None:
    handlers.load_handler_modules(HANDLER_MODULES)
    before = handlers.registered()
    handlers.load_handler_modules(HANDLER_MODULES)
    assert handlers.registered() == before
    assert {"core.noop", "http.request", "llm.chat", "demo.fetch_profile"} <= set(before)
    assert list(before) == sorted(before)
    assert all(isinstance(h, Handler) for h in before.values())


def test_a_missing_handler_module_is_named_in_the_error() -> None:
    with pytest.raises(ModuleNotFoundError, match="'workflows.handlers.nope'.*HANDLER_MODULES"):
        handlers.load_handler_modules(["workflows.handlers.nope"])


def test_remaining_counts_down_and_never_goes_negative() -> None:
    assert 29 < ctx(timeout=30).remaining() <= 30
    assert ctx(timeout=-5).remaining() == 0.0


def test_every_registered_handler_has_a_valid_closed_config_schema_and_a_summary() -> None:
    handlers.load_handler_modules(HANDLER_MODULES)
    for name, handler in handlers.registered().items():
        assert handler.summary(), name
        assert handler.config_schema is not None, name
        jsonschema.Draft202012Validator.check_schema(handler.config_schema)
        assert handler.config_schema["additionalProperties"] is False, name
    assert handlers.schemas() == {n: h.config_schema for n, h in handlers.registered().items()}


def test_only_short_cpu_handlers_are_batchable() -> None:
    slow = {name for name, h in handlers.registered().items() if not h.batchable}
    assert {"core.delay", "http.request", "llm.chat"} <= slow
    assert not slow & {"core.noop", "core.echo", "demo.fetch_profile"}


def test_registry_and_handler_modules_import_without_django_and_fall_back_to_defaults() -> None:
    script = (
        "import sys\n"
        "from workflows.handlers import registry\n"
        "assert 'django' not in sys.modules, 'registry loaded django'\n"
        "from workflows.handlers import builtin, demo\n"
        "assert 'django' not in sys.modules, 'handler modules loaded django at import'\n"
        "assert builtin.switchyard_settings() == builtin.FALLBACK_SETTINGS\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


# --- core built-ins ---------------------------------------------------------------------------


def test_noop_returns_an_empty_object() -> None:
    assert call("core.noop", ctx()) == {}


def test_echo_returns_input_upstream_and_config() -> None:
    context = ctx({}, input={"x": 1}, upstream={"a": {"y": 2}})
    assert call("core.echo", context) == {"input": {"x": 1}, "upstream": {"a": {"y": 2}}, "config": {}}


USER_SCHEMA = {
    "type": "object",
    "properties": {"user_id": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["user_id"],
}


def test_validate_returns_an_input_that_matches_its_schema() -> None:
    assert call("core.validate", ctx({"schema": USER_SCHEMA}, input={"user_id": "u-7"})) == {"user_id": "u-7"}


def test_validate_names_every_offending_field() -> None:
    context = ctx({"schema": USER_SCHEMA}, input={"tags": ["a", 2]})
    with pytest.raises(handlers.HandlerError) as failure:
        call("core.validate", context)
    assert str(failure.value) == (
        "The run input does not match the schema: input: 'user_id' is a required property; "
        "input.tags[1]: 2 is not of type 'string'"
    )


def test_a_validate_node_whose_schema_is_not_a_schema_is_refused_with_the_definition() -> None:
    handlers.load_handler_modules(HANDLER_MODULES)
    definition = {
        "nodes": [{"id": "check", "handler": "core.validate", "config": {"schema": {"type": "objekt"}}}]
    }
    with pytest.raises(DefinitionError) as refused:
        parse_definition(definition, handlers.schemas())
    assert "nodes[0].config.schema.type" in str(refused.value)


def test_delay_waits_and_reports_the_seconds() -> None:
    started = time.monotonic()
    assert call("core.delay", ctx({"seconds": 0.12})) == {"slept": 0.12}
    assert time.monotonic() - started >= 0.12


def test_delay_without_a_worker_alarm_stops_shortly_after_the_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(handlers.HandlerError, match="deadline passed before 60 s"):
        call("core.delay", ctx({"seconds": 60}, timeout=-builtin.DELAY_DEADLINE_GRACE_SECONDS + 0.1))
    assert time.monotonic() - started < 1.0


def test_fail_raises_its_message() -> None:
    with pytest.raises(handlers.HandlerError, match=r"^upstream API is down \(drill\)$"):
        call("core.fail", ctx({"message": "upstream API is down (drill)"}))
    with pytest.raises(handlers.HandlerError, match="deliberate failure"):
        call("core.fail", ctx())


@pytest.mark.parametrize("attempt", [1, 2])
def test_flaky_fails_before_its_attempt(attempt: int) -> None:
    with pytest.raises(
        handlers.HandlerError, match=f"attempt {attempt} fails on purpose; attempt 3 succeeds"
    ):
        call("core.flaky", ctx({"succeed_on_attempt": 3}, attempt=attempt))


@pytest.mark.parametrize("attempt", [3, 4])
def test_flaky_succeeds_from_its_attempt_on(attempt: int) -> None:
    assert call("core.flaky", ctx({"succeed_on_attempt": 3}, attempt=attempt)) == {"attempt": attempt}


# --- templates ------------------------------------------------------------------------------

SOURCES = {
    "input": {"name": "Ada", "n": 3, "tags": ["x", "y"], "path": "a/b c"},
    "upstream": {"fetch": {"user": {"id": "u-1"}, "ok": True}},
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("Hi {input.name}", "Hi Ada"),
        ("{upstream.fetch.user.id}/{input.n}", "u-1/3"),
        ("second tag {input.tags.1}", "second tag y"),
        ("ok={upstream.fetch.ok}", "ok=true"),
        (
            '{"keep": "braces", "x": {input.n}} {other} {input.name.}',
            '{"keep": "braces", "x": 3} {other} {input.name.}',
        ),
        ("all: {input.tags}", 'all: ["x", "y"]'),
    ],
)
def test_templates_fill_dotted_placeholders_only(template: str, expected: str) -> None:
    assert builtin.render_template(template, SOURCES, "t") == expected


@pytest.mark.parametrize(
    "template", ["{input.missing}", "{input.tags.5}", "{upstream.nope.x}", "{input.name.len}"]
)
def test_a_placeholder_without_a_value_names_itself(template: str) -> None:
    with pytest.raises(handlers.HandlerError, match=r"llm.chat config.prompt: placeholder \{"):
        builtin.render_template(template, SOURCES, "llm.chat config.prompt")


def test_attribute_and_index_syntax_is_not_evaluated() -> None:
    template = "{input[name]} {0} {input.name!r} {input.name:>10} {}"
    assert builtin.render_template(template, SOURCES, "t") == template
    with pytest.raises(handlers.HandlerError, match="the run's input has no `__class__`"):
        builtin.render_template("{input.__class__}", SOURCES, "t")


@pytest.mark.parametrize(
    ("template", "sentence"),
    [
        (
            "{input.order_id}",
            "the run's input has no `order_id`; start the run with an input that has it, such as "
            '{"order_id": "..."}, or replay this node with edited input.',
        ),
        (
            "{input.customer.email}",
            "`customer.email`; start the run with an input that has it, such as "
            '{"customer": {"email": "..."}}',
        ),
        (
            "{upstream.nope.x}",
            "no output of node `nope` was given to this node; make `nope` a direct predecessor",
        ),
        ("{upstream.profile.age}", "the output of node `profile` has no `age`; fix the placeholder"),
    ],
)
def test_a_missing_placeholder_value_is_not_retryable_and_says_what_to_do(
    template: str, sentence: str
) -> None:
    sources = {"input": {"customer": {}}, "upstream": {"profile": {"name": "Ada"}}}
    with pytest.raises(handlers.HandlerError) as caught:
        builtin.render_template(template, sources, "llm.chat config.prompt")
    assert sentence in str(caught.value)
    assert not handlers.is_retryable(caught.value)


def test_a_handler_error_is_retryable_unless_it_says_not() -> None:
    assert handlers.is_retryable(handlers.HandlerError("the API is down"))
    assert handlers.is_retryable(RuntimeError("a bug"))
    assert not handlers.is_retryable(handlers.HandlerError("bad input", retryable=False))


def test_a_lone_placeholder_in_json_keeps_its_type() -> None:
    body = {"n": "{input.n}", "tags": ["{input.tags}", "n={input.n}"], "fixed": 1.5}
    assert builtin.render_value(body, SOURCES, "t") == {"n": 3, "tags": [["x", "y"], "n=3"], "fixed": 1.5}


def item_ctx(config: dict[str, Any], item: Any, index: int) -> handlers.NodeContext:
    """A map item's context: a node context with the item and its index."""
    return dataclasses.replace(ctx(config, input={"name": "Ada"}), item=item, index=index)


@pytest.mark.parametrize(
    ("template", "item", "expected"),
    [
        ("Summarise: {item.text}", {"text": "The cat sat."}, "Summarise: The cat sat."),
        ("{index}: {item}", "plain text", "2: plain text"),
        ("{item}", {"a": [1, "é"]}, '{"a": [1, "é"]}'),
        ("{item.0} and {item.1.x}", ["first", {"x": None}], "first and null"),
        ("{input.name} reads {item.tags.1}", {"tags": ["x", "y"]}, "Ada reads y"),
        ("{item.text.}", {"text": "t"}, "{item.text.}"),
    ],
)
def test_a_map_item_template_names_the_item_its_fields_and_its_index(
    template: str, item: Any, expected: str
) -> None:
    sources = builtin.template_sources(item_ctx({}, item, 2))
    assert builtin.render_template(template, sources, "t") == expected


def test_a_lone_item_placeholder_in_json_keeps_its_type() -> None:
    body = {"doc": "{item}", "id": "{item.id}", "at": "{index}", "label": "#{index}"}
    sources = builtin.request_sources(item_ctx({}, {"id": 7, "tags": ["a"]}, 0))
    assert builtin.render_value(body, sources, "t") == {
        "doc": {"id": 7, "tags": ["a"]},
        "id": 7,
        "at": 0,
        "label": "#0",
    }


@pytest.mark.parametrize(
    ("template", "sentence"),
    [
        ("{item.text}", "placeholder {item.text}: item 4 of the map has no `text`"),
        ("{item.meta.lang}", "placeholder {item.meta.lang}: item 4 of the map has no `meta.lang`"),
        ("{item.9}", "placeholder {item.9}: item 4 of the map has no `9`"),
        ("{index.x}", "placeholder {index.x}: the index of item 4 is the number 4; it has no fields"),
    ],
)
def test_a_missing_item_field_is_not_retryable_and_names_the_field_and_the_index(
    template: str, sentence: str
) -> None:
    sources = builtin.template_sources(item_ctx({}, {"meta": {}}, 4))
    with pytest.raises(handlers.HandlerError) as caught:
        builtin.render_template(template, sources, "llm.chat config.prompt")
    assert str(caught.value).startswith("llm.chat config.prompt: ")
    assert sentence in str(caught.value)
    assert not handlers.is_retryable(caught.value)


def test_a_context_that_is_no_map_item_offers_no_item_to_templates() -> None:
    sources = builtin.template_sources(ctx({}, input={"name": "Ada"}))
    assert set(sources) == {"input", "upstream"}
    assert builtin.render_template("{item.text} {index}", sources, "t") == "{item.text} {index}"


def test_each_llm_chat_item_is_its_own_request_for_recording_and_replay() -> None:
    from workflows.core import callhash
    from workflows.llm.handler import chat_messages

    config = {"prompt": "Summarise: {item.text}", "system": "Document {index}."}

    def digest(item: Any, index: int) -> str:
        messages = chat_messages(item_ctx(config, item, index), "llm.chat")
        return callhash.request_hash(callhash.llm_request("p", "m", messages, None, {}))

    assert chat_messages(item_ctx(config, {"text": "A"}, 0), "llm.chat") == [
        {"role": "system", "content": "Document 0."},
        {"role": "user", "content": "Summarise: A"},
    ]
    assert len({digest({"text": "A"}, 0), digest({"text": "B"}, 0), digest({"text": "A"}, 1)}) == 3
    assert digest({"text": "A"}, 0) == digest({"text": "A", "unused": 1}, 0)


def test_url_placeholders_are_percent_encoded_so_input_cannot_pick_the_host() -> None:
    config = {"url": "https://api.example.com/u/{input.path}?q={input.q}"}
    context = ctx(config, input={"path": "a/b c", "q": "x&admin=1@evil.test"})
    assert builtin.request_url(context, "http.request") == (
        "https://api.example.com/u/a%2Fb%20c?q=x%26admin%3D1%40evil.test"
    )


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///nohost", "http://example.com:99999/x"])
def test_a_url_that_is_not_http_with_a_host_is_refused(url: str) -> None:
    with pytest.raises(handlers.HandlerError, match="config.url must be an http"):
        builtin.request_url(ctx({"url": url}), "http.request")


def test_urls_in_messages_hide_credentials_and_query() -> None:
    assert (
        builtin.shown_url("https://user:pw@api.test:8443/v1/x?key=secret") == "https://api.test:8443/v1/x?..."
    )


# --- demo -----------------------------------------------------------------------------------


def run_demo(user_id: str | None) -> dict[str, Any]:
    """Run the demo-profile handlers in topological order, as the engine would."""
    inputs = {} if user_id is None else {"user_id": user_id}
    out: dict[str, Any] = {}
    out["fetch_profile"] = call("demo.fetch_profile", ctx(input=inputs))
    out["enrich_location"] = call("demo.enrich_location", ctx(input=inputs))
    up = {"fetch_profile": out["fetch_profile"]}
    out["sentiment_analysis"] = call("demo.sentiment_analysis", ctx(input=inputs, upstream=up))
    up = {k: out[k] for k in ("fetch_profile", "enrich_location", "sentiment_analysis")}
    out["recommendation_engine"] = call("demo.recommendation_engine", ctx(input=inputs, upstream=up))
    return out


def test_demo_handlers_are_deterministic_and_json_serialisable() -> None:
    first = run_demo("u-42")
    assert first == run_demo("u-42")
    json.dumps(first)
    assert {o["user_id"] for o in first.values()} == {"u-42"}
    assert run_demo("u-42") != run_demo("u-43")


def test_demo_outputs_have_the_documented_shape() -> None:
    out = run_demo("u-42")
    assert set(out["fetch_profile"]) == {"user_id", "name", "email", "signup_days"}
    assert set(out["enrich_location"]) == {"user_id", "city", "country", "timezone"}
    sentiment = out["sentiment_analysis"]
    assert -1 <= sentiment["sentiment"] <= 1
    assert sentiment["label"] == demo.sentiment_label(sentiment["sentiment"])
    rec = out["recommendation_engine"]
    assert len(set(rec["items"])) == 3
    assert rec["inputs"] == ["enrich_location", "fetch_profile", "sentiment_analysis"]
    assert rec["reason"]


def test_demo_uses_the_default_user_when_the_input_has_none() -> None:
    assert run_demo(None)["recommendation_engine"]["user_id"] == demo.DEFAULT_USER_ID


def test_demo_values_do_not_depend_on_the_process_hash_seed() -> None:
    script = (
        "import json, time\n"
        "from workflows.handlers import NodeContext, demo\n"
        "c = NodeContext(1, 'n', 1, '1:n:1', {'user_id': 'u-9'}, {}, {}, time.monotonic() + 9)\n"
        "print(json.dumps([demo.fetch_profile(c), demo.enrich_location(c)]))\n"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        result = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_a_demo_node_without_its_upstream_names_the_missing_node() -> None:
    with pytest.raises(
        handlers.HandlerError, match="'recommendation_engine' needs the output of 'enrich_location'"
    ):
        call(
            "demo.recommendation_engine",
            ctx(node_id="recommendation_engine", upstream={"fetch_profile": {}, "sentiment_analysis": {}}),
        )


@pytest.mark.parametrize("slug", sorted(demo.DEMO_WORKFLOWS))
def test_demo_definitions_name_only_registered_handlers_with_valid_configs(slug: str) -> None:
    handlers.load_handler_modules(HANDLER_MODULES)
    title, definition = demo.DEMO_WORKFLOWS[slug]
    assert title and definition["description"]
    for spec in definition["nodes"]:
        handler = handlers.get_handler(spec["handler"])
        jsonschema.validate(spec.get("config", {}), handler.config_schema or {})
    ids = {spec["id"] for spec in definition["nodes"]}
    assert all({e["source"], e["target"]} <= ids for e in definition["edges"])


@pytest.mark.parametrize("slug", sorted(demo.DEMO_WORKFLOWS))
def test_demo_definitions_pass_the_graph_validator(slug: str) -> None:
    handlers.load_handler_modules(HANDLER_MODULES)
    parsed = parse_definition(demo.DEMO_WORKFLOWS[slug][1], handlers.schemas())
    assert set(parsed.nodes) == {n["id"] for n in demo.DEMO_WORKFLOWS[slug][1]["nodes"]}
