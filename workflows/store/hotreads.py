"""The reads every API start makes, as constant statements: the key presented and the workflow.

The ORM builds a query's SQL anew on every call: for the key (joined to its owner, 11 user
columns) and the workflow (joined to its active version) that cost about as much as the
round trips themselves, about a third of the start's time in this process (22 ms a start
under cProfile, 7 ms of it compiling these two). These statements are constant texts, so
psycopg prepares each once per connection and the server keeps its plan; the rows become
model instances through `Model.from_db`, with each field's `from_db_value` applied as the
ORM would (JSON columns), so callers cannot tell them from the ORM's.

The workflow's active version comes without its definition (deferred: read on access),
which a start never needs: `load_graph` caches the parsed graph by version id. A start may
take the workflow from this process's cache (`cached`): its INSERT checks that the active
version and the default priority are still those read (CREATE_RUN_SQL), and the start is
tried again on a fresh read if not, so a start costs the key's read and its INSERT.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, models as orm

from workflows.store.models import ApiKey, Workflow, WorkflowVersion

M = TypeVar("M", bound=orm.Model)


def columns(model: type[orm.Model], leave_out: Sequence[str] = ()) -> list[str]:
    """The attnames of the model's concrete fields, in order, but those left out."""
    return [f.attname for f in model._meta.concrete_fields if f.attname not in leave_out]


def select_list(model: type[orm.Model], alias: str, names: Sequence[str]) -> str:
    by_name = {f.attname: f.column for f in model._meta.concrete_fields}
    return ", ".join(f'{alias}."{by_name[name]}"' for name in names)


def instance(model: type[M], names: Sequence[str], values: Sequence[Any]) -> M:
    """Build a model instance from a row of `names`, as the ORM would have read it."""
    fields = {f.attname: f for f in model._meta.concrete_fields}
    converted = []
    for name, value in zip(names, values, strict=True):
        convert = getattr(fields[name], "from_db_value", None)
        converted.append(value if convert is None or value is None else convert(value, None, connection))
    return model.from_db(DEFAULT_DB_ALIAS, list(names), converted)


@cache
def key_statement() -> tuple[str, list[str], list[str]]:
    user = get_user_model()
    key_names, user_names = columns(ApiKey), columns(user)
    sql = (
        f"SELECT {select_list(ApiKey, 'k', key_names)}, {select_list(user, 'u', user_names)} "
        f'FROM {ApiKey._meta.db_table} k JOIN {user._meta.db_table} u ON u."id" = k."owner_id" '
        'WHERE k."prefix" = %s'
    )
    return sql, key_names, user_names


def find_key(prefix: str) -> ApiKey | None:
    """The API key of this prefix, with its owner, or None."""
    sql, key_names, user_names = key_statement()
    with connection.cursor() as cur:
        cur.execute(sql, [prefix])
        row = cur.fetchone()
    if row is None:
        return None
    key = instance(ApiKey, key_names, row[: len(key_names)])
    key.owner = instance(get_user_model(), user_names, row[len(key_names) :])
    return key


def key_row(key: ApiKey) -> tuple[Any, ...]:
    """The values of a key and its owner, as `key_of` takes them back."""
    _, key_names, user_names = key_statement()
    return tuple(getattr(key, n) for n in key_names) + tuple(getattr(key.owner, n) for n in user_names)


def key_of(values: Sequence[Any]) -> ApiKey:
    """A fresh ApiKey with its owner from `key_row`'s values (lists copied: never shared)."""
    _, key_names, user_names = key_statement()
    fresh = [list(v) if isinstance(v, list) else v for v in values]
    key = ApiKey.from_db(DEFAULT_DB_ALIAS, key_names, fresh[: len(key_names)])
    key.owner = get_user_model().from_db(DEFAULT_DB_ALIAS, user_names, fresh[len(key_names) :])
    return key


@cache
def workflow_statement() -> tuple[str, list[str], list[str]]:
    flow_names = columns(Workflow)
    version_names = columns(WorkflowVersion, leave_out=["definition"])
    sql = (
        f"SELECT {select_list(Workflow, 'w', flow_names)}, {select_list(WorkflowVersion, 'v', version_names)} "
        f'FROM {Workflow._meta.db_table} w LEFT JOIN {WorkflowVersion._meta.db_table} v ON v."id" = w."active_version_id" '
        'WHERE w."slug" = %s'
    )
    return sql, flow_names, version_names


# slug -> the row find_workflow read: a start checks it is still so in its INSERT
# (runs.start_run's `as_read`), so the cache never needs to be told of a change.
_rows: dict[str, tuple[Any, ...]] = {}
CACHED_AT_MOST = 1024


def find_workflow(slug: str, cached: bool = False) -> Workflow | None:
    """The workflow of this slug with its active version (definition deferred), or None.

    With `cached`, the row this process read last for the slug may stand in for a read;
    a caller must then check that it still holds, as a start does in its INSERT.
    """
    row = _rows.get(slug) if cached else None
    if row is None:
        sql, _, _ = workflow_statement()
        with connection.cursor() as cur:
            cur.execute(sql, [slug])
            row = cur.fetchone()
        if row is None:
            _rows.pop(slug, None)
            return None
        if len(_rows) >= CACHED_AT_MOST:
            _rows.clear()
        # A workflow without an active version is refused before any INSERT could check
        # it: read it afresh every time.
        if row[len(workflow_statement()[1])] is not None:
            _rows[slug] = row
    return workflow_of(row)


def workflow_of(row: Sequence[Any]) -> Workflow:
    """A fresh Workflow (and active version) from a row of workflow_statement: never shared."""
    _, flow_names, version_names = workflow_statement()
    workflow = instance(Workflow, flow_names, row[: len(flow_names)])
    version_row = row[len(flow_names) :]
    workflow.active_version = (
        None if version_row[0] is None else instance(WorkflowVersion, version_names, version_row)
    )
    return workflow
