"""MCP servers in Chromium: an admin registers a server (the Python SDK server, over streamable
HTTP) and lists its tools; an editor picks one in the agent form, which the draft saves;
other roles have no MCP page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.editor_fixtures import open_editor, select_node
from tests.factories import make_workflow
from tests.integration.mcp_servers import python_server
from workflows.store.models import WorkflowVersion

PageAs = Callable[[str], Page]
Screenshot = Callable[[Page, str], Path]


@pytest.fixture
def pytools_url(tmp_path: Path) -> Iterator[str]:
    with python_server(tmp_path / "calls.log") as url:
        yield url


def test_an_admin_registers_a_server_lists_its_tools_and_an_editor_picks_one(
    page_as: PageAs, live_url: str, screenshot: Screenshot, pytools_url: str
) -> None:
    page = page_as("admin")
    page.goto(f"{live_url}/mcp-servers/")
    page.fill("#server-form input[name=name]", "pytools")
    page.fill("#server-form input[name=url]", pytools_url)
    page.fill("#server-form input[name=description]", "The test tools")
    page.click("text=Save server")
    row = page.locator("#server-pytools")
    expect(row).to_contain_text("not listed yet: refresh")
    row.locator("[data-action=refresh]").click()
    expect(row.locator("li[data-tool=note].usable")).to_have_count(1)
    broken = row.locator("li[data-tool=broken]")
    expect(broken).to_have_class("unusable")
    expect(broken).to_contain_text("not valid JSON Schema at properties/value/type")
    page.evaluate(
        "window.scrollTo(0, 0)"
    )  # a full-page shot scrolled to the row draws the sticky nav mid-page
    page.set_viewport_size({"width": 1280, "height": 900})
    screenshot(page, "mcp-servers-1280")
    page.set_viewport_size({"width": 800, "height": 900})
    screenshot(page, "mcp-servers-800")

    agent = {"id": "agent", "handler": "llm.agent", "config": {"prompt": "Help."}}
    make_workflow("mcp-edit", {"nodes": [agent]}, publish=False)
    editor = page_as("editor")
    open_editor(editor, live_url, "mcp-edit")
    select_node(editor, "agent")
    picker = editor.locator('[data-field="config.mcp_tools"] [data-picker="mcp-tools"]')
    server = picker.locator('fieldset[data-server="pytools"]')
    expect(server.locator("legend")).to_have_text("pytools")
    expect(server.get_by_label("broken", exact=False)).to_be_disabled()
    server.get_by_label("note", exact=True).check()
    expect(editor.locator("#ed-problems")).to_have_attribute("data-count", "0")
    editor.click('[data-cmd="save"]')
    expect(editor.locator("#ed-status")).to_contain_text("Saved")
    saved = WorkflowVersion.objects.filter(workflow__slug="mcp-edit").order_by("-number", "-revision").first()
    assert saved is not None
    assert saved.definition["nodes"][0]["config"]["mcp_tools"] == [{"server": "pytools", "tools": ["note"]}]
    editor.set_viewport_size({"width": 1280, "height": 900})
    screenshot(editor, "mcp-agent-form-1280")


def test_only_admins_have_the_mcp_page(page_as: PageAs, live_url: str) -> None:
    page = page_as("editor")
    expect(page.locator("nav a", has_text="MCP")).to_have_count(0)
    assert page.goto(f"{live_url}/mcp-servers/").status == 403  # type: ignore[union-attr]  # goto answered
