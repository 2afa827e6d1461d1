"""The demo provider out of the box: bootstrap registers it, and the seeded LLM demo runs on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command

from tests.integration.conftest import wait_finished
from tests.integration.runtime import Runtime
from workflows.llm import demo_server
from workflows.llm.providers import DEMO_LABEL
from workflows.runs import actions as runs
from workflows.store.models import LLMCall, LLMProvider, NodeRun, Workflow


@pytest.fixture
def demo_url(settings: Any) -> Iterator[str]:
    server = demo_server.serve("127.0.0.1", 0, word_delay=0.01)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    settings.SWITCHYARD = {**settings.SWITCHYARD, "DEMO_LLM_URL": url}
    yield url
    server.shutdown()
    server.server_close()


def test_bootstrap_registers_the_demo_provider_as_the_default_once(
    demo_url: str, db: None, capsys: Any
) -> None:
    call_command("bootstrap")
    call_command("bootstrap")
    demo = LLMProvider.objects.get(name="demo")
    assert demo.demo and demo.is_default and demo.base_url == demo_url and demo.api_key == ""
    assert DEMO_LABEL in capsys.readouterr().out


def test_bootstrap_leaves_an_admins_default_provider_the_default(demo_url: str, db: None) -> None:
    LLMProvider.objects.create(
        name="openai", base_url="https://api.openai.test/v1", default_model="m", is_default=True
    )
    call_command("bootstrap")
    assert not LLMProvider.objects.get(name="demo").is_default


def test_the_seeded_llm_demo_runs_on_the_demo_provider(demo_url: str, runtime: Runtime) -> None:
    call_command("bootstrap")
    run, _ = runs.start_run(Workflow.objects.get(slug="demo-llm"), {"user_id": "u-42"})
    assert wait_finished(run).status == "succeeded"
    output = NodeRun.objects.get(run=run, node_id="write_welcome").output
    assert output["content"].startswith("(Demo provider, scripted; not a real model.)")
    assert output["finish_reason"] == "stop" and output["model"] == demo_server.MODEL
    call = LLMCall.objects.get(run=run)
    assert call.provider == "demo" and call.demo and call.cost == 0, "the demo model is listed free"
