"""The migration to prices per provider keeps the prices that exist, as prices for any provider."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from workflows.llm import prices
from workflows.store.models import LLMPrice, LLMProvider

MIGRATION = ("workflows", "0021_provider_prices")


@pytest.mark.django_db(transaction=True)
def test_prices_set_before_the_migration_become_any_provider_prices() -> None:
    executor = MigrationExecutor(connection)
    before = next(p.key for p in executor.loader.graph.node_map[MIGRATION].parents if p.key[0] == "workflows")
    try:
        executor.migrate([before])
        old = executor.loader.project_state([before]).apps.get_model("workflows", "LLMPrice")
        old.objects.create(model="gpt-4o", input_per_million=Decimal("2.5"), output_per_million=Decimal("10"))
        old.objects.create(
            model="tiny-1", input_per_million=Decimal("0.1"), output_per_million=Decimal("0.2")
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    kept = {
        (p.provider_id, p.model, str(p.input_per_million), str(p.output_per_million))
        for p in LLMPrice.objects.all()
    }
    assert kept == {(None, "gpt-4o", "2.5000", "10.0000"), (None, "tiny-1", "0.1000", "0.2000")}
    LLMProvider.objects.create(name="azure", base_url="https://azure.test/v1", default_model="gpt-4o")
    assert prices.cost_of("azure", "gpt-4o", 1_000_000, 1_000_000) == Decimal("12.5"), (
        "they apply to any provider"
    )
