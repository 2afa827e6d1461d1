// Lay out a graph off the main thread (layeredLayout of static/shared/layout.js), so a
// 2,000-node layout never freezes panning.
import { layeredLayout } from "../../shared/layout.js";

self.onmessage = (event) => {
  const { id, nodes, edges, width, height } = event.data;
  const started = performance.now();
  try {
    const positions = layeredLayout(nodes, edges, { width, height });
    self.postMessage({ id, positions, ms: performance.now() - started });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  }
};
