// Lay out a graph with dagre off the main thread, so a 2,000-node layout never freezes panning.
import dagre from "@dagrejs/dagre";

// network-simplex ranks best but grows steeply with size; tight-tree is close and far faster.
const RANKER_LIMIT = 200;

self.onmessage = (event) => {
  const { id, nodes, edges, width, height } = event.data;
  const started = performance.now();
  const graph = new dagre.graphlib.Graph();
  graph.setGraph({
    rankdir: "LR",
    nodesep: 24,
    ranksep: 72,
    marginx: 24,
    marginy: 24,
    ranker: nodes.length > RANKER_LIMIT ? "tight-tree" : "network-simplex",
  });
  graph.setDefaultEdgeLabel(() => ({}));
  for (const uid of nodes) graph.setNode(uid, { width, height });
  for (const [source, target] of edges) if (source !== target) graph.setEdge(source, target);
  dagre.layout(graph);
  const positions = {};
  for (const uid of nodes) {
    const { x, y } = graph.node(uid);
    positions[uid] = [Math.round(x - width / 2), Math.round(y - height / 2)];
  }
  self.postMessage({ id, positions, ms: performance.now() - started });
};
