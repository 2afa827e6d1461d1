// A small DAG drawing for the dashboard: layered by topological depth, left to right.
//
// Layout: each node's layer is its longest distance from a root; within a layer nodes are
// ordered by the mean position of their predecessors (one barycentre sweep), which keeps
// most edges short and uncrossed on the graphs people draw. Every label is set through
// textContent, never as HTML.
(function () {
  "use strict";
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

  function layout(graph) {
    const ids = graph.nodes.map((n) => n.id);
    const preds = Object.fromEntries(ids.map((id) => [id, []]));
    const succs = Object.fromEntries(ids.map((id) => [id, []]));
    for (const e of graph.edges) {
      if (preds[e.target] && succs[e.source]) {
        preds[e.target].push(e.source);
        succs[e.source].push(e.target);
      }
    }
    const depth = {};
    const indegree = Object.fromEntries(ids.map((id) => [id, preds[id].length]));
    const queue = ids.filter((id) => indegree[id] === 0);
    for (const id of queue) depth[id] = 0;
    while (queue.length) {
      const id = queue.shift();
      for (const next of succs[id]) {
        depth[next] = Math.max(depth[next] || 0, depth[id] + 1);
        if (--indegree[next] === 0) queue.push(next);
      }
    }
    const layers = [];
    for (const id of ids) (layers[depth[id] || 0] = layers[depth[id] || 0] || []).push(id);
    const order = {};
    layers.forEach((layer, li) => {
      if (li > 0) {
        const centre = (id) => {
          const ps = preds[id].filter((p) => p in order);
          return ps.length ? ps.reduce((s, p) => s + order[p], 0) / ps.length : 0;
        };
        layer.sort((a, b) => centre(a) - centre(b));
      }
      layer.forEach((id, i) => (order[id] = i));
    });
    const tallest = Math.max(1, ...layers.map((l) => l.length));
    const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y;
    const pos = {};
    layers.forEach((layer, li) => {
      const span = layer.length * NODE_H + (layer.length - 1) * GAP_Y;
      const top = (height - span) / 2;
      layer.forEach((id, i) => (pos[id] = { x: PAD + li * (NODE_W + GAP_X), y: top + i * (NODE_H + GAP_Y) }));
    });
    const width = PAD * 2 + layers.length * NODE_W + Math.max(0, layers.length - 1) * GAP_X;
    return { pos, width, height, layers };
  }

  // An edge that skips layers goes around the nodes between, above or below them.
  function edgePath(a, b, pos, layers) {
    const x1 = a.x + NODE_W;
    const y1 = a.y + NODE_H / 2;
    const x2 = b.x - 2;
    const y2 = b.y + NODE_H / 2;
    const from = Math.round((a.x - PAD) / (NODE_W + GAP_X));
    const to = Math.round((b.x - PAD) / (NODE_W + GAP_X));
    const between = layers.slice(from + 1, to).flat().map((id) => pos[id].y);
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
  function render(container, graph, onClick) {
    const { pos, width, height, layers } = layout(graph);
    container.replaceChildren();
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "dag-svg", role: "img" }, container);
    svg.style.maxWidth = width + "px";
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrow" }, marker);
    for (const e of graph.edges) {
      const a = pos[e.source];
      const b = pos[e.target];
      if (!a || !b) continue;
      el("path", { d: edgePath(a, b, pos, layers), class: "dag-edge", "marker-end": "url(#arrow)" }, svg);
    }
    const nodes = {};
    for (const n of graph.nodes) {
      const p = pos[n.id];
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
      layers: layout(graph).layers,
    };
  }

  function loadDetail(urlTemplate, id) {
    if (!window.htmx) return;
    window.htmx.ajax("GET", urlTemplate.replace("NODE", encodeURIComponent(id)), { target: "#node-detail", swap: "innerHTML" });
  }

  window.SyDag = { layout, render, loadDetail };
})();
