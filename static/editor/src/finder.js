// Find a node by name (Ctrl+F): a box over the canvas; each Enter centres and selects the
// next node whose id (or handler) contains the text, exact and prefix matches first.
import { h } from "./dom.js";

export class Finder {
  constructor(host, app) {
    this.app = app;
    this.matches = [];
    this.current = -1;
    this.input = h("input", {
      type: "search",
      id: "ed-find-input",
      placeholder: "Find a node by id or handler",
      "aria-label": "Find a node",
      autocomplete: "off",
    });
    this.count = h("span", { class: "ed-find-count", id: "ed-find-count", "aria-live": "polite" });
    this.box = h(
      "div",
      { class: "ed-find", id: "ed-find", role: "search", hidden: true },
      this.input,
      this.count,
      h("button", { type: "button", title: "Previous (Shift+Enter)", "aria-label": "Previous match", onclick: () => this.step(-1), text: "↑" }),
      h("button", { type: "button", title: "Next (Enter)", "aria-label": "Next match", onclick: () => this.step(1), text: "↓" }),
      h("button", { type: "button", title: "Close (Escape)", "aria-label": "Close", onclick: () => this.close(), text: "×" }),
    );
    host.append(this.box);
    this.input.addEventListener("input", () => this.search());
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.step(e.shiftKey ? -1 : 1);
      else if (e.key === "Escape") this.close();
      else return;
      e.preventDefault();
    });
  }

  open() {
    this.box.hidden = false;
    this.input.focus();
    this.input.select();
    if (this.input.value) this.search();
  }

  close() {
    this.box.hidden = true;
    this.app.canvas.svg.focus({ preventScroll: true });
  }

  search() {
    const text = this.input.value.trim().toLowerCase();
    this.matches = text ? rank([...this.app.doc.nodes.values()], text) : [];
    this.current = -1;
    if (this.matches.length) this.step(1);
    else this.count.textContent = text ? "no match" : "";
  }

  step(direction) {
    if (!this.matches.length) return;
    const n = this.matches.length;
    this.current = (this.current + direction + n) % n;
    const uid = this.matches[this.current];
    this.count.textContent = `${this.current + 1} of ${n}`;
    if (!this.app.doc.nodes.has(uid)) return this.search();
    this.app.selectOnly([uid], []);
    this.app.canvas.centerOn(uid);
  }
}

// Node uids matching `text`: exact id, then id prefix, then id substring, then handler.
function rank(nodes, text) {
  const tiers = [[], [], [], []];
  for (const node of nodes) {
    const id = String(node.data.id ?? "").toLowerCase();
    const handler = String(node.data.handler ?? "").toLowerCase();
    if (id === text) tiers[0].push(node.uid);
    else if (id.startsWith(text)) tiers[1].push(node.uid);
    else if (id.includes(text)) tiers[2].push(node.uid);
    else if (handler.includes(text)) tiers[3].push(node.uid);
  }
  return tiers.flat();
}
