"""Provider kinds over the API: an Anthropic provider is added, read and kept as one; an
unknown kind is a 4xx naming `kind`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import assert_problem
from workflows.handlers.registry import HandlerError
from workflows.llm import providers
from workflows.secrets import catalog as secret_catalog
from workflows.store.models import AuditEntry, LLMProvider

pytestmark = pytest.mark.django_db
CLAUDE = {
    "name": "claude",
    "kind": "anthropic",
    "base_url": "https://api.anthropic.com",
    "default_model": "claude-sonnet-4-5",
    "api_key": "sk-ant-api-secret",
}


def test_an_anthropic_provider_is_added_and_keeps_its_kind_when_changed(api: Any) -> None:
    created = api.post("llm/providers", CLAUDE)
    assert created.status_code == 201 and created.json()["kind"] == "anthropic"
    assert "sk-ant-api-secret" not in created.content.decode() and created.json()["has_key"]
    unchanged = {k: v for k, v in CLAUDE.items() if k not in ("kind", "api_key")}
    assert api.put("llm/providers/claude", {**unchanged, "timeout_seconds": 90}).json()["kind"] == "anthropic"
    assert LLMProvider.objects.get(name="claude").kind == "anthropic"
    assert AuditEntry.objects.filter(action="llm_provider.create").first().data["kind"] == "anthropic"
    openai = api.post(
        "llm/providers", {**unchanged, "name": "plain", "base_url": "https://llm.example.test/v1"}
    )
    assert openai.json()["kind"] == "openai"  # the default


def test_an_unknown_kind_is_refused_naming_it(api: Any) -> None:
    assert_problem(api.post("llm/providers", {**CLAUDE, "kind": "gemini"}), 422, "kind")
    assert not LLMProvider.objects.filter(name="claude").exists()


def test_a_key_from_the_secrets_store_is_read_when_the_endpoint_is_resolved(api: Any) -> None:
    refused = assert_problem(api.post("llm/providers", {**CLAUDE, "api_key": "{secret.CLAUDE_KEY}"}), 422)
    assert "api_key: there is no secret named 'CLAUDE_KEY'" in refused["detail"]
    secret_catalog.set_secret("CLAUDE_KEY", "sk-ant-from-the-store")
    assert api.post("llm/providers", {**CLAUDE, "api_key": "{secret.CLAUDE_KEY}"}).json()["has_key"]
    assert providers.resolve("claude", None).api_key == "sk-ant-from-the-store"
    secret_catalog.set_secret("CLAUDE_KEY", "sk-ant-rotated")  # read at call time: no provider change
    assert providers.resolve("claude", None).api_key == "sk-ant-rotated"
    secret_catalog.delete_secret("CLAUDE_KEY")
    with pytest.raises(
        HandlerError, match="takes its api_key from secret 'CLAUDE_KEY', which does not exist"
    ) as gone:
        providers.resolve("claude", None)
    assert not gone.value.retryable
