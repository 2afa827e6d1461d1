// A run's page: DAG coloured by node state and a trace timeline (one bar per attempt) that
// grows while the run is in flight. State comes with the page, then from the websocket.
(function () {
  "use strict";
  const box = document.getElementById("run-graph");
  const timeline = document.getElementById("run-timeline");
  const live = document.getElementById("live");
  if (!box || !window.SyDag || !window.SyTrace) return;
  const graph = JSON.parse(document.getElementById("graph-data").textContent);
  const topic = live.dataset.topics;
  let state = JSON.parse(document.getElementById("run-data").textContent);
  const dag = window.SyDag.render(box, graph, (id) => window.SyDag.loadDetail(box.dataset.nodeUrl, id));
  const rowOrder = dag.layers.flat();

  function drawGraph() {
    for (const id of dag.ids) {
      const n = state.nodes[id] || { status: "pending", attempt: 0 };
      dag.update(id, n.status, [n.status.replace("_", " ") + (n.attempt ? ` · attempt ${n.attempt}` : ""), ""]);
      box.querySelector(`[data-node="${CSS.escape(id)}"]`).dataset.status = n.status;
    }
  }

  let zoom = 1;
  function drawTimeline() {
    const scroll = timeline.scrollLeft;
    window.SyTrace.draw(timeline, state, graph, rowOrder, zoom);
    timeline.scrollLeft = scroll;
  }

  for (const button of document.querySelectorAll("[data-zoom]")) {
    button.addEventListener("click", () => {
      const how = button.dataset.zoom;
      zoom = how === "fit" ? 1 : Math.min(256, Math.max(1, how === "in" ? zoom * 2 : zoom / 2));
      drawTimeline();
    });
  }
  timeline.addEventListener("wheel", (event) => {
    if (!event.ctrlKey) return;
    event.preventDefault();
    zoom = Math.min(256, Math.max(1, event.deltaY < 0 ? zoom * 1.5 : zoom / 1.5));
    drawTimeline();
  });

  function draw() {
    drawGraph();
    drawTimeline();
    const cancel = document.getElementById("run-cancel");
    if (cancel) cancel.hidden = !["running", "waiting"].includes(state.run.status);
    const rerun = document.getElementById("run-rerun");
    if (rerun) rerun.hidden = !["succeeded", "failed"].includes(state.run.status);
  }

  document.addEventListener("sy:message", (event) => {
    const msg = event.detail;
    if (msg.topic !== topic) return;
    const spans = msg.data.reset ? msg.data.spans : state.spans.concat(msg.data.spans);
    state = { run: msg.data.run, nodes: msg.data.nodes, spans };
    draw();
  });
  // Running and queued bars grow between messages.
  setInterval(() => {
    if (Object.values(state.nodes).some((n) => n.status === "running" || n.status === "queued")) drawTimeline();
  }, 250);
  // A link to a node (?node=ID, from a dead letter's attempts) opens its panel.
  const wanted = new URLSearchParams(location.search).get("node");
  if (wanted && dag.ids.includes(wanted)) window.SyDag.loadDetail(box.dataset.nodeUrl, wanted);
  draw();
})();
