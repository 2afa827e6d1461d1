"""The hand-written reads of the start path give the same objects as the ORM's; a cached workflow never starts a run on what changed since."""

from __future__ import annotations

import pytest

from tests.api.conftest import CHAIN
from tests.integration.conftest import node, publish
from workflows.store import hotreads
from workflows.store.models import ApiKey, NodeRun, Run, Workflow
from workflows.versions import publish as versions

pytestmark = pytest.mark.django_db


def fields(obj: object) -> list[object]:
    return [getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields]  # type: ignore[attr-defined]


def test_a_key_reads_as_the_orm_reads_it_with_its_owner(api) -> None:
    prefix = api.token.split("_")[1]
    key, orm = hotreads.find_key(prefix), ApiKey.objects.select_related("owner").get(prefix=prefix)
    assert key is not None and fields(key) == fields(orm) and fields(key.owner) == fields(orm.owner)
    assert isinstance(key.scopes, list) and hotreads.find_key("00000000") is None


def test_a_workflow_reads_with_its_active_version_but_not_its_definition(chain) -> None:
    flow, orm = versions.get_workflow_to_start("chain"), versions.get_workflow("chain")
    assert fields(flow) == fields(orm)
    assert "definition" in flow.active_version.get_deferred_fields()
    assert flow.active_version.number == orm.active_version.number
    assert flow.active_version.definition == orm.active_version.definition  # read on access


def test_a_workflow_without_an_active_version_reads_with_none(api) -> None:
    api.post("workflows", {"slug": "empty", "title": "Empty"})
    assert versions.get_workflow_to_start("empty").active_version is None
    with pytest.raises(versions.NotFound):
        versions.get_workflow_to_start("nothing")


def test_a_start_from_a_stale_cache_starts_on_the_version_active_now(api, chain) -> None:
    first = api.post("workflows/chain/runs", {"input": {}})
    assert first.json()["version"] == 1  # the workflow is cached in this process now
    publish("chain", {**CHAIN, "nodes": [*CHAIN["nodes"], node("third")]})
    again = api.post("workflows/chain/runs", {"input": {}})
    assert again.status_code == 201 and again.json()["version"] == 2
    assert NodeRun.objects.filter(run_id=again.json()["id"]).count() == 3


def test_a_start_from_a_stale_cache_takes_the_new_default_priority(api, chain) -> None:
    api.post("workflows/chain/runs", {"input": {}})
    Workflow.objects.filter(pk=chain.pk).update(default_priority=7)
    assert api.post("workflows/chain/runs", {"input": {}}).json()["priority"] == 7


def test_a_start_of_a_workflow_deleted_since_it_was_cached_is_404(api, chain) -> None:
    api.post("workflows/chain/runs", {"input": {}})
    Run.objects.all().delete()
    api.delete("workflows/chain")
    assert api.post("workflows/chain/runs", {"input": {}}).status_code == 404


def test_a_workflow_without_an_active_version_is_not_cached(api) -> None:
    api.post("workflows", {"slug": "later", "title": "Later"})
    assert api.post("workflows/later/runs", {}).status_code == 409
    publish("later", CHAIN)
    assert api.post("workflows/later/runs", {}).status_code == 201
