"""A workflow's graph as text for other tools: Mermaid flowcharts and Graphviz DOT.

Pure: reads a definition's JSON (a draft's too, valid or not: a node without a string id is
left out, an edge to a node that is not there is drawn to it all the same, as DOT and
Mermaid both allow), returns the text. Each node shows its id, its kind and its handler (and
a map's list expression, a join rule other than the default); each node kind has its own
shape; an edge with a `when` condition carries it as its label.

Escaping, the part that must be right (labels hold what authors type: quotes, newlines,
brackets, `#`, `|`, `<`):
- Mermaid: every label is a quoted string, in which `"` cannot be escaped with a backslash;
  Mermaid's entity codes are used instead (`#quot;`, `#35;` for `#` itself, `#lt;`, `#gt;`,
  `#124;`, `#96;`), and a newline is `<br/>`. Node ids are `n0, n1, ...` (an id like `end`
  or `graph` would end the chart), the real id in the label.
- DOT: ids and labels are double-quoted strings: `\\` and `"` escaped with a backslash, a
  newline is `\\n` (centred line break); nothing else needs escaping in a quoted string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows.core.graph import AGENT, CHILD, DEFAULT_JOIN, WAIT_KINDS

FORMATS = ("mermaid", "dot")
MAX_LABEL_CHARS = 200  # of a condition or a map expression: a label, not a listing

# What people call each kind, and the shapes that tell them apart.
KIND_NAMES = {"task": "task", "agent": "agent", "wait": "wait", "map": "map", "child": "child run"}
MERMAID_SHAPES = {
    "task": ('["', '"]'),
    "agent": ('{{"', '"}}'),
    "wait": ('(["', '"])'),
    "map": ('[/"', '"/]'),
    "child": ('[["', '"]]'),
}
DOT_SHAPES = {"task": "box", "agent": "hexagon", "wait": "ellipse", "map": "parallelogram", "child": "box3d"}
MERMAID_STYLES = {
    "task": "fill:#f4f6fa,stroke:#5b6b82",
    "agent": "fill:#efeafd,stroke:#6a4fc8",
    "wait": "fill:#fff6e0,stroke:#b7791f",
    "map": "fill:#e8f6ef,stroke:#2f855a",
    "child": "fill:#e6f2fb,stroke:#2b6cb0",
}
MERMAID_ESCAPES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "|": "#124;", "`": "#96;"}


@dataclass(frozen=True)
class ExportNode:
    id: str
    kind: str
    handler: str
    details: tuple[str, ...] = ()

    @property
    def lines(self) -> list[str]:
        return [self.id, f"{KIND_NAMES[self.kind]}: {self.handler}", *self.details]


@dataclass(frozen=True)
class ExportEdge:
    source: str
    target: str
    when: str | None = None


def kind_of(spec: Mapping[str, Any]) -> str:
    """A node's kind as the engine decides it (core/graph.py), for drawing."""
    handler = spec.get("handler")
    if handler == AGENT:
        return "agent"
    if handler in WAIT_KINDS:
        return "wait"
    if handler == CHILD:
        return "child"
    if spec.get("map"):
        return "map"
    return "task"


def cut(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def read_nodes(definition: Mapping[str, Any]) -> list[ExportNode]:
    found = []
    for spec in definition.get("nodes") or ():
        if not isinstance(spec, Mapping) or not isinstance(spec.get("id"), str):
            continue
        details = []
        if spec.get("map"):
            details.append(f"over {cut(str(spec['map']))}")
        if spec.get("join") and spec["join"] != DEFAULT_JOIN:
            details.append(f"join: {spec['join']}")
        found.append(ExportNode(spec["id"], kind_of(spec), str(spec.get("handler") or "?"), tuple(details)))
    return found


def read_edges(definition: Mapping[str, Any]) -> list[ExportEdge]:
    found = []
    for spec in definition.get("edges") or ():
        if not isinstance(spec, Mapping):
            continue
        source, target, when = spec.get("source"), spec.get("target"), spec.get("when")
        if isinstance(source, str) and isinstance(target, str):
            found.append(ExportEdge(source, target, cut(when) if isinstance(when, str) and when else None))
    return found


# --- Mermaid --------------------------------------------------------------------------------


def mermaid_text(text: str) -> str:
    """A label's text inside Mermaid's double quotes: entity codes, newlines as <br/>."""
    escaped = "".join(MERMAID_ESCAPES.get(c, c) for c in text)
    return escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br/>")


def to_mermaid(definition: Mapping[str, Any], title: str = "") -> str:
    """The graph as a Mermaid flowchart (top to bottom)."""
    nodes = read_nodes(definition)
    ids = {node.id: f"n{n}" for n, node in enumerate(nodes)}
    lines = [f"%% {' '.join(title.split())}"] if title else []  # a comment: one line, whatever it holds
    lines.append("flowchart TD")
    for node in nodes:
        opening, closing = MERMAID_SHAPES[node.kind]
        label = "<br/>".join(mermaid_text(line) for line in node.lines)
        lines.append(f"    {ids[node.id]}{opening}{label}{closing}")
    for edge in read_edges(definition):
        source, target = mermaid_id(edge.source, ids), mermaid_id(edge.target, ids)
        label = f'|"{mermaid_text(edge.when)}"|' if edge.when else ""
        lines.append(f"    {source} -->{label} {target}")
    for kind, style in MERMAID_STYLES.items():
        members = [ids[node.id] for node in nodes if node.kind == kind]
        if members:
            lines.append(f"    classDef {kind} {style}")
            lines.append(f"    class {','.join(members)} {kind}")
    return "\n".join(lines) + "\n"


def mermaid_id(node_id: str, ids: dict[str, str]) -> str:
    """The chart id of a node; an edge's end that is no node gets one of its own, labelled."""
    if node_id not in ids:
        ids[node_id] = f'm{len(ids)}["{mermaid_text(node_id)}"]'
        return ids[node_id]
    return ids[node_id].split("[", 1)[0]


# --- Graphviz DOT ---------------------------------------------------------------------------


def dot_string(text: str) -> str:
    """A DOT double-quoted string: backslash and quote escaped, newlines as \\n."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n") + '"'


def to_dot(definition: Mapping[str, Any], title: str = "") -> str:
    """The graph as a Graphviz digraph (top to bottom)."""
    lines = [f"digraph {dot_string(title or 'workflow')} {{", "    rankdir=TB;"]
    lines.append('    node [fontname="Helvetica", fontsize=11];')
    lines.append('    edge [fontname="Helvetica", fontsize=10];')
    for node in read_nodes(definition):
        label = dot_string("\n".join(node.lines))
        lines.append(f"    {dot_string(node.id)} [label={label}, shape={DOT_SHAPES[node.kind]}];")
    for edge in read_edges(definition):
        attributes = f" [label={dot_string(edge.when)}]" if edge.when else ""
        lines.append(f"    {dot_string(edge.source)} -> {dot_string(edge.target)}{attributes};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def export_graph(definition: Mapping[str, Any], fmt: str, title: str = "") -> str:
    """The graph in one of FORMATS; ValueError naming the format otherwise."""
    if fmt == "mermaid":
        return to_mermaid(definition, title)
    if fmt == "dot":
        return to_dot(definition, title)
    raise ValueError(f"format: give one of {', '.join(FORMATS)}; got {fmt[:40]!r}.")
