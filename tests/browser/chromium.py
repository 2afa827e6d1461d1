"""How the browser tests and bench/editor_bench.py launch Debian's Chromium (never a
downloaded one)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Without the networking flags Chromium floods the closed network with refused connections.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
