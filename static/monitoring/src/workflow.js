// Live graph of a workflow's active version: per node, in flight now and the last 5 minutes.
import { loadDetail, render } from "./dag.js";

function startWorkflowGraph() {
  const box = document.getElementById("workflow-graph");
  const live = document.getElementById("live");
  if (!box) return;
  const graph = JSON.parse(document.getElementById("graph-data").textContent);
  const topic = live.dataset.topics;
  const dag = render(box, graph, (id) => loadDetail(box.dataset.nodeUrl, id));

  function ms(v) {
    if (v === null || v === undefined) return "–";
    if (v < 10) return v.toFixed(1) + " ms";
    return v < 1000 ? Math.round(v) + " ms" : (v / 1000).toFixed(1) + " s";
  }

  function draw(stats) {
    for (const id of dag.ids) {
      const s = (stats.nodes || {})[id] || { queued: 0, running: 0, retrying: 0, succeeded: 0, failed: 0 };
      const flying = `queued ${s.queued} · running ${s.running}` + (s.retrying ? ` · retry ${s.retrying}` : "");
      const recent = `✓ ${s.succeeded} ✗ ${s.failed} · p50 ${ms(s.p50_ms)} · p95 ${ms(s.p95_ms)}`;
      let cls = s.running ? "running" : s.queued ? "queued" : "";
      if (s.failed && !s.running) cls += " has-failures";
      dag.update(id, cls, [flying, recent]);
    }
  }

  draw(JSON.parse(document.getElementById("stats-data").textContent));
  document.addEventListener("sy:message", (event) => {
    if (event.detail.topic === topic) draw(event.detail.data);
  });
}

startWorkflowGraph();
