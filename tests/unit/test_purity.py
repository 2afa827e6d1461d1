"""The pure core imports without Django, Redis or the rest of the project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PURE_MODULES = [
    "workflows.core.graph",
    "workflows.core.definition",
    "workflows.core.conditions",
    "workflows.core.diff",
    "workflows.core.engine",
    "workflows.core.waits",
]
FORBIDDEN = ("django", "redis", "rq", "channels", "psycopg")
CHECK = """
import importlib, sys
importlib.import_module({module!r})
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
assert not loaded, loaded
"""


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_imports_without_django_or_redis(module: str) -> None:
    if not (REPO / (module.replace(".", "/") + ".py")).exists():
        pytest.skip(f"{module} does not exist yet")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    script = CHECK.format(module=module, forbidden=FORBIDDEN)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
