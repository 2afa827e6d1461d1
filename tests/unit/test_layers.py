"""The layers import one way (docs/architecture.md holds the table), with no package cycles.

Read from the source (ast), so the test needs no Django. Every `import` counts, including
those inside functions (a function-level import is still a dependency; it only hides a cycle
from Python), except those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("workflows", "monitoring", "controlplane")
ARCHITECTURE = REPO / "docs" / "architecture.md"


def layer_table() -> dict[str, tuple[int, str]]:
    """Read `docs/architecture.md`'s table: package prefix -> (rank, layer name)."""
    rows = re.findall(r"^\| (\w+) \| (.+?) \| .+ \|$", ARCHITECTURE.read_text(), re.M)
    table = {}
    for rank, (layer, packages) in enumerate(row for row in rows if row[0] != "layer"):
        for package in re.findall(r"`([\w.]+)`", packages):
            table[package] = (rank, layer)
    return table


LAYERS = layer_table()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            is_root = path == REPO / package / "__init__.py"  # empty: no layer of its own
            if "migrations" not in path.parts and not is_root:
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
        # The three top-level packages are empty: `from workflows import x` depends on x alone.
        graph[module] = {
            name for name in names if name in modules and name not in PACKAGES and name != module
        }
    return graph


def is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def package_of(module: str) -> str:
    """The most specific package of the table that holds the module."""
    matches = [prefix for prefix in LAYERS if is_under(module, prefix)]
    if not matches:
        raise AssertionError(f"{module} is in no layer: add its package to docs/architecture.md")
    return max(matches, key=len)


def layer_of(module: str) -> tuple[int, str]:
    return LAYERS[package_of(module)]


def upward_imports(layer: str) -> list[str]:
    graph = dependency_graph()
    return sorted(
        f"{module} ({layer_of(module)[1]}) imports {dep} ({layer_of(dep)[1]})"
        for module, deps in graph.items()
        if layer_of(module)[1] == layer
        for dep in deps
        if layer_of(dep)[0] > layer_of(module)[0]
    )


def test_the_table_names_the_five_layers_in_order() -> None:
    names = [name for _rank, name in sorted(set(LAYERS.values()))]
    assert names == ["core", "store", "runtime", "domain", "surfaces"]


def test_every_module_sits_in_a_layer() -> None:
    for module in project_modules():
        package_of(module)


@pytest.mark.parametrize("layer", ["core", "store", "runtime", "domain"])
def test_a_layer_imports_only_itself_and_the_layers_below(layer: str) -> None:
    wrong = upward_imports(layer)
    assert not wrong, f"{layer} imports upwards:\n" + "\n".join(wrong)


def test_core_imports_nothing_of_the_project_outside_the_core() -> None:
    wrong = [
        f"{module} imports {dep}"
        for module, deps in dependency_graph().items()
        if is_under(module, "workflows.core")
        for dep in deps
        if not is_under(dep, "workflows.core")
    ]
    assert not wrong, "the core must stay pure:\n" + "\n".join(sorted(wrong))


def test_packages_import_each_other_without_cycles() -> None:
    edges: dict[str, set[str]] = {}
    for module, deps in dependency_graph().items():
        edges.setdefault(package_of(module), set()).update(
            package_of(dep) for dep in deps if package_of(dep) != package_of(module)
        )
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"package cycle: {' -> '.join(exc.args[1])}") from None


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


def test_the_layer_test_fails_on_an_upward_import() -> None:
    assert layer_of("workflows.runtime.kinds")[0] < layer_of("workflows.runs.actions")[0]
