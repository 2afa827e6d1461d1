// A small DAG drawing for the dashboard's live graphs (run page, workflow live page), left to
// right, placed by the layout module the editor uses too (static/shared/layout.js): layers by
// longest path from a root, each ordered by one barycentre sweep. Every label is set through
// textContent, never as HTML.
import { gridPositions, rankLayers } from "../../shared/layout.js";

const NS = "http://www.w3.org/2000/svg";
const NODE_W = 200;
const NODE_H = 62;
const GAP_X = 70;
const GAP_Y = 22;
const PAD = 16;

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

// Where `graph`'s nodes go: {pos: Map(id -> {x, y}), width, height, layers}.
function layout(graph) {
  const ids = graph.nodes.map((n) => n.id);
  const layers = rankLayers(ids, graph.edges.map((e) => [e.source, e.target]), { barycentre: true });
  const { positions, width, height } = gridPositions(layers, {
    width: NODE_W, height: NODE_H, gapX: GAP_X, gapY: GAP_Y, margin: PAD, centre: true,
  });
  return { pos: positions, width, height, layers };
}

// An edge that skips layers goes around the nodes between, above or below them.
function edgePath(a, b, pos, layers) {
  const x1 = a.x + NODE_W;
  const y1 = a.y + NODE_H / 2;
  const x2 = b.x - 2;
  const y2 = b.y + NODE_H / 2;
  const from = Math.round((a.x - PAD) / (NODE_W + GAP_X));
  const to = Math.round((b.x - PAD) / (NODE_W + GAP_X));
  const between = layers.slice(from + 1, to).flat().map((id) => pos.get(id).y);
  if (!between.length) {
    const mid = (x1 + x2) / 2;
    return `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`;
  }
  const top = Math.min(...between) - GAP_Y / 2;
  const bottom = Math.max(...between) + NODE_H + GAP_Y / 2;
  const y = Math.abs(y1 - top) + Math.abs(y2 - top) <= Math.abs(y1 - bottom) + Math.abs(y2 - bottom) ? top : bottom;
  const xa = x1 + GAP_X / 2;
  const xb = x2 - GAP_X / 2;
  return `M${x1},${y1} C${xa},${y1} ${x1},${y} ${xa},${y} L${xb},${y} C${x2},${y} ${xb},${y2} ${x2},${y2}`;
}

// Draw `graph` into `container`; return {update(id, {cls, lines})}.
export function render(container, graph, onClick) {
  const { pos, width, height, layers } = layout(graph);
  container.replaceChildren();
  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "dag-svg", role: "img" }, container);
  svg.style.maxWidth = width + "px";
  const defs = el("defs", {}, svg);
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
  el("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrow" }, marker);
  for (const e of graph.edges) {
    const a = pos.get(e.source);
    const b = pos.get(e.target);
    if (!a || !b) continue;
    el("path", { d: edgePath(a, b, pos, layers), class: "dag-edge", "marker-end": "url(#arrow)" }, svg);
  }
  const nodes = {};
  for (const n of graph.nodes) {
    const p = pos.get(n.id);
    const g = el("g", { class: "dag-node", transform: `translate(${p.x},${p.y})`, tabindex: 0, "data-node": n.id }, svg);
    el("rect", { width: NODE_W, height: NODE_H, rx: 9 }, g);
    const title = el("text", { x: 12, y: 20, class: "dag-title" }, g);
    title.textContent = n.id.length > 24 ? n.id.slice(0, 23) + "…" : n.id;
    const lines = [el("text", { x: 12, y: 38, class: "dag-line" }, g), el("text", { x: 12, y: 53, class: "dag-line dim" }, g)];
    lines[0].textContent = n.handler || "";
    el("title", {}, g).textContent = n.id + (n.handler ? " (" + n.handler + ")" : "");
    if (onClick) {
      g.addEventListener("click", () => onClick(n.id));
      g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") onClick(n.id); });
    }
    nodes[n.id] = { g, lines };
  }
  return {
    update(id, cls, texts) {
      const node = nodes[id];
      if (!node) return;
      node.g.setAttribute("class", "dag-node " + (cls || ""));
      texts.forEach((t, i) => { if (node.lines[i]) node.lines[i].textContent = t; });
    },
    ids: Object.keys(nodes),
    layers,
  };
}

export function loadDetail(urlTemplate, id) {
  if (!window.htmx) return;
  window.htmx.ajax("GET", urlTemplate.replace("NODE", encodeURIComponent(id)), { target: "#node-detail", swap: "innerHTML" });
}
