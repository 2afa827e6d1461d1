"""`make run` generates the secrets key into the data folder, owner-only, once (scripts/run.py)."""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_script() -> Any:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location("run_under_test", REPO / "scripts" / "run.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(REPO / "scripts"))
        sys.modules.pop("run_under_test", None)


def test_the_key_is_generated_owner_only_once_and_the_environment_wins(
    run_script: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SWITCHYARD_SECRETS_KEY", raising=False)
    data = tmp_path / "dev"
    key = run_script.secrets_key(data)
    path = data / "secrets.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    Fernet(key.encode())  # a valid key
    assert run_script.secrets_key(data) == key  # kept, not generated again
    monkeypatch.setenv("SWITCHYARD_SECRETS_KEY", "from-the-environment")
    assert run_script.secrets_key(data) == "from-the-environment"
