"""The names that raw SQL uses, read from the models: renaming a table or a column is one change.

Statements spell a table as `f"... FROM {NODES} n ..."`; a column whose name is not its
field's (a foreign key's `_id`) as `column(MapItem, "node_run")`. The texts stay constants,
rendered once at import, so psycopg still prepares each once per connection (pgsession.py).
"""

from __future__ import annotations

from django.db import models

from workflows.store.models import (
    AgentStep,
    BacklogSample,
    ChildRun,
    DeadLetter,
    MapItem,
    NodeRun,
    Run,
    RunEvent,
    Schedule,
    Wait,
    WebhookDelivery,
    WebhookSubscription,
    Workflow,
)


def table(model: type[models.Model]) -> str:
    return model._meta.db_table


def column(model: type[models.Model], field: str) -> str:
    """The column of a model's field (`node_run` -> `node_run_id`)."""
    found = model._meta.get_field(field)
    assert isinstance(found, models.Field) and found.column, f"{model.__name__}.{field} has no column"
    return found.column


WORKFLOWS = table(Workflow)
RUNS = table(Run)
NODES = table(NodeRun)
ITEMS = table(MapItem)
EVENTS = table(RunEvent)
WAITS = table(Wait)
DEAD_LETTERS = table(DeadLetter)
SCHEDULES = table(Schedule)
AGENT_STEPS = table(AgentStep)
SUBSCRIPTIONS = table(WebhookSubscription)
DELIVERIES = table(WebhookDelivery)
BACKLOG_SAMPLES = table(BacklogSample)
CHILD_RUNS = table(ChildRun)
