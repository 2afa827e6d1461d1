// A run's trace: one row per node of the run, and on it the queue wait before each attempt,
// the attempt itself, the backoff after a failed one, and the waits (an approval, an event,
// a timer, a child run: a workflow.run node's, an agent's workflow tool call's), as distinct
// segments on one time axis. Compensation steps (`<node>~compensate`) are rows of their own.
//
// Where each segment comes from (the run's history, see monitoring/services/runstate.py):
// an attempt runs from its start to its end; its queue wait from when it was queued (stored
// with the attempt) to its start, and only then: never from a guess of when the node became
// ready, which would draw a person's 18 s of deciding as a worker's queue; a backoff from the
// failed attempt's end to when the retry is available; a wait from `node.waiting` to the
// decision, event or deadline that ended it (`wait_end`), or to now while it is open. A
// queued or running node's current wait starts at its queued time. Open segments end at now
// and grow while the page is open.
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

const WAIT_NAMES = { approval: "waiting for a decision", event: "waiting for an event", timer: "waiting for its timer" };

// The segments of every node: [{node, kind: queue|backoff|attempt|wait, start, end, status, label}].
export function segments(state, now) {
  const attempts = state.spans.filter((s) => s.kind === "attempt" && s.start);
  const backoffs = state.spans.filter((s) => s.kind === "backoff");
  const childWaits = state.spans.filter((s) => s.kind === "wait" && s.start);
  const waitStarts = state.spans.filter((s) => s.kind === "wait_start");
  const waitEnds = state.spans.filter((s) => s.kind === "wait_end");
  const out = [];
  for (const a of attempts) {
    if (a.queued && a.queued < a.start) out.push({ node: a.node, kind: "queue", start: a.queued, end: a.start, label: `${a.node} #${a.attempt} waited in the queue` });
    out.push({ node: a.node, kind: "attempt", start: a.start, end: a.end, status: a.status, label: `${a.node} #${a.attempt} ${a.status}` });
  }
  for (const b of backoffs) {
    // From the failed attempt's end (failed -> retry available), not from when it was scheduled.
    const failed = attempts.find((a) => a.node === b.node && a.attempt === b.attempt);
    const start = failed ? Math.min(failed.end, b.start) : b.start;
    out.push({ node: b.node, kind: "backoff", start, end: Math.min(b.end, now), label: `${b.node} backoff after #${b.attempt}` });
  }
  // Child runs' waits, drawn over their attempt (an agent's attempt spans its tool's child run).
  for (const w of childWaits) {
    out.push({ node: w.node, kind: "wait", start: w.start, end: w.end, label: `${w.node} #${w.attempt} waited for child run ${w.child}` });
  }
  const opened = new Set();
  for (const w of waitStarts) {
    opened.add(`${w.node}:${w.attempt}`);
    const closed = waitEnds.find((e) => e.node === w.node && e.attempt === w.attempt);
    const n = state.nodes[w.node];
    const open = !closed && n && n.status === "waiting" && n.attempt === w.attempt;
    const end = closed ? closed.start : open ? now : state.run.finished || now;
    const what = WAIT_NAMES[w.what] || "waiting";
    out.push({ node: w.node, kind: "wait", start: w.start, end, label: `${w.node} #${w.attempt} ${open ? what : what.replace("waiting", "waited")}` });
  }
  for (const [id, n] of Object.entries(state.nodes)) {
    if (n.status === "waiting" && n.started && !opened.has(`${id}:${n.attempt}`)) {
      // A child run's wait: a workflow.run node waits from its start; a parked agent's
      // attempt goes on under the waits of its workflow tool calls.
      const kids = (n.children || []).filter((c) => c.attempt === n.attempt);
      const named = kids.map((c) => c.child).join(", ");
      if (n.agent) {
        out.push({ node: id, kind: "attempt", start: n.started, end: now, status: "running", label: `${id} #${n.attempt} running, waiting for its tools` });
        for (const c of kids) out.push({ node: id, kind: "wait", start: c.start, end: now, label: `${id} #${n.attempt} waiting for child run ${c.child}` });
      } else {
        out.push({ node: id, kind: "wait", start: n.started, end: now, label: `${id} #${n.attempt} waiting${named ? ` for child run ${named}` : ""}` });
      }
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
export function draw(box, state, order, zoom) {
  const now = Date.now() / 1000;
  const segs = segments(state, now);
  box.replaceChildren();
  // Every node of the run has its row, those that never ran too (their status in the row).
  const rows = order.filter((id) => state.nodes[id] || segs.some((s) => s.node === id));
  if (!rows.length) {
    box.textContent = "No node has started yet.";
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
    const mine = segs.filter((s) => s.node === id);
    if (!mine.length) {
      const status = (state.nodes[id] || { status: "pending" }).status.replace("_", " ");
      el("text", { x: 8, y: y + 14, class: "tl-tick", "data-node-status": id }, svg).textContent = status;
    }
    for (const s of mine) {
      const w = Math.max(MIN_PX, x(s.end) - x(s.start));
      const h = s.kind === "attempt" ? ROW - 8 : ROW - 16;
      const cls = s.kind === "attempt" ? `tl-bar ${s.status}` : `tl-bar ${s.kind}`;
      const r = el("rect", { x: x(s.start), y: s.kind === "attempt" ? y : y + 4, width: w, height: h, rx: 2, class: cls, "data-segment": s.kind, "data-node": id, "data-start": s.start.toFixed(3), "data-end": s.end.toFixed(3) }, svg);
      el("title", {}, r).textContent = `${s.label}: ${duration(s.end - s.start)}`;
    }
  });
  return { ...scale, segments: segs };
}
