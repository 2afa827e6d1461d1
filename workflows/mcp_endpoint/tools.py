"""The MCP server's handlers: list the tools, call one. Thin: workflows/mcp_server decides.

A call is refused as a tool result with `isError: true` and a message naming what to fix
(the scope a key lacks, the field an argument breaks), so that a model reading it can act;
only a call with no usable key never gets here (401, endpoint.py).

A workflow's tool starts a run and waits for it up to a budget (SWITCHYARD_MCP_WAIT_SECONDS,
30 s; the call's `_meta["io.switchyard/waitSeconds"]` asks for another, up to
SWITCHYARD_MCP_MAX_WAIT_SECONDS). While it waits it polls the run in PostgreSQL (20 ms at
first, backing off to 500 ms) and sends `notifications/progress` each time nodes end, when the
client sent a progressToken. `_meta["io.switchyard/idempotencyKey"]` makes the start
idempotent, as the REST API's Idempotency-Key header does.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from workflows.api.auth import authorize_key, person_of
from workflows.api.errors import ApiError
from workflows.integrations import keycache
from workflows.mcp_server import calls, catalogue
from workflows.runtime import outages
from workflows.store.errors import STORES_AWAY, DomainError, Invalid
from workflows.store.models import ApiKey

log = logging.getLogger(__name__)
META_WAIT = "io.switchyard/waitSeconds"
META_IDEMPOTENCY = "io.switchyard/idempotencyKey"
FIRST_POLL_SECONDS, LAST_POLL_SECONDS = 0.02, 0.5
FORBIDDEN = -32003  # a JSON-RPC server error code (-32000..-32099): the key may not list tools
UNAVAILABLE = -32004  # likewise: a store is away
INTERNAL_ERROR = -32603
INSTRUCTIONS = (
    "Switchyard runs event-driven agent workflows. Each workflow tool starts a run of that "
    "workflow with the arguments as its input and answers its output; a run that takes longer "
    "answers its run id: read it later with switchyard_read_run. Decide approvals that runs "
    "wait on with switchyard_decide_approval."
)


def caller(ctx: ServerRequestContext[Any, Any]) -> tuple[keycache.Admitted, str]:
    """Return the API key endpoint.py let in (with its owner's role), and the origin the
    client reached us at."""
    request = ctx.request  # the Starlette request: the streamable-HTTP transport always carries it
    assert request is not None, "the MCP server is served over streamable HTTP only"
    scope = request.scope
    return scope["switchyard.admitted"], scope["switchyard.origin"]


def as_mcp(tool: catalogue.Tool) -> types.Tool:
    hints = types.ToolAnnotations(read_only_hint=tool.read_only, destructive_hint=False)
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=hints,
    )


def refusal(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def answer(data: dict[str, Any], text: str | None = None, is_error: bool = False) -> types.CallToolResult:
    body = text or json.dumps(data, indent=1, default=str)
    return types.CallToolResult(
        content=[types.TextContent(text=body)], structured_content=data, is_error=is_error
    )


def refusal_for(admitted: keycache.Admitted, action: str) -> str | None:
    """Return why the key may not do `action` (the scope or the role it lacks), or None."""
    try:
        authorize_key(admitted.key, admitted.role, action)
    except ApiError as exc:
        return exc.detail
    return None


def list_allowed(admitted: keycache.Admitted) -> list[catalogue.Tool]:
    if refusal_for(admitted, "view") and refusal_for(admitted, "start_run"):
        raise ApiError(
            403, "This key can neither read nor start runs: it needs the 'read' or the 'run' scope."
        )
    return catalogue.all_tools()


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    admitted, _ = caller(ctx)
    try:
        tools = await database_sync_to_async(list_allowed)(admitted)
    except ApiError as exc:
        raise forbidden(exc.detail) from None
    return types.ListToolsResult(tools=[as_mcp(t) for t in tools])


def forbidden(message: str) -> MCPError:
    return MCPError(code=FORBIDDEN, message=message)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    admitted, origin = caller(ctx)
    key = admitted.key
    tool = await database_sync_to_async(catalogue.find_tool)(params.name)
    if tool is None:
        return refusal(
            f"No tool named {params.name!r}: list the tools again (its workflow may be unpublished)."
        )
    if (why := refusal_for(admitted, tool.action)) is not None:
        return refusal(why)
    arguments = params.arguments or {}
    meta = dict(params.meta or {})
    try:
        if tool.slug is not None:
            return await call_workflow(ctx, tool.slug, arguments, meta, key, origin)
        return answer(await database_sync_to_async(call_fixed)(tool, arguments, key, origin))
    except DomainError as exc:
        return refusal(str(exc))


def call_fixed(tool: catalogue.Tool, arguments: dict[str, Any], key: ApiKey, origin: str) -> dict[str, Any]:
    calls.check_arguments(tool, arguments)
    if tool.name == catalogue.LIST_RUNS:
        return calls.list_runs(arguments, origin)
    if tool.name == catalogue.READ_RUN:
        return calls.run_report(arguments["run_id"], origin)
    return calls.decide_approval(person_of(key), arguments, origin)


def wait_budget(meta: dict[str, Any]) -> float:
    """Return how long to wait for the run: the call's ask, within the maximum, or the default."""
    asked = meta.get(META_WAIT)
    limit = settings.SWITCHYARD["MCP_MAX_WAIT_SECONDS"]
    if asked is None:
        return min(settings.SWITCHYARD["MCP_WAIT_SECONDS"], limit)
    if isinstance(asked, bool) or not isinstance(asked, int | float) or asked < 0:
        raise Invalid(f"_meta.{META_WAIT}: give a number of seconds, 0 or more (at most {limit:g}).")
    return min(float(asked), limit)


async def call_workflow(
    ctx: ServerRequestContext[Any, Any],
    slug: str,
    arguments: dict[str, Any],
    meta: dict[str, Any],
    key: ApiKey,
    origin: str,
) -> types.CallToolResult:
    """Start the run, report its nodes as they end, answer its output or, past the budget, its id."""
    budget = wait_budget(meta)
    idempotency_key = calls.check_idempotency_key(meta.get(META_IDEMPOTENCY))
    traceparent = meta.get("traceparent") if isinstance(meta.get("traceparent"), str) else None
    run, _ = await database_sync_to_async(calls.start_workflow_run)(
        slug, arguments, idempotency_key, key.pk, traceparent
    )
    progress = await watch_run(ctx, run.pk, time.monotonic() + budget)
    report = await database_sync_to_async(calls.run_report)(run.pk, origin)
    if not progress.is_finished:
        text = (
            f"Run {run.pk} of {slug} is still {report['status']} after {budget:g} s: read it with "
            f"{catalogue.READ_RUN} (run_id {run.pk}) or open {report['url']}."
        )
        return answer(report, text)
    if report["status"] != "succeeded":
        ended = f"Run {run.pk} of {slug} {report['status']}: {report['error'] or 'see ' + report['url']}"
        return answer(report, ended, is_error=True)
    return answer(report, json.dumps(report["output"], default=str))


async def watch_run(ctx: ServerRequestContext[Any, Any], run_id: int, deadline: float) -> calls.Progress:
    """Poll the run until it ends or the deadline passes, reporting progress as nodes end."""
    # Off the one thread Daphne runs every page's sync code on (as llm/follow.py polls): a call
    # that waits 30 s reads the run some 70 times, and pages should not queue behind it. Each
    # read gives its connection back (to the web process's pool): no request ends that thread.
    read_progress = database_sync_to_async(calls.progress_of, thread_sensitive=False)
    pause, reported = FIRST_POLL_SECONDS, 0
    while True:
        progress: calls.Progress = await read_progress(run_id)
        if progress.done > reported:
            ended = ", ".join(progress.ended[reported:])
            await ctx.session.report_progress(progress.done, progress.total, f"run {run_id}: {ended} ended")
            reported = progress.done
        if progress.is_finished or time.monotonic() >= deadline:
            return progress
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 1.5, LAST_POLL_SECONDS)


Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]


def guarded(handler: Handler) -> Handler:
    """The handlers' one boundary: what escapes them is told without its text.

    The SDK would answer any other exception with its text (`str(exc)`), and PostgreSQL's
    names hosts and ports. A store away is said as the API says it (runtime/outages.py); a
    call that may have started a run before it went says how to find it. Anything else is
    logged with its traceback and answered as an internal error.
    """

    @functools.wraps(handler)
    async def guard(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        try:
            return await handler(ctx, params)
        except STORES_AWAY as exc:
            log.warning("MCP %s: %s", ctx.method, exc)
            if ctx.method != "tools/call":
                raise MCPError(code=UNAVAILABLE, message=outages.unavailable(exc)) from None
            return refusal(away_during_call(exc))
        except MCPError:
            raise
        except Exception:  # the boundary the docstring names
            log.exception("MCP %s failed", ctx.method)
            raise MCPError(
                code=INTERNAL_ERROR, message="Switchyard failed to answer; the error is logged."
            ) from None

    return guard


def away_during_call(exc: BaseException) -> str:
    return (
        f"{outages.store_of(exc)} is unavailable; try again in {outages.RETRY_AFTER_SECONDS} s. If this "
        f"call may have started a run, call again with the same _meta {META_IDEMPOTENCY!r}: the run "
        "it started is answered, never a second."
    )


def build_server() -> Server[Any]:
    """The SDK's low-level server with Switchyard's two handlers."""
    return Server(
        "switchyard",
        version="1",
        title="Switchyard",
        instructions=INSTRUCTIONS,
        on_list_tools=guarded(list_tools),
        on_call_tool=guarded(call_tool),
    )
