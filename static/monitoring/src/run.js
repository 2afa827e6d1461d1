// A run's page: DAG coloured by node state and a trace timeline (one bar per attempt) that
// grows while the run is in flight. State comes with the page, then from the websocket.
import { loadDetail, render } from "./dag.js";
import { draw as drawTrace } from "./trace.js";
import { tickDurations } from "./durations.js";

function startRunPage() {
  const box = document.getElementById("run-graph");
  const timeline = document.getElementById("run-timeline");
  const live = document.getElementById("live");
  if (!box) return;
  const graph = JSON.parse(document.getElementById("graph-data").textContent);
  const topic = live.dataset.topics;
  let state = JSON.parse(document.getElementById("run-data").textContent);
  const panel = document.getElementById("node-panel");
  const dag = render(box, graph, (id) => {
    loadDetail(box.dataset.nodeUrl, id);
    panel.scrollIntoView({ block: "nearest" });
  });
  const rowOrder = dag.layers.flat();

  function drawGraph() {
    for (const id of dag.ids) {
      const n = state.nodes[id] || { status: "pending", attempt: 0 };
      const items = n.items ? `items ${n.items.done} done · ${n.items.failed} failed / ${n.items.total}` : "";
      dag.update(id, n.status, [n.status.replace("_", " ") + (n.attempt ? ` · attempt ${n.attempt}` : ""), items]);
      box.querySelector(`[data-node="${CSS.escape(id)}"]`).dataset.status = n.status;
    }
  }

  // Zoom keeps the time under its anchor (the view's centre, the mouse, a node's first
  // segment) where it was, so a run of hours can be read down to its millisecond steps.
  let zoom = 1;
  let scale = null;
  function drawTimeline(anchorTime, anchorPx) {
    const scroll = timeline.scrollLeft;
    // Compensation steps (`<node>~compensate`) are not in the graph: their rows come last.
    const rows = rowOrder.concat(Object.keys(state.nodes).filter((id) => !rowOrder.includes(id)));
    scale = drawTrace(timeline, state, rows, zoom);
    timeline.scrollLeft = scale && anchorTime !== undefined ? scale.x(anchorTime) - anchorPx : scroll;
  }

  function zoomTo(factor, anchorPx) {
    if (!scale) return;
    const px = anchorPx === undefined ? timeline.clientWidth / 2 : anchorPx;
    const time = scale.time(timeline.scrollLeft + px);
    zoom = Math.min(4096, Math.max(1, factor));
    drawTimeline(time, px);
  }

  for (const button of document.querySelectorAll("[data-zoom]")) {
    button.addEventListener("click", () => {
      const how = button.dataset.zoom;
      if (how === "fit") zoomTo(1, 0);
      else zoomTo(how === "in" ? zoom * 2 : zoom / 2);
    });
  }
  timeline.addEventListener("wheel", (event) => {
    if (!event.ctrlKey) return;
    event.preventDefault();
    const px = event.clientX - timeline.getBoundingClientRect().left;
    zoomTo(event.deltaY < 0 ? zoom * 1.5 : zoom / 1.5, px);
  });
  // A click on a node's name zooms to its segments.
  timeline.addEventListener("click", (event) => {
    const id = event.target.closest && event.target.closest("[data-node-label]")?.dataset.nodeLabel;
    if (!id || !scale) return;
    const mine = scale.segments.filter((s) => s.node === id);
    const from = Math.min(...mine.map((s) => s.start));
    const to = Math.max(...mine.map((s) => s.end));
    const whole = scale.end - scale.start;
    zoom = Math.min(4096, Math.max(1, (whole / Math.max(to - from, whole / 4096)) * 0.8));
    drawTimeline(from, 180);
  });

  function draw() {
    drawGraph();
    drawTimeline();
    const cancel = document.getElementById("run-cancel");
    if (cancel) cancel.hidden = !["running", "waiting"].includes(state.run.status);
    const rerun = document.getElementById("run-rerun");
    if (rerun) rerun.hidden = !["succeeded", "failed"].includes(state.run.status);
  }

  // The open node panel is loaded again when its node's status or attempt moves on.
  function refreshPanel() {
    const head = document.querySelector("#node-detail [data-panel-node]");
    const n = head && state.nodes[head.dataset.panelNode];
    if (n && `${n.status}:${n.attempt}` !== head.dataset.panelState) {
      head.dataset.panelState = `${n.status}:${n.attempt}`; // once per move, even while it loads
      loadDetail(box.dataset.nodeUrl, head.dataset.panelNode);
    }
  }

  document.addEventListener("sy:message", (event) => {
    const msg = event.detail;
    if (msg.topic !== topic) return;
    const spans = msg.data.reset ? msg.data.spans : state.spans.concat(msg.data.spans);
    state = { run: msg.data.run, nodes: msg.data.nodes, spans };
    draw();
    refreshPanel();
  });
  // Open bars (queued, running, waiting) and the durations of what is still going on grow
  // between messages.
  setInterval(() => {
    if (Object.values(state.nodes).some((n) => ["running", "queued", "waiting"].includes(n.status))) drawTimeline();
    tickDurations();
  }, 250);
  // A link to a node (?node=ID, from a dead letter's attempts) opens its panel.
  const wanted = new URLSearchParams(location.search).get("node");
  if (wanted && dag.ids.includes(wanted)) loadDetail(box.dataset.nodeUrl, wanted);
  draw();
}

startRunPage();
