// Where the nodes of a DAG go, left to right: the one layout module of the editor (its quick
// provisional layout, and the layered one its Web Worker computes) and of the dashboard's
// live graphs (run page, workflow live page). Positions only: each surface draws its own.
//
// Quick layers (`rankLayers`, `gridPositions`): each node's layer is its longest distance
// from a root (Kahn); nodes on a cycle, which have none, go in a layer after the last.
// Within a layer nodes keep definition order or, with `barycentre`, are ordered by the mean
// position of their predecessors (one sweep, which keeps most edges short and uncrossed on
// the graphs people draw). Instant, so the editor shows a graph before the worker answers.
//
// The layered layout (`layeredLayout`) is Sugiyama-style, with no recursion anywhere.
// dagre 3.1 walked its spanning trees recursively (feasibleTree's dfs, as deep as the graph
// has nodes): a 2,000-node, 6,000-edge graph overflowed the Web Worker's stack in about half
// of the tries, and when it did not it took 7–30 s here. Every step below is a loop over
// arrays, linear or n·log n per sweep: the same graph is laid out in well under a second.
//
// 1. order: Kahn's topological order; on a cycle the earliest remaining node goes next and
//    the edges closing the cycle count as reversed (the server still reports the cycle);
// 2. ranks: longest path from the sources; a source moves up next to its first successor;
// 3. an edge spanning several ranks gets a dummy per rank between, so it has room;
// 4. order within ranks: barycentre sweeps down and up, keeping the order with the fewest
//    crossings (counted with an accumulator tree, Barth–Jünger–Mutzel);
// 5. columns: as far apart as `ranksep`, or as the widest condition label between them needs;
// 6. places: each node is pulled to the mean height of its neighbours, under the spacing
//    constraints of its rank (isotonic regression, pool-adjacent-violators), sweeping both ways.

const SWEEPS = 12;
const STALE_SWEEPS = 4;
const PLACE_SWEEPS = 8;
const DUMMY_GAP = 8;
const LABEL_MARGIN = 16;

// Layers of node ids, by longest path from the roots; a node on a cycle that no root reaches
// goes in a layer after the last. `edges` are [source, target] pairs; self-loops and edges
// to unknown nodes are left out.
export function rankLayers(ids, edges, { barycentre = false } = {}) {
  const known = new Set(ids);
  const preds = new Map(ids.map((id) => [id, []]));
  const succs = new Map(ids.map((id) => [id, []]));
  for (const [source, target] of edges) {
    if (source === target || !known.has(source) || !known.has(target)) continue;
    preds.get(target).push(source);
    succs.get(source).push(target);
  }
  const rank = longestPathRanks(ids, preds, succs);
  let last = 0;
  for (const r of rank.values()) last = Math.max(last, r);
  const layers = [];
  for (const id of ids) {
    const r = rank.has(id) ? rank.get(id) : last + 1;
    while (layers.length <= r) layers.push([]);
    layers[r].push(id);
  }
  if (barycentre) orderByPredecessors(layers, preds);
  return layers;
}

// Kahn's algorithm; a node on a cycle keeps the longest path found to it before the cycle.
function longestPathRanks(ids, preds, succs) {
  const indegree = new Map(ids.map((id) => [id, preds.get(id).length]));
  const rank = new Map();
  const queue = ids.filter((id) => indegree.get(id) === 0);
  for (const id of queue) rank.set(id, 0);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    for (const next of succs.get(id)) {
      rank.set(next, Math.max(rank.get(next) ?? 0, rank.get(id) + 1));
      indegree.set(next, indegree.get(next) - 1);
      if (indegree.get(next) === 0) queue.push(next);
    }
  }
  return rank;
}

// One barycentre sweep: each layer after the first sorted (stably) by the mean position of
// its nodes' predecessors in the layers before; a node without any counts as position 0.
function orderByPredecessors(layers, preds) {
  const order = new Map();
  layers.forEach((layer, li) => {
    if (li > 0) {
      const centre = (id) => {
        const placed = preds.get(id).filter((p) => order.has(p));
        return placed.length ? placed.reduce((sum, p) => sum + order.get(p), 0) / placed.length : 0;
      };
      layer.sort((a, b) => centre(a) - centre(b));
    }
    layer.forEach((id, i) => order.set(id, i));
  });
}

// Top-left corners of nodes of one size in columns, one per layer, each column centred on
// the tallest (`centre`) or from the top; and the size of the whole drawing.
export function gridPositions(layers, { width, height, gapX, gapY, margin, centre = false }) {
  const tallest = Math.max(1, ...layers.map((layer) => layer.length));
  const total = {
    width: margin * 2 + layers.length * width + Math.max(0, layers.length - 1) * gapX,
    height: margin * 2 + tallest * height + (tallest - 1) * gapY,
  };
  const positions = new Map();
  layers.forEach((layer, li) => {
    const span = layer.length * height + (layer.length - 1) * gapY;
    const top = centre ? (total.height - span) / 2 : margin;
    layer.forEach((id, i) => positions.set(id, { x: margin + li * (width + gapX), y: top + i * (height + gapY) }));
  });
  return { positions, ...total };
}

export function layeredLayout(nodeIds, edgePairs, options) {
  const { width, height, nodesep = 24, ranksep = 72, margin = 24 } = options;
  const count = nodeIds.length;
  const index = new Map(nodeIds.map((id, i) => [id, i]));
  const edges = [];
  const labels = []; // [source, target, label width] of edges with a label
  for (const [source, target, label = 0] of edgePairs) {
    const s = index.get(source);
    const t = index.get(target);
    if (s === undefined || t === undefined || s === t) continue;
    edges.push([s, t]);
    if (label) labels.push([s, t, label]);
  }
  const topo = topologicalOrder(count, edges);
  const { rank, forward } = assignRanks(count, edges, topo);
  const graph = buildLayers(count, forward, rank);
  orderLayers(graph);
  const ys = placeInLayers(graph, height, nodesep);
  const xs = columnPlaces(graph.layers.length, rank, labels, width, ranksep);
  const positions = {};
  for (let v = 0; v < count; v++) {
    positions[nodeIds[v]] = [Math.round(margin + xs[rank[v]]), Math.round(margin + ys[v] - height / 2)];
  }
  return positions;
}

// The left edge of each column: a gap wide enough for the labels of the edges leaving it.
function columnPlaces(columns, rank, labels, width, ranksep) {
  const gaps = new Float64Array(columns).fill(ranksep);
  for (const [s, t, label] of labels) {
    const from = Math.min(rank[s], rank[t]);
    gaps[from] = Math.max(gaps[from], label + 2 * LABEL_MARGIN);
  }
  const xs = new Float64Array(columns);
  for (let r = 1; r < columns; r++) xs[r] = xs[r - 1] + width + gaps[r - 1];
  return xs;
}

// Kahn's algorithm in definition order; a cycle releases its earliest remaining node.
function topologicalOrder(count, edges) {
  const indegree = new Int32Array(count);
  const successors = adjacency(count, edges, 0, 1);
  for (const [, t] of edges) indegree[t]++;
  const done = new Uint8Array(count);
  const order = [];
  let queue = [];
  let head = 0;
  let next = 0;
  for (let v = 0; v < count; v++) if (indegree[v] === 0) queue.push(v);
  while (order.length < count) {
    if (head === queue.length) {
      while (done[next]) next++;
      queue = [next];
      head = 0;
    }
    const v = queue[head++];
    if (done[v]) continue;
    done[v] = 1;
    order.push(v);
    for (const w of successors[v]) if (!done[w] && --indegree[w] === 0) queue.push(w);
  }
  return order;
}

function adjacency(count, edges, from, to) {
  const lists = Array.from({ length: count }, () => []);
  for (const edge of edges) lists[edge[from]].push(edge[to]);
  return lists;
}

function assignRanks(count, edges, topo) {
  const position = new Int32Array(count);
  topo.forEach((v, i) => (position[v] = i));
  // An edge against the topological order closes a cycle: it is laid out reversed.
  const forward = edges.map(([s, t]) => (position[s] < position[t] ? [s, t] : [t, s]));
  const predecessors = adjacency(count, forward, 1, 0);
  const successors = adjacency(count, forward, 0, 1);
  const rank = new Int32Array(count);
  for (const v of topo) for (const u of predecessors[v]) rank[v] = Math.max(rank[v], rank[u] + 1);
  for (let i = topo.length - 1; i >= 0; i--) {
    const v = topo[i];
    if (predecessors[v].length || !successors[v].length) continue;
    let nearest = Infinity;
    for (const w of successors[v]) nearest = Math.min(nearest, rank[w]);
    rank[v] = nearest - 1;
  }
  return { rank, forward };
}

// Layers of vertex numbers (dummies numbered from `count`), and each vertex's neighbours in
// the layer before (`up`) and after (`down`).
function buildLayers(count, forward, rank) {
  const up = Array.from({ length: count }, () => []);
  const down = Array.from({ length: count }, () => []);
  const rankOf = Array.from(rank);
  let maxRank = 0;
  for (const r of rankOf) maxRank = Math.max(maxRank, r);
  const link = (a, b) => {
    down[a].push(b);
    up[b].push(a);
  };
  for (const [s, t] of forward) {
    let previous = s;
    for (let r = rankOf[s] + 1; r < rankOf[t]; r++) {
      const dummy = rankOf.length;
      rankOf.push(r);
      up.push([]);
      down.push([]);
      link(previous, dummy);
      previous = dummy;
    }
    link(previous, t);
  }
  const layers = Array.from({ length: maxRank + 1 }, () => []);
  for (let v = 0; v < rankOf.length; v++) layers[rankOf[v]].push(v);
  return { layers, up, down, count };
}

function orderLayers(graph) {
  const { layers, up, down } = graph;
  const pos = new Float64Array(up.length);
  const setPositions = (layer) => layer.forEach((v, i) => (pos[v] = i));
  layers.forEach(setPositions);
  let best = layers.map((layer) => layer.slice());
  let fewest = crossings(graph, pos);
  const key = new Float64Array(up.length);
  let stale = 0; // sweeps since the last improvement
  for (let sweep = 0; sweep < SWEEPS && fewest > 0 && stale < STALE_SWEEPS; sweep++) {
    const downward = sweep % 2 === 0;
    const neighbours = downward ? up : down;
    for (let i = 1; i < layers.length; i++) {
      const layer = layers[downward ? i : layers.length - 1 - i];
      for (const v of layer) {
        const list = neighbours[v];
        if (!list.length) key[v] = pos[v];
        else {
          let sum = 0;
          for (const w of list) sum += pos[w];
          key[v] = sum / list.length;
        }
      }
      layer.sort((a, b) => key[a] - key[b] || pos[a] - pos[b]);
      setPositions(layer);
    }
    const now = crossings(graph, pos);
    stale += 1;
    if (now < fewest) {
      fewest = now;
      stale = 0;
      best = layers.map((layer) => layer.slice());
    }
  }
  best.forEach((layer, r) => (layers[r] = layer));
}

// Edge crossings between every pair of neighbouring layers (accumulator tree per pair).
function crossings({ layers, down }, pos) {
  let total = 0;
  let widest = 1;
  for (const layer of layers) widest = Math.max(widest, layer.length);
  let size = 1;
  while (size < widest) size *= 2;
  const tree = new Int32Array(2 * size);
  const targets = [];
  for (let r = 0; r + 1 < layers.length; r++) {
    tree.fill(0);
    targets.length = 0;
    // layers[r] is in position order: every sweep sorts a layer and renumbers it.
    for (const v of layers[r]) {
      const start = targets.length;
      for (const w of down[v]) {
        // insertion sort of this vertex's few ends
        let j = targets.length;
        targets.push(pos[w]);
        while (j > start && targets[j - 1] > pos[w]) {
          targets[j] = targets[j - 1];
          j--;
        }
        targets[j] = pos[w];
      }
    }
    for (const target of targets) {
      let node = target + size;
      tree[node]++;
      while (node > 1) {
        if (node % 2 === 0) total += tree[node + 1];
        node = node >> 1;
        tree[node]++;
      }
    }
  }
  return total;
}

// Centre heights per vertex: each layer packed, then pulled toward its neighbours.
function placeInLayers({ layers, up, down, count }, height, nodesep) {
  const size = (v) => (v < count ? height : 0);
  const gap = (a, b) => (size(a) + size(b)) / 2 + (a < count && b < count ? nodesep : DUMMY_GAP);
  const y = new Float64Array(up.length);
  for (const layer of layers) {
    let at = size(layer[0] ?? 0) / 2;
    layer.forEach((v, i) => {
      if (i) at += gap(layer[i - 1], v);
      y[v] = at;
    });
  }
  for (let sweep = 0; sweep < PLACE_SWEEPS; sweep++) {
    const downward = sweep % 2 === 0;
    const neighbours = downward ? up : down;
    const order = downward ? [...layers.keys()] : [...layers.keys()].reverse();
    for (const r of order) {
      const layer = layers[r];
      const wanted = layer.map((v) => {
        const list = neighbours[v];
        if (!list.length) return y[v];
        let sum = 0;
        for (const w of list) sum += y[w];
        return sum / list.length;
      });
      const placed = spaced(wanted, layer.map((v, i) => (i ? gap(layer[i - 1], v) : 0)));
      layer.forEach((v, i) => (y[v] = placed[i]));
    }
  }
  let top = Infinity;
  for (let v = 0; v < count; v++) top = Math.min(top, y[v]);
  for (let v = 0; v < count; v++) y[v] -= top - height / 2;
  return y;
}

// The heights closest (least squares) to `wanted` that keep y[i+1] - y[i] >= gaps[i+1]:
// shifted by the running sum of gaps it is isotonic regression, solved by pooling.
function spaced(wanted, gaps) {
  const offset = new Float64Array(wanted.length);
  for (let i = 1; i < wanted.length; i++) offset[i] = offset[i - 1] + gaps[i];
  const blocks = []; // [mean, weight, length]
  for (let i = 0; i < wanted.length; i++) {
    let block = [wanted[i] - offset[i], 1, 1];
    while (blocks.length && blocks[blocks.length - 1][0] >= block[0]) {
      const [mean, weight, length] = blocks.pop();
      const total = weight + block[1];
      block = [(mean * weight + block[0] * block[1]) / total, total, length + block[2]];
    }
    blocks.push(block);
  }
  const result = [];
  for (const [mean, , length] of blocks) for (let k = 0; k < length; k++) result.push(mean + offset[result.length]);
  return result;
}
