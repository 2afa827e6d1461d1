// A run's page: DAG coloured by node state and a trace timeline (one bar per attempt) that
// grows while the run is in flight. State comes with the page, then from the websocket.
(function () {
  "use strict";
  const box = document.getElementById("run-graph");
  const timeline = document.getElementById("run-timeline");
  const live = document.getElementById("live");
  if (!box || !window.SyDag) return;
  const NS = "http://www.w3.org/2000/svg";
  const graph = JSON.parse(document.getElementById("graph-data").textContent);
  const topic = live.dataset.topics;
  let state = JSON.parse(document.getElementById("run-data").textContent);
  const dag = window.SyDag.render(box, graph, (id) => window.SyDag.loadDetail(box.dataset.nodeUrl, id));
  const rowOrder = dag.layers.flat();

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }

  function drawGraph() {
    for (const id of dag.ids) {
      const n = state.nodes[id] || { status: "pending", attempt: 0 };
      const items = n.items ? `items ${n.items.done} done · ${n.items.failed} failed / ${n.items.total}` : "";
      dag.update(id, n.status, [n.status.replace("_", " ") + (n.attempt ? ` · attempt ${n.attempt}` : ""), items]);
      box.querySelector(`[data-node="${CSS.escape(id)}"]`).dataset.status = n.status;
    }
  }

  function drawTimeline() {
    const now = Date.now() / 1000;
    const start = state.run.created;
    const bars = state.spans.map((s) => ({ node: s.node, start: s.start, end: s.end, cls: s.status, label: `${s.node} #${s.attempt}` }));
    for (const [id, n] of Object.entries(state.nodes)) {
      if (n.status === "running" && n.started) bars.push({ node: id, start: n.started, end: now, cls: "running", label: `${id} #${n.attempt} (running)` });
    }
    const end = Math.max(state.run.finished || now, ...bars.map((b) => b.end), start + 0.001);
    // Compensation steps (`<node>~compensate`) are not in the graph: their rows come last.
    const steps = Object.keys(state.nodes).filter((id) => !rowOrder.includes(id));
    const rows = rowOrder.concat(steps).filter((id) => bars.some((b) => b.node === id));
    const W = 1000;
    const LABEL = 170;
    const ROW = 24;
    const H = 30 + rows.length * ROW;
    timeline.replaceChildren();
    if (!rows.length) {
      timeline.textContent = "No attempt has started yet.";
      return;
    }
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "timeline-svg" }, timeline);
    const x = (t) => LABEL + ((t - start) / (end - start)) * (W - LABEL - 10);
    for (let i = 0; i <= 4; i++) {
      const t = start + ((end - start) * i) / 4;
      el("line", { x1: x(t), x2: x(t), y1: 18, y2: H, class: "tl-grid" }, svg);
      el("text", { x: x(t), y: 12, class: "tl-tick", "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle" }, svg).textContent = ((t - start) * 1000 < 10000 ? Math.round((t - start) * 1000) + " ms" : (t - start).toFixed(1) + " s");
    }
    rows.forEach((id, i) => {
      const y = 22 + i * ROW;
      el("text", { x: 4, y: y + 14, class: "tl-label" }, svg).textContent = id.length > 22 ? id.slice(0, 21) + "…" : id;
      for (const b of bars.filter((b) => b.node === id)) {
        const r = el("rect", { x: x(b.start), y, width: Math.max(2, x(b.end) - x(b.start)), height: ROW - 6, rx: 3, class: "tl-bar " + b.cls }, svg);
        el("title", {}, r).textContent = `${b.label}: ${Math.round((b.end - b.start) * 1000)} ms, ${b.cls}`;
      }
    });
  }

  function draw() {
    drawGraph();
    drawTimeline();
    const cancel = document.getElementById("run-cancel");
    if (cancel) cancel.hidden = !["running", "waiting"].includes(state.run.status);
  }

  document.addEventListener("sy:message", (event) => {
    const msg = event.detail;
    if (msg.topic !== topic) return;
    const spans = msg.data.reset ? msg.data.spans : state.spans.concat(msg.data.spans);
    state = { run: msg.data.run, nodes: msg.data.nodes, spans };
    draw();
  });
  // Running bars grow between messages.
  setInterval(() => {
    if (Object.values(state.nodes).some((n) => n.status === "running")) drawTimeline();
  }, 250);
  draw();
})();
