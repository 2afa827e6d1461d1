"""The graph exports (core/graphexport.py): Mermaid and DOT text, labels escaped so that what
an author typed (quotes, newlines, brackets, #, |, <, >, backslashes) comes back unchanged."""

from __future__ import annotations

import re
from typing import Any

import pytest

from workflows.core.graphexport import export_graph, to_dot, to_mermaid

NASTY = 'say "hi" [now] {x} (y) <b> a|b #1 `c` back\\slash\nsecond line'
DEFINITION: dict[str, Any] = {
    "nodes": [
        {"id": "fetch", "handler": "http.request"},
        {"id": "think", "handler": "llm.agent"},
        {"id": "approve", "handler": "human.approval", "join": "any_success"},
        {"id": "each", "handler": "core.echo", "map": "output.items"},
        {"id": "child", "handler": "workflow.run"},
        {"id": "end", "handler": "core.noop"},
    ],
    "edges": [
        {"source": "fetch", "target": "think", "when": 'output.status == "ok"'},
        {"source": "think", "target": "approve"},
        {"source": "approve", "target": "each", "when": NASTY},
        {"source": "each", "target": "child"},
        {"source": "child", "target": "end"},
    ],
}

# --- a small reader of the DOT this module writes: statements of quoted strings ---------------

DOT_TOKEN = re.compile(
    r'"((?:[^"\\]|\\.)*)"|(->|[\[\]=,;{}])|([A-Za-z_][A-Za-z0-9_.]*|-?[0-9]+(?:[.][0-9]+)?)|(\s+)'
)


def dot_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) tokens; a quoted string unescaped as Graphviz reads it (\\n is a newline here)."""
    tokens, at = [], 0
    while at < len(text):
        match = DOT_TOKEN.match(text, at)
        assert match is not None, f"DOT does not tokenize at {text[at : at + 30]!r}"
        quoted, punct, word, _ = match.groups()
        if quoted is not None:
            tokens.append(("str", re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], quoted)))
        elif punct is not None:
            tokens.append(("p", punct))
        elif word is not None:
            tokens.append(("id", word))
        at = match.end()
    return tokens


def dot_statements(text: str) -> list[list[tuple[str, str]]]:
    tokens = dot_tokens(text)
    assert tokens[:3] == [("id", "digraph"), ("str", "demo v2"), ("p", "{")] and tokens[-1] == ("p", "}")
    statements, current = [], []
    for token in tokens[3:-1]:
        if token == ("p", ";"):
            statements.append(current)
            current = []
        else:
            current.append(token)
    assert current == [], "every statement ends with ;"
    return statements


def attributes(tokens: list[tuple[str, str]]) -> dict[str, str]:
    inside = tokens[tokens.index(("p", "[")) + 1 : -1]
    pairs = [inside[i : i + 3] for i in range(0, len(inside), 4)]  # name = value [,]
    return {name[1]: value[1] for name, _, value in pairs}


def test_dot_parses_back_to_every_node_with_its_kind_and_every_edge_with_its_condition() -> None:
    statements = dot_statements(to_dot(DEFINITION, "demo v2"))
    nodes = {s[0][1]: attributes(s) for s in statements if s[0][0] == "str" and s[1] == ("p", "[")}
    edges = [s for s in statements if len(s) > 1 and s[1] == ("p", "->")]
    assert list(nodes) == ["fetch", "think", "approve", "each", "child", "end"]
    assert nodes["fetch"] == {"label": "fetch\ntask: http.request", "shape": "box"}
    assert nodes["think"]["shape"] == "hexagon" and nodes["think"]["label"].endswith("agent: llm.agent")
    assert nodes["approve"]["label"] == "approve\nwait: human.approval\njoin: any_success"
    assert nodes["each"]["label"] == "each\nmap: core.echo\nover output.items"
    assert nodes["child"]["shape"] == "box3d"
    pairs = [(e[0][1], e[2][1], attributes(e).get("label") if len(e) > 3 else None) for e in edges]
    assert pairs == [
        ("fetch", "think", 'output.status == "ok"'),
        ("think", "approve", None),
        ("approve", "each", NASTY),  # quotes, backslash and newline come back exactly
        ("each", "child", None),
        ("child", "end", None),
    ]


def test_dot_escapes_quotes_backslashes_and_newlines_and_nothing_else() -> None:
    text = to_dot({"nodes": [], "edges": [{"source": 'a"b', "target": "c\\d", "when": "x\ny"}]})
    assert '"a\\"b" -> "c\\\\d" [label="x\\ny"];' in text


MERMAID_ENTITY = re.compile(r"#(quot|lt|gt|\d+);")


def mermaid_decoded(label: str) -> str:
    named = {"quot": '"', "lt": "<", "gt": ">"}
    text = label.replace("<br/>", "\n")
    return MERMAID_ENTITY.sub(lambda m: named.get(m[1]) or chr(int(m[1])), text)


def test_mermaid_labels_hold_no_raw_quote_pipe_or_angle_and_decode_to_what_was_typed() -> None:
    text = to_mermaid(DEFINITION, "demo v2")
    lines = text.splitlines()
    assert lines[:2] == ["%% demo v2", "flowchart TD"]
    edge = next(line for line in lines if line.strip().startswith("n2 -->"))
    label = re.fullmatch(r'\s*n2 -->\|"(.*)"\| n3', edge)
    assert label is not None, edge
    raw = label[1].replace("<br/>", "")  # the one markup a label holds: its line breaks
    assert not set(raw) & set('"|<>`\n'), raw
    assert mermaid_decoded(label[1]) == NASTY


def test_mermaid_shows_each_kind_in_its_shape_and_ids_no_keyword_can_break() -> None:
    lines = to_mermaid(DEFINITION).splitlines()
    assert '    n0["fetch<br/>task: http.request"]' in lines
    assert '    n1{{"think<br/>agent: llm.agent"}}' in lines
    assert '    n2(["approve<br/>wait: human.approval<br/>join: any_success"])' in lines
    assert '    n3[/"each<br/>map: core.echo<br/>over output.items"/]' in lines
    assert '    n4[["child<br/>child run: workflow.run"]]' in lines
    assert '    n5["end<br/>task: core.noop"]' in lines  # "end" would close a subgraph as an id
    assert "    class n1 agent" in lines and "    classDef agent fill:#efeafd,stroke:#6a4fc8" in lines


def test_a_draft_with_broken_parts_still_exports_what_it_has() -> None:
    draft = {
        "nodes": [{"id": "a", "handler": "core.noop"}, {"handler": "no id"}, "junk"],
        "edges": [{"source": "a", "target": "gone"}, {"source": 1}],
    }
    assert to_mermaid(draft).splitlines()[2] == '    n0 --> m1["gone"]'
    assert '"a" -> "gone";' in to_dot(draft)


def test_an_unknown_format_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="format: give one of mermaid, dot; got 'png'"):
        export_graph(DEFINITION, "png")
