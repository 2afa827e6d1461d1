"""Django's system checks pass in the environment the tests' workers get.

The workers the tests start skip them (tests/integration/runtime.py: --skip-checks, a third of
each start); this runs them once, so that a check that fails still fails `make test`. In a
process of its own: in this one the test settings allow the host `testserver`, which the
default secret key check (controlplane/checks.py) rightly refuses.
"""

from __future__ import annotations

import subprocess
import sys

from tests.integration.runtime import ROOT, Runtime


def test_the_system_checks_find_no_error_in_a_workers_environment() -> None:
    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "ERROR"],
        cwd=ROOT,
        env=Runtime().env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    assert "System check identified no issues" in check.stdout
