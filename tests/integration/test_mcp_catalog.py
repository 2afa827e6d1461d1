"""MCP servers registered and their tools listed, against real servers this project did not
write (the npm reference server, over stdio and streamable HTTP) and the Python SDK server;
and what a definition's `mcp_tools` is refused for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.integration.conftest import free_port
from tests.integration.mcp_servers import STDIO_COMMANDS, everything_server, python_server
from workflows.mcp import catalog, servers
from workflows.store.errors import Invalid
from workflows.store.mcpservers import McpServer
from workflows.store.models import AuditEntry
from workflows.versions import publish as versions

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def allowed_commands(settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MCP_STDIO_COMMANDS": STDIO_COMMANDS}


@pytest.fixture
def pytools(tmp_path: Path) -> Iterator[McpServer]:
    with python_server(tmp_path / "calls.log") as url:
        yield servers.set_server("pytools", servers.ServerIn("http", url=url, timeout_seconds=10))


def names(row: McpServer) -> set[str]:
    return {t["name"] for t in row.tools}


def test_the_reference_server_lists_its_tools_over_stdio_and_streamable_http() -> None:
    stdio = catalog.refresh(servers.set_server("everything", servers.ServerIn("stdio", command="everything")))
    with everything_server() as url:
        http = catalog.refresh(servers.set_server("everything-http", servers.ServerIn("http", url=url)))
    assert stdio.tools_error == "" and http.tools_error == ""
    assert {"echo", "get-sum"} <= names(stdio) and names(stdio) == names(http)
    echo = stdio.tool("echo")
    assert echo is not None and echo["usable"] and echo["schema"]["properties"]["message"]["type"] == "string"
    assert stdio.tools_listed_at is not None


def test_a_tool_schema_that_is_not_json_schema_is_listed_unusable_with_the_reason(pytools: McpServer) -> None:
    row = catalog.refresh(pytools)
    broken, note = row.tool("broken"), row.tool("note")
    assert note is not None and note["usable"] and note["problem"] == ""
    assert broken is not None and not broken["usable"]
    assert "not valid JSON Schema at properties/value/type" in broken["problem"]
    assert [o.tool for o in catalog.offered([("pytools", "broken"), ("pytools", "note")])] == ["note"]


def test_a_server_that_is_down_keeps_a_bounded_error_instead_of_tools() -> None:
    down = f"http://127.0.0.1:{free_port()}/mcp"
    row = catalog.refresh(servers.set_server("down", servers.ServerIn("http", url=down, timeout_seconds=3)))
    assert row.tools == [] and row.tools_listed_at is not None
    assert row.tools_error.startswith("MCP server 'down': ") and len(row.tools_error) < 700


def test_a_stdio_command_must_come_from_the_settings_allow_list() -> None:
    with pytest.raises(
        Invalid, match=r"^command: choose one of the commands the settings allow \(everything, garbage"
    ):
        servers.set_server("sh", servers.ServerIn("stdio", command="bash"))
    with pytest.raises(Invalid, match="^url: a stdio server has no URL"):
        servers.set_server("mixed", servers.ServerIn("stdio", command="everything", url="http://x.test/mcp"))
    assert not McpServer.objects.exists()


def test_a_header_naming_a_missing_secret_is_refused_naming_the_header() -> None:
    given = servers.ServerIn(
        "http", url="https://tools.example.test/mcp", headers={"Authorization": "Bearer {secret.NOPE}"}
    )
    with pytest.raises(Invalid, match=r"^headers.Authorization: there is no secret 'NOPE'"):
        servers.set_server("tools", given)


def test_registering_and_deleting_a_server_is_audited() -> None:
    servers.set_server("audited", servers.ServerIn("stdio", command="everything"))
    servers.delete_server("audited")
    actions = list(
        AuditEntry.objects.filter(target_type="mcp-server", target_id="audited").values_list(
            "action", flat=True
        )
    )
    assert sorted(actions) == ["mcp_server.deleted", "mcp_server.set"]


def agent(mcp_tools: list[dict[str, Any]]) -> dict[str, Any]:
    config = {"prompt": "Use the tools.", "mcp_tools": mcp_tools}
    return {"nodes": [{"id": "agent", "handler": "llm.agent", "config": config}], "edges": []}


def issues_of(definition: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(Invalid) as refused:
        versions.parse(definition)
    return [(i.path, i.code) for i in refused.value.issues]


def test_a_definition_offering_an_unknown_server_or_tool_is_refused_naming_the_field(
    pytools: McpServer,
) -> None:
    catalog.refresh(pytools)
    wanted = [{"server": "pytools", "tools": ["note", "nope", "broken"]}, {"server": "ghost", "tools": ["x"]}]
    assert issues_of(agent(wanted)) == [
        ("nodes[0].config.mcp_tools[0].tools[1]", "unknown_mcp_tool"),
        ("nodes[0].config.mcp_tools[0].tools[2]", "unknown_mcp_tool"),
        ("nodes[0].config.mcp_tools[1].server", "unknown_mcp_server"),
    ]
    assert versions.parse(agent([{"server": "pytools", "tools": ["note", "slow"]}])) is not None


def test_the_duty_lists_again_only_the_servers_older_than_the_ttl(pytools: McpServer, settings: Any) -> None:
    settings.SWITCHYARD = {**settings.SWITCHYARD, "MCP_TOOLS_TTL_SECONDS": 3600}
    fresh = catalog.refresh(servers.set_server("fresh", servers.ServerIn("stdio", command="everything")))
    assert catalog.refresh_stale() == 1, "pytools, never listed"
    pytools.refresh_from_db()
    assert "note" in names(pytools)
    McpServer.objects.filter(pk=pytools.pk).update(tools_listed_at=timezone.now() - timedelta(hours=2))
    assert catalog.refresh_stale() == 1
    assert McpServer.objects.get(pk=fresh.pk).tools_listed_at == fresh.tools_listed_at, (
        "the fresh one was left alone"
    )
