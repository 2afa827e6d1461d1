// Positions: an instant provisional layout (longest-path layers) and layered.js in a Web Worker.
import { labelWidth } from "./canvas.js";
import { NODE_H, NODE_W } from "./model.js";

const GAP_X = 72;
const GAP_Y = 24;

// Layers by longest path from the roots, in definition order; nodes on a cycle go last.
export function quickLayout(doc) {
  const indegree = new Map();
  const successors = new Map();
  for (const uid of doc.nodes.keys()) {
    indegree.set(uid, 0);
    successors.set(uid, []);
  }
  for (const edge of doc.edges.values()) {
    if (edge.source === edge.target) continue;
    successors.get(edge.source).push(edge.target);
    indegree.set(edge.target, indegree.get(edge.target) + 1);
  }
  const rank = new Map();
  const queue = [...doc.nodes.keys()].filter((uid) => indegree.get(uid) === 0);
  for (const uid of queue) rank.set(uid, 0);
  for (let i = 0; i < queue.length; i++) {
    const uid = queue[i];
    for (const next of successors.get(uid)) {
      rank.set(next, Math.max(rank.get(next) ?? 0, rank.get(uid) + 1));
      indegree.set(next, indegree.get(next) - 1);
      if (indegree.get(next) === 0) queue.push(next);
    }
  }
  const maxRank = Math.max(0, ...rank.values());
  const rows = new Map();
  const positions = new Map();
  for (const uid of doc.nodes.keys()) {
    const r = rank.has(uid) ? rank.get(uid) : maxRank + 1;
    const row = rows.get(r) ?? 0;
    rows.set(r, row + 1);
    positions.set(uid, { x: 24 + r * (NODE_W + GAP_X), y: 24 + row * (NODE_H + GAP_Y) });
  }
  return positions;
}

export class Layouter {
  constructor() {
    this.worker = null;
    this.pending = new Map();
    this.nextId = 1;
  }

  ensureWorker() {
    if (this.worker) return this.worker;
    this.worker = new Worker(new URL("./layout-worker.js", import.meta.url), { type: "module" });
    this.worker.onmessage = (event) => {
      const { id, positions, ms, error } = event.data;
      const resolve = this.pending.get(id);
      this.pending.delete(id);
      if (resolve) resolve(error ? { error } : { positions: new Map(Object.entries(positions)), ms });
    };
    this.worker.onerror = (event) => {
      for (const resolve of this.pending.values()) resolve({ error: event.message || "layout failed" });
      this.pending.clear();
    };
    return this.worker;
  }

  // Resolve with {positions: Map(uid -> [x, y]), ms} or {error}.
  layout(doc) {
    const id = this.nextId++;
    const nodes = [...doc.nodes.keys()];
    const edges = [...doc.edges.values()].map((e) => [e.source, e.target, labelWidth(e.data.when)]);
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      this.ensureWorker().postMessage({ id, nodes, edges, width: NODE_W, height: NODE_H });
    });
  }
}
