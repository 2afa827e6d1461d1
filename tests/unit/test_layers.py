"""The layers import one way: core <- store <- domain and runtime <- surfaces, with no cycles.

Read from the source (ast), so the test needs no Django. Every `import` counts, including
those inside functions (a function-level import is still a dependency; it only hides a cycle
from Python), except those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("workflows", "monitoring", "controlplane")
# The surfaces: what people and other programs talk to. Nothing below them imports them.
SURFACES = (
    "workflows.api",
    "workflows.pages",
    "workflows.admin",
    "workflows.management",
    "monitoring.views",
    "monitoring.consumers",
    "monitoring.urls",
    "monitoring.routing",
    "monitoring.management",
    "controlplane.urls",
    "controlplane.asgi",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[module_name(path)] = path
    return found


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Return every dotted name the module imports (`from a import b` gives `a` and `a.b`)."""
    names: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if is_type_checking_block(node):
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(node, module, is_package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names


def resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def dependency_graph() -> dict[str, set[str]]:
    modules = project_modules()
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        names = imported_names(tree, module, path.name == "__init__.py")
        graph[module] = {name for name in names if name in modules and name != module}
    return graph


def is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def is_surface(module: str) -> bool:
    return any(is_under(module, surface) for surface in SURFACES)


def test_core_imports_nothing_of_the_project_outside_the_core() -> None:
    wrong = [
        f"{module} imports {dep}"
        for module, deps in dependency_graph().items()
        if is_under(module, "workflows.core")
        for dep in deps
        if not is_under(dep, "workflows.core")
    ]
    assert not wrong, "the core must stay pure:\n" + "\n".join(sorted(wrong))


def test_store_imports_only_the_core() -> None:
    deps = dependency_graph()["workflows.models"]
    wrong = sorted(dep for dep in deps if not is_under(dep, "workflows.core"))
    assert not wrong, f"workflows.models may import only the core, not {wrong}"


def test_nothing_below_the_surfaces_imports_a_surface() -> None:
    wrong = [
        f"{module} imports {dep}"
        for module, deps in dependency_graph().items()
        if not is_surface(module)
        for dep in deps
        if is_surface(dep)
    ]
    assert not wrong, "imports must flow towards the surfaces:\n" + "\n".join(sorted(wrong))


def test_project_has_no_import_cycles() -> None:
    graph = dependency_graph()
    # A package's __init__ that only re-exports is not a dependency of its own modules.
    edges = {m: {d for d in deps if not is_under(m, d)} for m, deps in graph.items()}
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_layer_test_sees_imports_inside_functions() -> None:
    tree = ast.parse("def f():\n    from workflows.runtime import bus\n")
    assert "workflows.runtime.bus" in imported_names(tree, "workflows.x", is_package=False)
