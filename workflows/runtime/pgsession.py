"""How the runtime's processes (workers, schedulers) set up their Postgres sessions.

They run a few statements thousands of times per connection, each driven by primary keys.
psycopg prepares a statement once it has run five times on a connection, but Postgres
still plans a prepared statement anew at every call while its plan for the actual values
(a one-element id array, say) looks cheaper than its generic plan, which is always the
case for the claim statements: on an idle system the scheduler's claim spent 0.59 ms in
planning and 0.26 ms running, the worker's 0.15 and 0.40 ms (server log, 30 hops), on
every hop of every run. Runtime sessions therefore use the generic plan
(`plan_cache_mode = force_generic_plan`): planned once per connection.

A plan made once is made with the statistics of that moment: on a fresh install, or a fresh
bench database, the tables are tiny and a sequential scan is the cheapest way to find a
row, and the connection keeps scanning the whole table as it grows (measured: the worker's
result statement went from 0.2 ms to 15-60 ms as 2,000 runs were added, Postgres CPU per
node five times higher). Runtime sessions therefore price sequential scans out
(`enable_seqscan = off`): every runtime statement has an index to go by.

The price: a generic plan cannot use a partial index whose condition depends on a
parameter. The runtime's scans that need one (due retries, the reconciler's in-flight
scans, stuck webhook deliveries) spell their statuses in the SQL text, and
tests/integration/test_pgsession.py checks that their generic plans use those indexes.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.backends.signals import connection_created

RUNTIME_PLANNING = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), set_config('enable_seqscan', 'off', false)"


def plan_generically() -> None:
    """Make this process's Postgres sessions, the open one and every later one, plan as above."""
    connection_created.connect(on_connection_created, dispatch_uid="switchyard-generic-plans")
    if connection.connection is not None:
        with connection.cursor() as cur:
            cur.execute(RUNTIME_PLANNING)


def on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    with connection.cursor() as cur:
        cur.execute(RUNTIME_PLANNING)
