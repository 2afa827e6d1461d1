"""Real MCP servers for the tests, as processes: the reference server from the npm registry
(`@modelcontextprotocol/server-everything`, stdio and streamable HTTP) and the Python SDK server
in tests/fakes/mcp_server.py (streamable HTTP and stdio)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.integration.conftest import accepts, free_port
from tests.integration.runtime import wait_for

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
GARBAGE = "import sys\nfor line in sys.stdin:\n    print('this is not JSON-RPC', flush=True)\n"
STDIO_COMMANDS = {
    "everything": ["node", str(EVERYTHING), "stdio"],
    "pytools": [sys.executable, "-m", "tests.fakes.mcp_server", "--stdio"],
    "garbage": [sys.executable, "-c", GARBAGE],
}


def stdio_env() -> dict[str, str]:
    """The environment that lets workers run the allowed stdio commands."""
    return {"SWITCHYARD_MCP_STDIO_COMMANDS": json.dumps(STDIO_COMMANDS)}


@contextmanager
def served(argv: list[str], port: int, env: dict[str, str]) -> Iterator[str]:
    """Run a streamable HTTP server process; yield its MCP endpoint; stop it after."""
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: accepts(port) or process.poll() is not None, 30, f"{argv[-1]} to listen")
        assert process.poll() is None, f"{argv} exited with {process.returncode}"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(10)


@contextmanager
def python_server(log: Path) -> Iterator[str]:
    """The Python SDK server over streamable HTTP, noting its calls in `log`."""
    port = free_port()
    argv = [sys.executable, "-m", "tests.fakes.mcp_server", "--port", str(port)]
    with served(argv, port, {"MCP_FAKE_LOG": str(log)}) as url:
        yield url


@contextmanager
def everything_server() -> Iterator[str]:
    """The npm reference server in its streamableHttp mode."""
    port = free_port()
    with served(["node", str(EVERYTHING), "streamableHttp"], port, {"PORT": str(port)}) as url:
        yield url


def noted(log: Path) -> list[dict[str, str]]:
    """The `note` calls the Python server received, in order."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
