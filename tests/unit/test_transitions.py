"""One module family changes statuses (workflows/runtime/transitions*.py), and only as the table allows.

The scan reads the source, it imports nothing but the transitions modules: SQL strings that
UPDATE or INSERT a node's or run's status (the table spelled, or named from
store/statements.py), ORM `.update(status=...)`, `.create(status=...)`,
`.bulk_update(..., ["status"])` on runs or nodes, and `x.status = ...` followed by a save.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from workflows.core.states import NodeStatus as N, RunStatus as R

if TYPE_CHECKING:
    from workflows.runtime.lifecycle import Move

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("workflows", "monitoring", "controlplane")
OWNERS = sorted((REPO / "workflows" / "runtime").glob("transitions*.py"))
MODULES = [f"workflows.runtime.{path.stem}" for path in OWNERS]
# A table as the statements spell it: its name, or store/statements.py's constant for it.
STATUS_TABLES = r"(?:workflows_(?:noderun|run|mapitem)|\{(?:\w+\.)?(?:NODES|RUNS|ITEMS)\})"

SQL_WRITES = [
    re.compile(
        rf"\bUPDATE\s+{STATUS_TABLES}(?!\w)(?:(?!\bWHERE\b|\bFROM\b).)*?\bstatus\s*=",
        re.I | re.S,
    ),
    re.compile(rf"\bINSERT\s+INTO\s+{STATUS_TABLES}(?!\w)\s*\([^)]*\bstatus\b", re.I | re.S),
]
# models, and related managers; a map node's items move by the node table (MapItem)
RUN_OR_NODE = {"Run", "NodeRun", "nodes", "runs", "node_runs", "MapItem", "items"}
OTHER_MODELS = {"WebhookDelivery", "DeadLetter", "WorkflowVersion"}  # they have statuses of their own
STATUS_NAMES = {"NodeStatus", "RunStatus", "engine", "N", "R"}
STATUS_WORDS = {s.value for s in N} | {s.value for s in R}


def names_in(node: ast.AST) -> set[str]:
    """Every name and attribute name an expression mentions."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def is_status_value(value: ast.AST) -> bool:
    """Whether an expression names a node or run status (not another model's)."""
    mentioned = names_in(value)
    if mentioned & OTHER_MODELS:
        return False
    literal = isinstance(value, ast.Constant) and value.value in STATUS_WORDS
    return literal or bool(mentioned & STATUS_NAMES)


def sql_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # a name put in is kept as spelled: `{NODES}`
        return "".join(
            v.value if isinstance(v, ast.Constant) else f"{{{ast.unparse(v.value)}}}" for v in node.values
        )
    return None


def orm_writes(call: ast.Call) -> bool:
    """`<Run or NodeRun chain>.update/create(status=...)`, or any such call given a status value."""
    method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    receiver = names_in(call.func)
    if receiver & OTHER_MODELS:
        return False
    if method in ("update", "create", "get_or_create", "update_or_create"):
        status = [k.value for k in call.keywords if k.arg == "status"]
        return bool(status) and (bool(receiver & RUN_OR_NODE) or is_status_value(status[0]))
    if method == "bulk_update" and receiver & RUN_OR_NODE:
        return any(
            isinstance(c, ast.Constant) and c.value == "status" for a in call.args for c in ast.walk(a)
        )
    return False


def saved_status_assignments(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    """Lines of `x.status = ...` in a function that also saves x, when x is a run or a node."""
    saved = {
        c.func.value.id
        for c in ast.walk(func)
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and c.func.attr == "save"
        and isinstance(c.func.value, ast.Name)
    }
    lines = []
    for stmt in ast.walk(func):
        if not isinstance(stmt, ast.Assign):
            continue
        for target in stmt.targets:
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            for i, element in enumerate(elements):
                if not (
                    isinstance(element, ast.Attribute)
                    and element.attr == "status"
                    and isinstance(element.value, ast.Name)
                    and element.value.id in saved
                ):
                    continue
                value = stmt.value.elts[i] if isinstance(stmt.value, ast.Tuple) else stmt.value
                looks_like = any(word in element.value.id for word in ("run", "node"))
                if (looks_like and not names_in(value) & OTHER_MODELS) or is_status_value(value):
                    lines.append(stmt.lineno)
    return lines


def status_writes(source: str) -> list[tuple[int, str]]:
    """(line, what) of every write of a node's or run's status in this Python source."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        text = sql_text(node)
        if text is not None and any(pattern.search(text) for pattern in SQL_WRITES):
            found.append((node.lineno, "SQL writes a status"))
        if isinstance(node, ast.Call) and orm_writes(node):
            found.append((node.lineno, "ORM writes a status"))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [(line, "assigns a status and saves") for line in saved_status_assignments(node)]
    return sorted(set(found))


def python_files() -> list[Path]:
    files = []
    for top in SCANNED:
        files += [p for p in (REPO / top).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def test_no_module_but_transitions_writes_a_status() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in python_files()
        if path not in OWNERS
        for line, what in status_writes(path.read_text())
    ]
    assert not offenders, "Only workflows/runtime/transitions*.py change statuses:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source",
    [
        "SQL = \"UPDATE workflows_noderun SET status = 'queued' WHERE id = 1\"",
        "SQL = f\"UPDATE workflows_run r SET finished_at = now(), status = '{R.FAILED}' WHERE r.id = 1\"",
        "SQL = \"INSERT INTO workflows_noderun (run_id, node_id, status) VALUES (1, 'a', 'pending')\"",
        "NodeRun.objects.filter(run=run).update(status=N.CANCELLED)",
        "SQL = \"UPDATE workflows_mapitem i SET status = 'queued' WHERE i.id = 1\"",
        "SQL = f\"UPDATE {NODES} n SET status = 'queued' WHERE n.id = 1\"",
        "SQL = f\"INSERT INTO {statements.ITEMS} (node_run_id, status) VALUES (1, 'pending')\"",
        "MapItem.objects.filter(pk=1).update(status=N.PENDING)",
        "run.nodes.filter(node_id='a').update(status=state)",
        "Run.objects.create(workflow=w, status='running')",
        "q.update(status=RunStatus.RUNNING)",
        "def f(run):\n    run.status, run.finished_at = 'cancelled', now\n    run.save()",
        "def f(node, s):\n    node.status = s\n    node.save(update_fields=['status'])",
    ],
)
def test_the_scan_finds_each_way_of_writing_a_status(source: str) -> None:
    assert status_writes(source), source


@pytest.mark.parametrize(
    "source",
    [
        "SQL = \"SELECT status FROM workflows_noderun WHERE status = 'queued'\"",
        "SQL = \"UPDATE workflows_noderun SET due_at = now() WHERE status = 'pending'\"",
        "SQL = \"UPDATE workflows_webhookdelivery SET status = 'pending'\"",
        "SQL = f\"UPDATE {DELIVERIES} SET status = 'pending'\"",
        "SQL = f\"UPDATE {NODES} n SET due_at = now() WHERE n.status = 'pending'\"",
        "WebhookDelivery.objects.filter(pk=1).update(status=WebhookDelivery.SENDING)",
        "def f(letter, status):\n    letter.status = status\n    letter.save()",
        "def f(locked):\n    locked.status = WorkflowVersion.PUBLISHED\n    locked.save()",
        "NodeRun.objects.filter(status=N.PENDING).count()",
    ],
)
def test_the_scan_leaves_reads_and_other_models_alone(source: str) -> None:
    assert not status_writes(source), source


# --------------------------------------------------------------------------- declared moves


def performed() -> dict[str, Move]:
    """The declared moves, once every module of the family is imported."""
    for name in MODULES:
        importlib.import_module(name)
    from workflows.runtime.lifecycle import PERFORMED

    return dict(PERFORMED)


def test_every_function_that_changes_a_status_declares_its_moves() -> None:
    writers = {
        node.name
        for path, name in zip(OWNERS, MODULES, strict=True)
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef)
        and (status_writes(ast.unparse(node)) or uses_a_write_constant(node, importlib.import_module(name)))
    }
    assert len(writers) > 30, f"the scan found only {writers} in the transitions modules: it is broken"
    assert writers <= performed().keys(), writers - performed().keys()


def uses_a_write_constant(func: ast.FunctionDef, module: object) -> bool:
    used = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and n.id.endswith("_SQL")}
    return any(pattern.search(getattr(module, name)) for name in used for pattern in SQL_WRITES)


def test_every_declared_move_is_in_the_table() -> None:
    moves = performed()
    assert moves
    for name, move in moves.items():
        assert move.is_in_table(), (name, move)


ENUMS = {"N": N, "R": R}


def resolved_source(func: object) -> str:
    """The function's source and the SQL constants it uses, with `{N.X}`, `N.X` and `{NODES}` spelled out."""
    from workflows.store import statements

    module = sys.modules[func.__module__]  # type: ignore[attr-defined]
    text = inspect.getsource(func)  # type: ignore[arg-type]
    for name in set(re.findall(r"\b[A-Z_]+_SQL\b", text)):
        text += getattr(module, name)
    text = re.sub(r"\{(NODES|RUNS|ITEMS)\}", lambda m: getattr(statements, m[1]), text)
    text = re.sub(r"\{(N|R)\.(\w+)\}", lambda m: ENUMS[m[1]][m[2]].value, text)
    return re.sub(r"\b(N|R)\.(\w+)", lambda m: f"'{ENUMS[m[1]][m[2]].value}'", text)


UPDATE = re.compile(
    r"UPDATE\s+workflows_(noderun|run|mapitem)\s+(\w+)\s+SET(.*?)\bWHERE\b(.*?)(?:\bRETURNING\b|$)", re.S
)


def test_the_statuses_each_statement_spells_are_its_declared_moves() -> None:
    """A statement's literal from-statuses (its WHERE) and to-statuses (its SET, an ORM update)
    are among the moves its function declares; statuses passed as parameters are checked by
    the function itself against the table (transitions.check_move)."""
    from workflows.runtime import transitions

    checked = 0
    for name, move in performed().items():
        text = resolved_source(getattr(transitions, name))
        declared = {"noderun": move.nodes, "run": move.runs, "mapitem": move.nodes}
        for table, alias, assignments, where in UPDATE.findall(text):
            sources = {str(s) for s, _ in declared[table]}
            targets = {str(t) for _, t in declared[table]}
            spelled_to = set(re.findall(r"\bstatus\s*=\s*'(\w+)'", assignments))
            spelled_from = set(re.findall(rf"\b{alias}\.status(?:\s*\|\|\s*'')?\s*=\s*'(\w+)'", where))
            assert spelled_to <= targets, (name, table, spelled_to, targets)
            assert spelled_from <= sources, (name, table, spelled_from, sources)
            checked += 1
        for model, targets_spelled in re.findall(
            r"\b(NodeRun|Run)\.objects\.[^\n]*?\.update\(\s*status='(\w+)'", text
        ):
            table = "noderun" if model == "NodeRun" else "run"
            assert targets_spelled in {str(t) for _, t in declared[table]}, (name, model, targets_spelled)
            checked += 1
    assert checked >= 12, f"only {checked} statements checked: the patterns no longer match the module"
