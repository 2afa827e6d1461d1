"""`make chaos`, short: a few hundred runs of every node kind while every role and both stores
are killed; and `make chaos ROLLING=1`, short: every process restarted one at a time.

scripts/chaos.py starts its own PostgreSQL and Valkey (durable, in a temporary folder), its
web processes, schedulers, workers and the scripted LLM provider, and checks in PostgreSQL
that no run was lost, stuck or doubled, no node succeeded twice, no tool call, map item or
compensation ran again once recorded, no approval was lost, outputs equal a chaos-free
reference and no committed start answered 5xx (no 5xx at all under rolling restarts).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.runtime import ROOT


def run_chaos(tmp_path: Path, *args: str) -> str:
    data = Path("/tmp") / f"sy-chaos-{tmp_path.name[-12:]}"  # PostgreSQL's socket path must stay short
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chaos.py"), *args, "--data", str(data)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return result.stdout


def test_no_run_is_lost_stuck_or_doubled_under_chaos(tmp_path: Path) -> None:
    out = run_chaos(tmp_path, "--runs", "180", "--rate", "8")
    assert "no run lost, stuck or doubled" in out


def test_rolling_restarts_lose_nothing_and_answer_no_5xx(tmp_path: Path) -> None:
    out = run_chaos(tmp_path, "--rolling", "--runs", "90", "--rate", "5")
    assert "no run lost, stuck or doubled" in out
    assert '"restart_not_clean": []' in out
