"""The hand-written reads of the start path give the same objects as the ORM's."""

from __future__ import annotations

import pytest

from workflows import hotreads, versions
from workflows.models import ApiKey

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
