// The SVG canvas: draws the document and turns pointer input into editor calls.
//
// Scale: one <g> per node and per edge, created once and then updated only when what it
// shows changes (a cheap signature per item, compared on every sync). Pan and zoom change a
// single transform; below LOW_DETAIL_ZOOM the labels are hidden so thousands of nodes stay
// smooth. Syncs are coalesced to one per animation frame.
import { categoryOf, paintIcon } from "./categories.js";
import { oncePerFrame, svg } from "./dom.js";
import { NODE_H, NODE_W } from "./model.js";

const MIN_ZOOM = 0.03;
const MAX_ZOOM = 2.5;
const LOW_DETAIL_ZOOM = 0.45;
// Zoomed out on a big graph, edges are hidden while the view is dragged (they are most of
// the painting, and a blur of lines at that zoom); they come back when the drag ends.
const FAST_PAN_EDGES = 1000;
const DRAG_THRESHOLD = 3;
const ID_CHARS = 20;
const HANDLER_CHARS = 23;
const LABEL_CHARS = 28;
const LABEL_CHAR_W = 6.7; // 11px monospace
const LABEL_H = 16;
// Where along an edge its condition label may sit (fractions of the curve), best first:
// the first spot whose box covers no node is taken.
const LABEL_SPOTS = [0.5, 0.38, 0.62, 0.26, 0.74, 0.14, 0.86];
export const PALETTE_MIME = "application/x-switchyard-handler";

// The width of a condition's label; the layout leaves room for it between the columns.
export const labelWidth = (when) => (when ? Math.min(when.length, LABEL_CHARS) * LABEL_CHAR_W + 10 : 0);

const clip = (text, limit) => (text.length > limit ? `${text.slice(0, limit - 1)}…` : text);
const clamp = (value, lo, hi) => Math.min(hi, Math.max(lo, value));

export class Canvas {
  constructor(host, app) {
    this.host = host;
    this.app = app;
    this.view = { x: 40, y: 40, k: 1 };
    this.nodeEls = new Map();
    this.edgeEls = new Map();
    this.gesture = null;
    this.requestSync = oncePerFrame(() => this.sync());
    this.build();
    this.bind();
    this.applyView();
  }

  build() {
    this.svg = svg("svg", { class: "ed-svg", tabindex: "0", role: "application", "aria-label": "Workflow canvas" });
    const defs = svg("defs");
    for (const name of ["arrow", "arrow-selected", "arrow-bad", "arrow-added", "arrow-removed", "arrow-changed"]) {
      const marker = svg("marker", {
        id: `ed-${name}`,
        viewBox: "0 0 10 10",
        refX: "9",
        refY: "5",
        markerWidth: "7",
        markerHeight: "7",
        orient: "auto-start-reverse",
        class: `ed-marker ed-marker-${name}`,
      });
      marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
      defs.append(marker);
    }
    this.viewport = svg("g", { class: "ed-viewport" });
    this.edgeLayer = svg("g", { class: "ed-edges" });
    this.nodeLayer = svg("g", { class: "ed-nodes" });
    // Condition labels go above the nodes, so that a label is never hidden under one.
    this.labelLayer = svg("g", { class: "ed-labels" });
    this.overlay = svg("g", { class: "ed-overlay" });
    this.draftEdge = svg("path", { class: "ed-draft-edge", visibility: "hidden" });
    this.overlay.append(this.draftEdge);
    this.viewport.append(this.edgeLayer, this.nodeLayer, this.labelLayer, this.overlay);
    this.marquee = svg("rect", { class: "ed-marquee", visibility: "hidden" });
    this.svg.append(defs, this.viewport, this.marquee);
    this.host.append(this.svg);
  }

  bind() {
    this.svg.addEventListener("pointerdown", (e) => this.onPointerDown(e));
    this.svg.addEventListener("pointermove", (e) => this.onPointerMove(e));
    this.svg.addEventListener("pointerup", (e) => this.onPointerUp(e));
    this.svg.addEventListener("pointercancel", () => this.cancelGesture());
    this.svg.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    this.svg.addEventListener("dblclick", (e) => {
      if (!e.target.closest(".ed-node, .ed-edge")) this.fit();
    });
    this.host.addEventListener("dragover", (e) => {
      if (this.app.canEdit && e.dataTransfer.types.includes(PALETTE_MIME)) {
        e.preventDefault();
        e.dataTransfer.dropEffect = "copy";
      }
    });
    this.host.addEventListener("drop", (e) => {
      const handler = e.dataTransfer.getData(PALETTE_MIME);
      if (!handler || !this.app.canEdit) return;
      e.preventDefault();
      const point = this.toWorld(e.clientX, e.clientY);
      this.app.addNode(handler, { x: point.x - NODE_W / 2, y: point.y - NODE_H / 2 });
    });
    new ResizeObserver(() => this.app.onCanvasResize?.()).observe(this.host);
  }

  // ------------------------------------------------------------------ drawing

  sync() {
    const doc = this.app.doc;
    for (const [uid, el] of this.nodeEls) {
      if (!doc.nodes.has(uid)) {
        el.g.remove();
        this.nodeEls.delete(uid);
      }
    }
    for (const [uid, el] of this.edgeEls) {
      if (!doc.edges.has(uid)) {
        el.g.remove();
        el.tag?.remove();
        this.edgeEls.delete(uid);
      }
    }
    for (const node of doc.nodes.values()) this.syncNode(node);
    for (const edge of doc.edges.values()) this.syncEdge(edge);
    this.app.minimap?.requestDraw();
  }

  syncNode(node) {
    let el = this.nodeEls.get(node.uid);
    if (!el) {
      el = this.createNode(node);
      this.nodeEls.set(node.uid, el);
      this.nodeLayer.append(el.g);
    }
    const cls = `ed-node cat-${categoryOf(node.data.handler).key} ${this.app.nodeClass(node)}`;
    if (el.cls !== cls) {
      el.g.setAttribute("class", (el.cls = cls));
      if (!el.badge && cls.includes("has-issue")) el.badge = this.addBadge(el.g);
    }
    if (el.x !== node.x || el.y !== node.y) {
      el.x = node.x;
      el.y = node.y;
      el.g.setAttribute("transform", `translate(${node.x} ${node.y})`);
    }
    if (el.data !== node.data) {
      el.data = node.data;
      const id = String(node.data.id ?? "");
      // A map node says so: it runs its handler once per item.
      const handler = (node.data.map ? "map · " : "") + String(node.data.handler ?? "");
      el.idText.textContent = clip(id, ID_CHARS);
      el.handlerText.textContent = clip(handler, HANDLER_CHARS);
      el.title.textContent = `${id}\n${handler}`;
      const cat = categoryOf(handler);
      paintIcon(el.icon, cat);
      el.g.style.setProperty("--cat", cat.colour);
      el.g.dataset.id = id;
    }
  }

  createNode(node) {
    const g = svg("g", { "data-uid": node.uid });
    const title = svg("title");
    const box = svg("rect", { class: "ed-node-box", width: NODE_W, height: NODE_H, rx: 7 });
    const stripe = svg("path", { class: "ed-node-stripe", d: `M 7 0 H 0 V ${NODE_H} H 7 Z` });
    const icon = svg("path", { class: "ed-node-icon", transform: `translate(14 ${NODE_H / 2 - 8})` });
    const idText = svg("text", { class: "ed-node-id", x: 38, y: 22 });
    const handlerText = svg("text", { class: "ed-node-handler", x: 38, y: 40 });
    const portIn = svg("circle", { class: "ed-port ed-port-in", cx: 0, cy: NODE_H / 2, r: 7 });
    const portOut = svg("circle", { class: "ed-port ed-port-out", cx: NODE_W, cy: NODE_H / 2, r: 7 });
    g.append(title, box, stripe, icon, idText, handlerText, portIn, portOut);
    return { g, title, icon, idText, handlerText, badge: null, cls: null, x: null, y: null, data: null };
  }

  // The "!" badge of a node with issues, created the first time it has any (shown by CSS).
  addBadge(g) {
    const badge = svg("g", { class: "ed-node-badge", transform: `translate(${NODE_W - 16} 15)` });
    badge.append(svg("circle", { r: 8 }), Object.assign(svg("text", { y: 4 }), { textContent: "!" }));
    g.querySelector(".ed-port-in").before(badge);
    return badge;
  }

  syncEdge(edge) {
    const doc = this.app.doc;
    const source = doc.nodes.get(edge.source);
    const target = doc.nodes.get(edge.target);
    if (!source || !target) return;
    let el = this.edgeEls.get(edge.uid);
    if (!el) {
      el = this.createEdge(edge);
      this.edgeEls.set(edge.uid, el);
      this.edgeLayer.append(el.g);
    }
    const cls = `ed-edge ${this.app.edgeClass(edge)}`;
    if (el.cls !== cls) {
      el.g.setAttribute("class", (el.cls = cls));
      el.tag?.setAttribute("class", `ed-edge-tag ${cls.slice("ed-edge ".length)}`);
    }
    if (el.sourceData !== source.data || el.targetData !== target.data) {
      el.sourceData = source.data;
      el.targetData = target.data;
      el.g.dataset.source = String(source.data.id ?? "");
      el.g.dataset.target = String(target.data.id ?? "");
    }
    const geometry = `${source.x},${source.y},${target.x},${target.y}`;
    if (el.geometry !== geometry) {
      el.geometry = geometry;
      const d = edgePath(source.x + NODE_W, source.y + NODE_H / 2, target.x, target.y + NODE_H / 2);
      el.line.setAttribute("d", d);
      el.hit.setAttribute("d", d);
      el.labelAt = null;
    }
    const when = typeof edge.data.when === "string" ? edge.data.when : "";
    if (el.when !== when) {
      el.when = when;
      el.labelAt = null;
      if (when && !el.tag) this.addEdgeLabel(el, edge);
      if (el.tag) {
        el.tag.setAttribute("visibility", when ? "visible" : "hidden");
        el.label.textContent = clip(when, LABEL_CHARS);
        el.title.textContent = when ? `when ${when}` : "";
      }
    }
    if (el.tag && el.when && el.labelAt === null) this.placeLabel(el, source, target);
  }

  // A condition's label: text on a background, placed on the curve where it covers no node.
  placeLabel(el, source, target) {
    const w = labelWidth(el.when);
    const ends = [source.x + NODE_W, source.y + NODE_H / 2, target.x, target.y + NODE_H / 2];
    const spots = LABEL_SPOTS.map((t) => pointOnEdge(...ends, t));
    const free = spots.find(([x, y]) => !this.coversNode(x - w / 2, y - LABEL_H / 2, w, LABEL_H));
    const [x, y] = free ?? spots[0];
    el.labelAt = [x, y];
    el.tag.setAttribute("transform", `translate(${x} ${y})`);
    el.labelBox.setAttribute("x", String(-w / 2));
    el.labelBox.setAttribute("width", String(w));
  }

  coversNode(x, y, w, h) {
    for (const n of this.app.doc.nodes.values()) {
      if (n.x < x + w && n.x + NODE_W > x && n.y < y + h && n.y + NODE_H > y) return true;
    }
    return false;
  }

  // Most edges have no condition: their label and tooltip are only created when one is set
  // (fewer elements make a 2,000-node graph open faster).
  createEdge(edge) {
    const g = svg("g", { "data-uid": edge.uid });
    const hit = svg("path", { class: "ed-edge-hit" });
    const line = svg("path", { class: "ed-edge-line" });
    g.append(hit, line);
    return { g, hit, line, tag: null, label: null, title: null, cls: null, geometry: null, when: null };
  }

  addEdgeLabel(el, edge) {
    el.tag = svg("g", { class: "ed-edge-tag", "data-uid": edge.uid });
    el.title = svg("title");
    el.labelBox = svg("rect", { class: "ed-edge-label-box", y: -LABEL_H / 2, height: LABEL_H, rx: 4 });
    el.label = svg("text", { class: "ed-edge-label", "text-anchor": "middle", y: 4 });
    el.tag.append(el.title, el.labelBox, el.label);
    this.labelLayer.append(el.tag);
  }

  nodeElement(uid) {
    return this.nodeEls.get(uid)?.g ?? null;
  }

  // ------------------------------------------------------------------ view

  applyView() {
    const { x, y, k } = this.view;
    this.viewport.setAttribute("transform", `translate(${x} ${y}) scale(${k})`);
    this.svg.classList.toggle("ed-low-detail", k < LOW_DETAIL_ZOOM);
    this.svg.dataset.zoom = k.toFixed(3);
    this.app.minimap?.requestDraw();
  }

  // The part of the world the canvas shows now.
  visibleWorld() {
    const rect = this.svg.getBoundingClientRect();
    const { x, y, k } = this.view;
    return { x: -x / k, y: -y / k, width: rect.width / k, height: rect.height / k };
  }

  setView(x, y, k) {
    this.view = { x, y, k: clamp(k, MIN_ZOOM, MAX_ZOOM) };
    this.applyView();
  }

  zoomBy(factor, clientX, clientY) {
    const rect = this.svg.getBoundingClientRect();
    const sx = clientX === undefined ? rect.width / 2 : clientX - rect.left;
    const sy = clientY === undefined ? rect.height / 2 : clientY - rect.top;
    const { x, y, k } = this.view;
    const next = clamp(k * factor, MIN_ZOOM, MAX_ZOOM);
    this.setView(sx - ((sx - x) * next) / k, sy - ((sy - y) * next) / k, next);
  }

  panBy(dx, dy) {
    this.setView(this.view.x + dx, this.view.y + dy, this.view.k);
  }

  bounds(uids) {
    let minX = Infinity;
    let minY = Infinity;
    let maxX = -Infinity;
    let maxY = -Infinity;
    for (const uid of uids) {
      const node = this.app.doc.nodes.get(uid);
      if (!node) continue;
      minX = Math.min(minX, node.x);
      minY = Math.min(minY, node.y);
      maxX = Math.max(maxX, node.x + NODE_W);
      maxY = Math.max(maxY, node.y + NODE_H);
    }
    return minX === Infinity ? null : { minX, minY, maxX, maxY };
  }

  fit(uids = this.app.doc.nodes.keys(), maxZoom = 1.2) {
    const box = this.bounds(uids);
    const rect = this.svg.getBoundingClientRect();
    if (!box || rect.width === 0) return;
    const pad = 40;
    // The minimap sits over the canvas's bottom-right corner: fit above it, so no node is under it.
    const minimap = this.svg.parentElement?.querySelector(".ed-minimap");
    const below = minimap && minimap.offsetParent !== null ? minimap.offsetHeight + 8 : 0;
    const k = clamp(
      Math.min(
        (rect.width - 2 * pad) / (box.maxX - box.minX),
        (rect.height - below - 2 * pad) / (box.maxY - box.minY),
        maxZoom,
      ),
      MIN_ZOOM,
      MAX_ZOOM,
    );
    const x = (rect.width - (box.maxX - box.minX) * k) / 2 - box.minX * k;
    const y = (rect.height - below - (box.maxY - box.minY) * k) / 2 - box.minY * k;
    this.setView(x, y, k);
  }

  // Pan as little as needed to bring a node fully into view.
  ensureVisible(uid, margin = 30) {
    const node = this.app.doc.nodes.get(uid);
    if (!node) return;
    const rect = this.svg.getBoundingClientRect();
    const { x, y, k } = this.view;
    const left = node.x * k + x;
    const top = node.y * k + y;
    const right = left + NODE_W * k;
    const bottom = top + NODE_H * k;
    let dx = 0;
    let dy = 0;
    if (right > rect.width - margin) dx = rect.width - margin - right;
    if (left + dx < margin) dx = margin - left;
    if (bottom > rect.height - margin) dy = rect.height - margin - bottom;
    if (top + dy < margin) dy = margin - top;
    if (dx || dy) this.panBy(dx, dy);
  }

  centerOn(uid) {
    const node = this.app.doc.nodes.get(uid);
    if (node) this.centerOnPoint(node.x + NODE_W / 2, node.y + NODE_H / 2, Math.max(this.view.k, 0.7));
  }

  centerOnPoint(worldX, worldY, k = this.view.k) {
    const rect = this.svg.getBoundingClientRect();
    this.setView(rect.width / 2 - worldX * k, rect.height / 2 - worldY * k, k);
  }

  // A free spot for a node added by a palette click: right of `after` (the selected node,
  // so clicking handlers one after another lays out a chain), else near the view's middle.
  freeSpot(after = null) {
    const taken = [...this.app.doc.nodes.values()];
    const overlaps = (x, y) =>
      taken.some((n) => Math.abs(n.x - x) < NODE_W + 24 && Math.abs(n.y - y) < NODE_H + 20);
    if (after) {
      const x = Math.round(after.x + NODE_W + 72);
      for (let row = 0; row < 200; row++) {
        const y = Math.round(after.y + row * (NODE_H + 24));
        if (!overlaps(x, y)) return { x, y };
      }
    }
    const rect = this.svg.getBoundingClientRect();
    const center = this.toWorld(rect.left + rect.width / 3, rect.top + rect.height / 3);
    for (let ring = 0; ring < 40; ring++) {
      for (let col = 0; col <= ring; col++) {
        const x = Math.round(center.x + col * (NODE_W + 48));
        const y = Math.round(center.y + (ring - col) * (NODE_H + 28));
        if (!overlaps(x, y)) return { x, y };
      }
    }
    return { x: Math.round(center.x), y: Math.round(center.y) };
  }

  toWorld(clientX, clientY) {
    const rect = this.svg.getBoundingClientRect();
    const { x, y, k } = this.view;
    return { x: (clientX - rect.left - x) / k, y: (clientY - rect.top - y) / k };
  }

  // ------------------------------------------------------------------ input

  onPointerDown(e) {
    if (e.button !== 0 && e.button !== 1) return;
    this.svg.focus({ preventScroll: true });
    const target = e.target;
    const nodeEl = target.closest(".ed-node");
    const edgeEl = target.closest(".ed-edge, .ed-edge-tag");
    const start = { x: e.clientX, y: e.clientY };
    if (e.button === 1) {
      this.gesture = { kind: "pan", start, view: { ...this.view }, moved: false };
    } else if (target.closest(".ed-port-out") && nodeEl && this.app.canEdit) {
      this.gesture = { kind: "connect", source: nodeEl.dataset.uid, start };
    } else if (nodeEl) {
      const uid = nodeEl.dataset.uid;
      const additive = e.shiftKey || e.metaKey || e.ctrlKey;
      this.app.pressNode(uid, additive);
      this.gesture = { kind: "move", uid, additive, start, last: start, moved: false };
    } else if (edgeEl) {
      this.app.pressEdge(edgeEl.dataset.uid, e.shiftKey || e.metaKey || e.ctrlKey);
      this.gesture = null;
      return;
    } else if (e.shiftKey) {
      this.gesture = { kind: "marquee", start, additive: true };
    } else {
      this.gesture = { kind: "pan", start, view: { ...this.view }, moved: false };
    }
    this.svg.setPointerCapture(e.pointerId);
    e.preventDefault();
  }

  onPointerMove(e) {
    const g = this.gesture;
    if (!g) return;
    const dx = e.clientX - g.start.x;
    const dy = e.clientY - g.start.y;
    if (!g.moved && Math.hypot(dx, dy) < DRAG_THRESHOLD) return;
    const first = !g.moved;
    g.moved = true;
    if (g.kind === "pan") {
      if (first) this.startPanning();
      this.setView(g.view.x + dx, g.view.y + dy, g.view.k);
    } else if (g.kind === "move") {
      if (first) this.app.beginMove(g.uid);
      const k = this.view.k;
      this.app.moveSelection((e.clientX - g.last.x) / k, (e.clientY - g.last.y) / k);
      g.last = { x: e.clientX, y: e.clientY };
    } else if (g.kind === "connect") {
      this.drawDraftEdge(g.source, this.toWorld(e.clientX, e.clientY));
    } else if (g.kind === "marquee") {
      const rect = this.svg.getBoundingClientRect();
      const x = Math.min(e.clientX, g.start.x) - rect.left;
      const y = Math.min(e.clientY, g.start.y) - rect.top;
      Object.entries({ x, y, width: Math.abs(dx), height: Math.abs(dy), visibility: "visible" }).forEach(
        ([key, value]) => this.marquee.setAttribute(key, String(value)),
      );
    }
  }

  onPointerUp(e) {
    const g = this.gesture;
    this.gesture = null;
    this.stopPanning();
    if (!g) return;
    if (g.kind === "pan" && !g.moved) this.app.clearSelection();
    if (g.kind === "move" && g.moved) this.app.endMove();
    if (g.kind === "move" && !g.moved) this.app.clickNode?.(g.uid, g.additive);
    if (g.kind === "connect") {
      const under = document.elementFromPoint(e.clientX, e.clientY)?.closest?.(".ed-node");
      if (under && under.dataset.uid) this.app.connect(g.source, under.dataset.uid);
      else this.hideDraftEdge();
    }
    if (g.kind === "marquee") {
      this.marquee.setAttribute("visibility", "hidden");
      const a = this.toWorld(g.start.x, g.start.y);
      const b = this.toWorld(e.clientX, e.clientY);
      const [x1, x2] = [Math.min(a.x, b.x), Math.max(a.x, b.x)];
      const [y1, y2] = [Math.min(a.y, b.y), Math.max(a.y, b.y)];
      const inside = [...this.app.doc.nodes.values()]
        .filter((n) => n.x + NODE_W >= x1 && n.x <= x2 && n.y + NODE_H >= y1 && n.y <= y2)
        .map((n) => n.uid);
      this.app.selectNodes(inside, g.additive);
    }
  }

  startPanning() {
    this.svg.classList.add("ed-panning");
    const fast = this.edgeEls.size > FAST_PAN_EDGES && this.view.k < LOW_DETAIL_ZOOM;
    this.svg.classList.toggle("ed-fast-pan", fast);
  }

  stopPanning() {
    this.svg.classList.remove("ed-panning", "ed-fast-pan");
  }

  cancelGesture() {
    this.stopPanning();
    if (this.gesture?.kind === "move" && this.gesture.moved) this.app.endMove();
    this.gesture = null;
    this.hideDraftEdge();
    this.marquee.setAttribute("visibility", "hidden");
  }

  onWheel(e) {
    e.preventDefault();
    const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
    this.zoomBy(Math.exp(-delta * 0.0015), e.clientX, e.clientY);
  }

  drawDraftEdge(sourceUid, point, refused = false) {
    const source = this.app.doc.nodes.get(sourceUid);
    if (!source) return;
    this.draftEdge.setAttribute("d", edgePath(source.x + NODE_W, source.y + NODE_H / 2, point.x, point.y));
    this.draftEdge.setAttribute("visibility", "visible");
    this.draftEdge.classList.toggle("ed-refused", refused);
  }

  // Keep a refused connection drawn (red, dashed) next to the highlighted cycle.
  showRefusedEdge(sourceUid, targetUid) {
    const target = this.app.doc.nodes.get(targetUid);
    if (!target) return this.hideDraftEdge();
    this.drawDraftEdge(sourceUid, { x: target.x, y: target.y + NODE_H / 2 }, true);
  }

  hideDraftEdge() {
    this.draftEdge.setAttribute("visibility", "hidden");
    this.draftEdge.classList.remove("ed-refused");
  }
}

// The point at parameter t of the curve edgePath draws.
function pointOnEdge(sx, sy, tx, ty, t) {
  const [c1x, c1y, c2x, c2y] = controlPoints(sx, sy, tx, ty);
  const u = 1 - t;
  const x = u * u * u * sx + 3 * u * u * t * c1x + 3 * u * t * t * c2x + t * t * t * tx;
  const y = u * u * u * sy + 3 * u * u * t * c1y + 3 * u * t * t * c2y + t * t * t * ty;
  return [x, y];
}

function controlPoints(sx, sy, tx, ty) {
  const backwards = tx < sx + 20;
  const dx = backwards ? 80 : Math.max(40, Math.abs(tx - sx) / 2);
  const dy = backwards ? NODE_H + Math.min(240, Math.abs(sx - tx) * 0.15) : 0;
  return [sx + dx, sy + dy, tx - dx, ty + dy];
}

// A cubic curve from an output port to an input port; an edge that goes backwards (target
// left of its source, as a cycle-closing one does) loops below instead of crossing itself.
function edgePath(sx, sy, tx, ty) {
  const [c1x, c1y, c2x, c2y] = controlPoints(sx, sy, tx, ty);
  return `M ${sx} ${sy} C ${c1x} ${c1y}, ${c2x} ${c2y}, ${tx} ${ty}`;
}
