// Copy, paste and duplicate: a fragment is the selected nodes (their data and places) and
// the edges between them; pasting gives every node a fresh id and keeps those edges.

const PASTE_OFFSET = 40;

// The nodes `uids` and the edges joining two of them, as plain data.
export function copyFragment(doc, uids) {
  const nodes = [...uids].map((uid) => doc.nodes.get(uid)).filter(Boolean);
  const chosen = new Set(nodes.map((n) => n.uid));
  const edges = [...doc.edges.values()]
    .filter((e) => chosen.has(e.source) && chosen.has(e.target))
    .map((e) => ({ source: e.source, target: e.target, data: e.data }));
  return { nodes: nodes.map((n) => ({ uid: n.uid, data: n.data, x: n.x, y: n.y })), edges, pasted: 0 };
}

// Add a fragment's copy to the document, shifted down and right a little more each time it
// is pasted; return the new nodes' uids.
export function pasteFragment(doc, fragment) {
  fragment.pasted += 1;
  const shift = PASTE_OFFSET * fragment.pasted;
  const uids = new Map();
  for (const node of fragment.nodes) {
    const id = doc.uniqueId(String(node.data.id).replace(/_\d+$/, ""));
    const copy = doc.addNode({ ...node.data, id }, node.x + shift, node.y + shift);
    uids.set(node.uid, copy.uid);
  }
  for (const edge of fragment.edges) doc.addEdge(uids.get(edge.source), uids.get(edge.target), edge.data);
  return [...uids.values()];
}
