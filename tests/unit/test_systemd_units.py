"""deploy/systemd's unit files pass `systemd-analyze verify` (where systemd is installed).

The units name /opt/switchyard, the guide's install folder; here it is replaced by this
checkout, so that verify also finds the commands they run (.venv's python and daphne).
Template units are verified as an instance (switchyard-worker@1.service).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
INSTALLED_AT = "/opt/switchyard"

pytestmark = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed (no systemd here)"
)


def installed_units(target: Path) -> list[Path]:
    """Copy the units into `target` as if installed in this checkout; return one path per unit."""
    paths = []
    for unit in sorted([*UNITS.glob("*.service"), *UNITS.glob("*.target")]):
        text = unit.read_text().replace(INSTALLED_AT, str(ROOT))
        name = unit.name.replace("@.", "@1.")
        (target / unit.name).write_text(text)
        (target / name).write_text(text)
        paths.append(target / name)
    return paths


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout: the units' commands cannot be found")
    units = installed_units(tmp_path)
    assert {u.name for u in units} >= {
        "switchyard-web@1.service",
        "switchyard-scheduler@1.service",
        "switchyard-worker@1.service",
        "switchyard-broadcaster.service",
        "switchyard-migrate.service",
        "switchyard.target",
    }
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *map(str, units)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_every_unit_reads_the_environment_file_and_runs_unprivileged() -> None:
    for unit in UNITS.glob("*.service"):
        text = unit.read_text()
        assert "EnvironmentFile=/etc/switchyard/switchyard.env" in text, unit.name
        assert "User=switchyard" in text, unit.name
