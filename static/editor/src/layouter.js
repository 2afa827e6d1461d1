// Positions for the editor: an instant provisional layout and the layered one in a Web Worker,
// both from the shared layout module (static/shared/layout.js).
import { gridPositions, rankLayers } from "../../shared/layout.js";
import { labelWidth } from "./canvas.js";
import { NODE_H, NODE_W } from "./model.js";

const GAP_X = 72;
const GAP_Y = 24;

// Instant positions, shown until the worker's layered layout answers.
export function quickLayout(doc) {
  const edges = [...doc.edges.values()].map((edge) => [edge.source, edge.target]);
  const layers = rankLayers([...doc.nodes.keys()], edges);
  return gridPositions(layers, { width: NODE_W, height: NODE_H, gapX: GAP_X, gapY: GAP_Y, margin: 24 }).positions;
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
