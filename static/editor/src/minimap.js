// The minimap: every node as a dot in its category's colour and the visible part of the
// canvas as a frame; a click or a drag on it moves the view there. Drawn on a <canvas>
// (2,000 rectangles take about a millisecond), at most once per animation frame.
import { categoryOf } from "./categories.js";
import { oncePerFrame } from "./dom.js";
import { NODE_H, NODE_W } from "./model.js";

const PAD = 6;

export class Minimap {
  constructor(host, app) {
    this.app = app;
    this.el = document.createElement("canvas");
    this.el.className = "ed-minimap";
    this.el.id = "ed-minimap";
    this.el.setAttribute("role", "img");
    this.el.setAttribute("aria-label", "Minimap: click to move the view");
    host.append(this.el);
    this.requestDraw = oncePerFrame(() => this.draw());
    this.frame = null; // world -> minimap: {minX, minY, scale}
    this.dragging = false;
    this.el.addEventListener("pointerdown", (e) => {
      this.dragging = true;
      this.el.setPointerCapture(e.pointerId);
      this.moveViewTo(e);
      e.preventDefault();
    });
    this.el.addEventListener("pointermove", (e) => this.dragging && this.moveViewTo(e));
    this.el.addEventListener("pointerup", () => (this.dragging = false));
  }

  draw() {
    const { el } = this;
    const ratio = window.devicePixelRatio || 1;
    const width = el.clientWidth;
    const height = el.clientHeight;
    if (!width || !height) return;
    if (el.width !== Math.round(width * ratio)) el.width = Math.round(width * ratio);
    if (el.height !== Math.round(height * ratio)) el.height = Math.round(height * ratio);
    const ctx = el.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const nodes = [...this.app.doc.nodes.values()];
    const box = this.app.canvas.bounds(this.app.doc.nodes.keys());
    this.el.dataset.nodes = String(nodes.length);
    if (!box) return (this.frame = null);
    const scale = Math.min((width - 2 * PAD) / (box.maxX - box.minX), (height - 2 * PAD) / (box.maxY - box.minY));
    this.frame = { minX: box.minX, minY: box.minY, scale };
    const w = Math.max(1.5, NODE_W * scale);
    const h = Math.max(1.5, NODE_H * scale);
    for (const node of nodes) {
      ctx.fillStyle = this.app.selection.nodes.has(node.uid) ? "#2563eb" : categoryOf(node.data.handler).colour;
      ctx.fillRect(PAD + (node.x - box.minX) * scale, PAD + (node.y - box.minY) * scale, w, h);
    }
    const view = this.app.canvas.visibleWorld();
    ctx.strokeStyle = "#2563eb";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(
      PAD + (view.x - box.minX) * scale,
      PAD + (view.y - box.minY) * scale,
      view.width * scale,
      view.height * scale,
    );
  }

  moveViewTo(e) {
    if (!this.frame) return;
    const rect = this.el.getBoundingClientRect();
    const { minX, minY, scale } = this.frame;
    const x = minX + (e.clientX - rect.left - PAD) / scale;
    const y = minY + (e.clientY - rect.top - PAD) / scale;
    this.app.canvas.centerOnPoint(x, y);
  }
}
