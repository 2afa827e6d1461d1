"""Write the reference pages (node kinds, settings, API) into docs/reference/ from the code.

Run by `make docs` before `mkdocs build`; the pages it writes are not in git. It imports
three things of ours, named here so that a move is one line to change: the handler registry
(through Django's setup, which loads the handler modules), the settings file (read as text
and parsed, never imported for its values) and the API's OpenAPI document.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference"
SETTINGS_FILE = ROOT / "controlplane" / "settings.py"
REGISTRY_MODULE = "workflows.handlers.registry"
API_MODULE = "workflows.api.api"  # its document() is the OpenAPI document as served
ENV_READERS = {"env_str", "env_int", "env_float", "env_bool"}
METHODS = ("get", "post", "put", "patch", "delete")


def main() -> None:
    """Set Django up (nothing connects at import) and write the three pages."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    OUT.mkdir(parents=True, exist_ok=True)
    write("node-kinds.md", node_kinds_page())
    write("settings.md", settings_page(SETTINGS_FILE.read_text()))
    write("api.md", api_page())


def write(name: str, text: str) -> None:
    (OUT / name).write_text(text)
    print(f"docs/reference/{name}: {len(text.splitlines())} lines")


# Node kinds ---------------------------------------------------------------------------------


def node_kinds_page() -> str:
    """Render every registered handler: its docstring, traits and config schema."""
    registry = __import__(REGISTRY_MODULE, fromlist=["registered"])
    handlers = registry.registered()
    lines = [
        "# Node kinds",
        "",
        "Generated from the handler registry (`workflows/handlers/registry.py`) with the",
        "handler modules `make run` loads. A node's `handler` names one of these; its `config`",
        "must match the schema shown (the editor draws its form from the same schema).",
        "",
        "| handler | summary | batchable | agent tool |",
        "|---|---|---|---|",
    ]
    for name, h in handlers.items():
        tool = f"yes ({h.tool.timeout_seconds:g} s, {h.tool.max_attempts} tries)" if h.tool else ""
        lines.append(
            f"| [`{name}`](#{anchor(name)}) | {cell(h.summary())} | {'yes' if h.batchable else ''} | {tool} |"
        )
    for name, h in handlers.items():
        lines += ["", f"## `{name}` {{#{anchor(name)}}}", "", h.doc.strip(), ""]
        lines.append(f"Defined in `{h.origin}`.")
        schema = h.config_schema
        lines += ["", "Config schema:" if schema else "No config.", ""]
        if schema:
            lines += ["```json", json.dumps(schema, indent=2, sort_keys=False), "```"]
    return "\n".join(lines) + "\n"


def anchor(name: str) -> str:
    return name.replace(".", "-").replace("_", "-")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Settings -----------------------------------------------------------------------------------


def settings_page(source: str) -> str:
    """Render every environment variable settings.py reads: name, default, where, why."""
    lines = [
        "# Settings",
        "",
        "Generated from `controlplane/settings.py`, the only module that reads the environment:",
        "each `env_str`/`env_int`/`env_float`/`env_bool` call, its default, the setting it",
        "fills, and the comment written beside it. The variables `make run` itself reads",
        "(`PORT`, `WORKERS`, ...) are in [Configuration](../production/configuration.md).",
        "",
        "| variable | type | default | setting | description |",
        "|---|---|---|---|---|",
    ]
    for row in env_reads(source):
        name, kind, default, target, doc = row
        lines.append(f"| `{name}` | {kind} | {default} | `{target}` | {cell(doc)} |")
    return "\n".join(lines) + "\n"


def env_reads(source: str) -> list[tuple[str, str, str, str, str]]:
    """Return (variable, type, default, setting, comment) for each env_* call, in file order."""
    tree = ast.parse(source)
    text = source.splitlines()
    constants = module_constants(tree)
    rows = []
    for _stmt, target, anchor_line, call in env_calls(tree):
        name = ast.literal_eval(call.args[0])
        default = default_of(call, constants)
        assert isinstance(call.func, ast.Name)  # calls_in keeps only env_* names
        kind = call.func.id.removeprefix("env_")
        rows.append((name, kind, default, target, comment_above(text, anchor_line)))
    return rows


def env_calls(tree: ast.Module) -> list[tuple[ast.stmt, str, int, ast.Call]]:
    """Find env_* calls with the setting they fill and the line their comment sits above."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            continue
        if isinstance(stmt, ast.Assign):
            target = ast.unparse(stmt.targets[0])
        elif isinstance(stmt, ast.AnnAssign):  # SWITCHYARD: SwitchyardSettings = {...}
            target = ast.unparse(stmt.target)
        else:
            target = ""
        for node in ast.walk(stmt):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    for call in calls_in(value):
                        key_text = ast.literal_eval(key) if key is not None else "?"
                        found.append(
                            (stmt, f'{target}["{key_text}"]', key.lineno if key else call.lineno, call)
                        )
        seen = {id(c) for _, _, _, c in found}
        for call in calls_in(stmt):
            if id(call) not in seen:
                found.append((stmt, target, stmt.lineno, call))
    found.sort(key=lambda item: (item[3].lineno, item[3].col_offset))
    unique: dict[int, tuple[ast.stmt, str, int, ast.Call]] = {}
    for item in found:
        unique.setdefault(id(item[3]), item)  # a call inside nested dicts: the innermost key first
    return list(unique.values())


def calls_in(node: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ENV_READERS
    ]


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """Return the module's NAME = <literal> assignments (DEV_SECRET_KEY), for defaults."""
    found = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            try:
                found[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except ValueError:
                continue
    return found


def default_of(call: ast.Call, constants: dict[str, Any]) -> str:
    if len(call.args) < 2:
        return "required"
    expr = call.args[1]
    try:
        # Literals and arithmetic on them (256 * 1024); any other name fails and is shown as written.
        value = eval(compile(ast.Expression(expr), "<default>", "eval"), {"__builtins__": {}}, constants)
    except NameError:
        return f"`{ast.unparse(expr)}`"
    return f"`{value!r}`" if value != "" else "empty"


def comment_above(text: list[str], lineno: int) -> str:
    """Join the comment lines right above line `lineno` (1-based) and its own trailing comment."""
    parts: list[str] = []
    i = lineno - 2
    while i >= 0 and text[i].strip().startswith("#"):
        parts.insert(0, text[i].strip().lstrip("#").strip())
        i -= 1
    own = text[lineno - 1]
    if "  # " in own:
        parts.append(own.split("  # ", 1)[1].strip())
    return " ".join(parts)


# API ----------------------------------------------------------------------------------------


def api_page() -> str:
    """Render the operations of the OpenAPI document, grouped by tag."""
    doc: dict[str, Any] = __import__(API_MODULE, fromlist=["document"]).document()
    info = doc.get("info", {})
    lines = [
        "# API",
        "",
        f"Generated from the OpenAPI document ({info.get('title', 'API')} {info.get('version', '')}),",
        "as a running server serves it at `/api/v1/openapi.json` (Swagger UI at `/api/v1/docs`).",
        "Refusals are problem documents (`application/problem+json`). See",
        "[The REST API](../integrators/api.md) for keys, idempotency and webhooks.",
    ]
    lines += refusal_table(doc)
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    for tag, ops in by_tag.items():
        lines += ["", f"## {tag}"]
        for method, path, op in ops:
            lines += operation(method, path, op)
    lines += ["", "## Schemas", "", "The request and response bodies' schemas, by name:", ""]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        lines += ["", f"### {name}", "", "```json", json.dumps(schema, indent=2), "```"]
    return "\n".join(lines) + "\n"


def operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = ["", f"### `{method.upper()} {path}`", ""]
    lines.append(f"`{op.get('operationId', '')}`: {op.get('summary', '')}".rstrip(": "))
    if op.get("description"):
        lines += ["", op["description"].strip()]
    params = op.get("parameters", [])
    if params:
        lines += ["", "| parameter | in | required | type | description |", "|---|---|---|---|---|"]
        for p in params:
            kind = schema_label(p.get("schema", {}))
            desc = cell(p.get("description", "") or p.get("schema", {}).get("description", ""))
            lines.append(
                f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else ''} | {kind} | {desc} |"
            )
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += ["", f"Body ({media}): {schema_label(content.get('schema', {}))}"]
    answers = {s: r for s, r in op.get("responses", {}).items() if not is_problem(r)}
    if answers:
        lines += ["", "| status | description | body |", "|---|---|---|"]
        for status, resp in answers.items():
            content = resp.get("content", {})
            shown = ", ".join(f"{schema_label(c.get('schema', {}))} ({m})" for m, c in content.items())
            lines.append(f"| {status} | {cell(resp.get('description', ''))} | {shown} |")
    refusals = [s for s, r in op.get("responses", {}).items() if is_problem(r)]
    if refusals:
        lines += ["", "Refusals ([problems](#refusals)): " + ", ".join(refusals)]
    return lines


def is_problem(response: dict[str, Any]) -> bool:
    return list(response.get("content", {})) == ["application/problem+json"]


def refusal_table(doc: dict[str, Any]) -> list[str]:
    """Describe each problem status once (its most common description across operations)."""
    seen: dict[str, dict[str, int]] = {}
    for item in doc.get("paths", {}).values():
        for method in METHODS:
            for status, resp in item.get(method, {}).get("responses", {}).items():
                if is_problem(resp):
                    counts = seen.setdefault(status, {})
                    counts[resp.get("description", "")] = counts.get(resp.get("description", ""), 0) + 1
    lines = ["", "## Refusals", "", "| status | meaning |", "|---|---|"]
    for status in sorted(seen):
        lines.append(f"| {status} | {cell(max(seen[status], key=seen[status].__getitem__))} |")
    return lines


def schema_label(schema: dict[str, Any]) -> str:
    """Name a schema briefly: its component (linked), its type, or its alternatives."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(schema_label(s) for s in schema[key])
    if schema.get("type") == "array":
        return f"array of {schema_label(schema.get('items', {}))}"
    return str(schema.get("type", "any"))


if __name__ == "__main__":
    main()
