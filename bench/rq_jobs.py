"""The baseline's four no-op node functions (the demo DAG's shape, the peers' handlers' outputs).

Kept free of heavy imports: the RQ workers import this module by name (`rq_jobs.<func>`).
"""

from __future__ import annotations

from typing import Any


def fetch_profile(run_id: int) -> dict[str, Any]:
    return {"user_id": run_id, "name": f"user-{run_id}"}


def enrich_location(run_id: int) -> dict[str, Any]:
    return {"user_id": run_id, "city": "Lisbon"}


def sentiment_analysis(run_id: int) -> dict[str, Any]:
    return {"user_id": run_id, "sentiment": 0.7}


def recommendation_engine(run_id: int) -> dict[str, Any]:
    return {"user_id": run_id, "items": [1, 2, 3]}


def is_final_result(run_id: int, result: Any) -> bool:
    return isinstance(result, dict) and result.get("user_id") == run_id and result.get("items") == [1, 2, 3]
