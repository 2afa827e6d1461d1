"""`make chaos`, short: a few hundred runs while every role and both stores are killed.

scripts/chaos.py starts its own PostgreSQL and Valkey (durable, in a temporary folder), its
web processes, schedulers and workers, and checks in PostgreSQL that no run was lost, stuck
or doubled, no node succeeded twice, outputs are right and no committed start answered 5xx.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.runtime import ROOT


def test_no_run_is_lost_stuck_or_doubled_under_chaos(tmp_path: Path) -> None:
    data = Path("/tmp") / f"sy-chaos-{tmp_path.name[-12:]}"  # PostgreSQL's socket path must stay short
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chaos.py"), "--runs", "240", "--rate", "12", "--data", str(data)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "no run lost, stuck or doubled" in result.stdout
