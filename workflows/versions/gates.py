"""Conditions a draft must meet to be published, beyond a valid definition (a seam).

The domain registers its gates at app start (workflows/apps.py): a required regression suite
(workflows/suites/gate.py) is one. `publish_version` asks every gate before it publishes; a
gate refuses by raising a DomainError that names what is missing. Here, not in the suites
package, so versions need not import the packages that build on them.
"""

from __future__ import annotations

from collections.abc import Callable

from workflows.store.models import WorkflowVersion

Gate = Callable[[WorkflowVersion], None]
GATES: dict[str, Gate] = {}


def register(name: str, gate: Gate) -> None:
    """Add a gate (at app start); registering a name again replaces it."""
    GATES[name] = gate


def check_publish(version: WorkflowVersion) -> None:
    """Raise the first gate's refusal of publishing `version`."""
    for gate in GATES.values():
        gate(version)
