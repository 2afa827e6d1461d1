// A run's trace: per node, the queue wait before each attempt, the attempt itself, the
// backoff after a failed one and the waits within an attempt (for a child run: a
// workflow.run node's, an agent's workflow tool call's; a waiting node's until now), as
// distinct segments on one time axis.
//
// Where each segment comes from (all from the run's history, see monitoring/services/runstate.py):
// an attempt runs from its start to its end; a backoff from the failed attempt's retry
// being scheduled to when the retry is available (scheduled at + delay); the queue wait
// before an attempt from the moment the node became ready (its last predecessor's end, the
// backoff's end, a replay or re-run, or the run's creation) to the attempt's start. A
// queued or running node's current wait starts at its queued time.
//
// Readable for runs of milliseconds and of hours: every segment is at least MIN_PX wide,
// ticks choose their unit from the visible span, and the zoom (buttons, or the wheel with
// Ctrl) widens the drawing inside a horizontally scrolling box.
const NS = "http://www.w3.org/2000/svg";
const LABEL = 170;
const ROW = 26;
const MIN_PX = 3;

function el(name, attrs, parent) {
  const node = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

export function duration(seconds) {
  const s = Math.abs(seconds);
  if (s < 1) return `${Math.round(seconds * 1000)} ms`;
  if (s < 120) return `${seconds.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function predecessors(graph) {
  const preds = {};
  for (const e of graph.edges) (preds[e.target] = preds[e.target] || []).push(e.source);
  return preds;
}

// The segments of every node: [{node, kind: queue|backoff|attempt, start, end, status, label}].
export function segments(state, graph, now) {
  const preds = predecessors(graph);
  const attempts = state.spans.filter((s) => s.kind === "attempt" && s.start);
  const backoffs = state.spans.filter((s) => s.kind === "backoff");
  const resets = state.spans.filter((s) => s.kind === "reset");
  const waits = state.spans.filter((s) => s.kind === "wait" && s.start);
  const out = [];
  const readyAt = (node, before) => {
    let t = state.run.created;
    for (const p of preds[node] || []) {
      for (const a of attempts) if (a.node === p && a.status === "succeeded" && a.end <= before) t = Math.max(t, a.end);
    }
    for (const b of backoffs) if (b.node === node && b.end <= before + 0.001) t = Math.max(t, Math.min(b.end, before));
    for (const r of resets) if ((r.nodes || []).includes(node) && r.start <= before) t = Math.max(t, r.start);
    return t;
  };
  for (const a of attempts) {
    const ready = readyAt(a.node, a.start);
    if (a.start > ready) out.push({ node: a.node, kind: "queue", start: ready, end: a.start, label: `${a.node} #${a.attempt} waited in the queue` });
    out.push({ node: a.node, kind: "attempt", start: a.start, end: a.end, status: a.status, label: `${a.node} #${a.attempt} ${a.status}` });
  }
  for (const b of backoffs) {
    // From the failed attempt's end (failed -> retry available), not from when it was scheduled.
    const failed = attempts.find((a) => a.node === b.node && a.attempt === b.attempt);
    const start = failed ? Math.min(failed.end, b.start) : b.start;
    out.push({ node: b.node, kind: "backoff", start, end: Math.min(b.end, now), label: `${b.node} backoff after #${b.attempt}` });
  }
  // Drawn over their attempt (an agent's attempt spans its tool's child run).
  for (const w of waits) {
    out.push({ node: w.node, kind: "wait", start: w.start, end: w.end, label: `${w.node} #${w.attempt} waited for child run ${w.child}` });
  }
  for (const [id, n] of Object.entries(state.nodes)) {
    if (n.status === "waiting" && n.started) {
      out.push({ node: id, kind: "wait", start: n.started, end: now, label: `${id} #${n.attempt} waiting` });
    } else if (n.status === "running" && n.started) {
      if (n.queued && n.started > n.queued) out.push({ node: id, kind: "queue", start: n.queued, end: n.started, label: `${id} #${n.attempt} waited in the queue` });
      out.push({ node: id, kind: "attempt", start: n.started, end: now, status: "running", label: `${id} #${n.attempt} running` });
    } else if (n.status === "queued" && n.queued) {
      out.push({ node: id, kind: "queue", start: n.queued, end: now, label: `${id} #${n.attempt} in the queue` });
    }
  }
  return out;
}

function ticks(start, end, width) {
  const span = end - start;
  const steps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400];
  const wanted = Math.max(2, Math.floor(width / 110));
  const step = steps.find((s) => span / s <= wanted) || span / wanted;
  const out = [];
  for (let t = 0; t <= span + 1e-9; t += step) out.push(t);
  return out;
}

// Draw into `box` (replacing what it held); `zoom` multiplies the drawing's width.
// The node names stay in a column of their own (sticky) while the plot scrolls under them;
// positions returned by the scale are in the scrolling box's coordinates.
export function draw(box, state, graph, order, zoom) {
  const now = Date.now() / 1000;
  const segs = segments(state, graph, now);
  box.replaceChildren();
  const rows = order.filter((id) => segs.some((s) => s.node === id));
  if (!rows.length) {
    box.textContent = "No attempt has started yet.";
    return null;
  }
  const start = Math.min(state.run.created, ...segs.map((s) => s.start));
  const end = Math.max(state.run.finished || now, ...segs.map((s) => s.end), start + 0.001);
  const P = Math.max(400, ((box.clientWidth || 1000) - LABEL) * zoom);
  const H = 30 + rows.length * ROW;
  const names = el("svg", { width: LABEL, height: H, class: "tl-names" }, box);
  const svg = el("svg", { width: P, height: H, viewBox: `0 0 ${P} ${H}`, class: "timeline-svg", "data-zoom": zoom }, box);
  const x = (t) => 4 + ((t - start) / (end - start)) * (P - 16);
  const scale = { x: (t) => LABEL + x(t), time: (px) => start + ((px - LABEL - 4) / (P - 16)) * (end - start), start, end };
  for (const t of ticks(start, end, P)) {
    el("line", { x1: x(start + t), x2: x(start + t), y1: 18, y2: H, class: "tl-grid" }, svg);
    el("text", { x: x(start + t) + 2, y: 12, class: "tl-tick" }, svg).textContent = duration(t);
  }
  rows.forEach((id, i) => {
    const y = 22 + i * ROW;
    const label = el("text", { x: 4, y: y + 14, class: "tl-label", "data-node-label": id }, names);
    label.textContent = id.length > 22 ? id.slice(0, 21) + "…" : id;
    el("title", {}, label).textContent = `${id}: click to zoom to this node`;
    for (const s of segs.filter((s) => s.node === id)) {
      const w = Math.max(MIN_PX, x(s.end) - x(s.start));
      const h = s.kind === "attempt" ? ROW - 8 : ROW - 16;
      const cls = s.kind === "attempt" ? `tl-bar ${s.status}` : `tl-bar ${s.kind}`;
      const r = el("rect", { x: x(s.start), y: s.kind === "attempt" ? y : y + 4, width: w, height: h, rx: 2, class: cls, "data-segment": s.kind, "data-node": id }, svg);
      el("title", {}, r).textContent = `${s.label}: ${duration(s.end - s.start)}`;
    }
  });
  return { ...scale, segments: segs };
}
