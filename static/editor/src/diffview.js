// Two versions on one canvas: the newer version's graph plus what the older one had and
// the newer lost. Added nodes and edges are green, removed ones red, changed nodes amber;
// the side list names every change, field by field.
import { Api } from "./api.js";
import { Canvas } from "./canvas.js";
import { $, h, replaceChildren } from "./dom.js";
import { Layouter, quickLayout } from "./layouter.js";
import { Doc } from "./model.js";

const VALUE_CHARS = 160;

const show = (value) => {
  const text = value === null || value === undefined ? "(none)" : JSON.stringify(value);
  return text.length > VALUE_CHARS ? `${text.slice(0, VALUE_CHARS - 1)}…` : text;
};

export class DiffView {
  constructor(root, config) {
    this.root = root;
    this.config = config;
    this.api = new Api(config);
    this.canEdit = false;
    this.doc = new Doc();
    this.selection = { nodes: new Set(), edges: new Set() };
    this.nodeState = new Map();
    this.edgeState = new Map();
    this.listItems = new Map();
    this.timings = {};
    this.canvas = new Canvas($("#ed-canvas", root), this);
  }

  async start() {
    const { from, to } = this.config.diff;
    this.root.dataset.layout = "idle";
    this.root.querySelector('[data-cmd="fit"]')?.addEventListener("click", () => this.canvas.fit());
    // The API's diff names what changed; the two versions give the graphs to draw it on.
    const answers = await Promise.all([this.api.version(from), this.api.version(to), this.api.diff(from, to)]);
    const refused = answers.find((res) => !res.ok);
    if (refused) {
      $("#ed-status", this.root).textContent = refused.error;
      return;
    }
    const [old, current, { diff }] = answers.map((res) => res.data);
    const data = { old, new: current, diff };
    this.build(data);
    this.renderList(data);
    this.canvas.sync();
    this.canvas.fit();
    this.root.dataset.layout = "running";
    const result = await new Layouter().layout(this.doc);
    if (!result.error) {
      for (const [uid, [x, y]] of result.positions) Object.assign(this.doc.nodes.get(uid), { x, y });
    }
    this.canvas.sync();
    this.canvas.fit();
    this.root.dataset.layout = "done";
  }

  build({ old, new: current, diff }) {
    const { doc } = Doc.fromDefinition(current.definition);
    const oldNodes = new Map((old.definition.nodes ?? []).map((n) => [n.id, n]));
    for (const id of diff.nodes_removed) doc.addNode({ ...oldNodes.get(id) }, 0, 0);
    const edgeData = new Map((old.definition.edges ?? []).map(({ source, target, ...rest }) => [`${source}\u0000${target}`, rest]));
    for (const { source, target } of diff.edges_removed) {
      const a = doc.nodeById(source);
      const b = doc.nodeById(target);
      if (a && b) this.edgeState.set(doc.addEdge(a.uid, b.uid, edgeData.get(`${source}\u0000${target}`) ?? {}).uid, "removed");
    }
    const mark = (ids, state) => ids.forEach((id) => doc.nodeById(id) && this.nodeState.set(doc.nodeById(id).uid, state));
    mark(diff.nodes_added, "added");
    mark(diff.nodes_removed, "removed");
    mark(diff.nodes_changed.map((c) => c.node_id), "changed");
    const markEdges = (edges, state) => {
      for (const { source, target } of edges) {
        const a = doc.nodeById(source);
        const b = doc.nodeById(target);
        const edge = a && b ? doc.findEdge(a.uid, b.uid) : null;
        if (edge) this.edgeState.set(edge.uid, state);
      }
    };
    markEdges(diff.edges_added, "added");
    markEdges(diff.edges_changed, "changed");
    const quick = quickLayout(doc);
    for (const node of doc.nodes.values()) Object.assign(node, quick.get(node.uid));
    this.doc.replaceWith(doc);
  }

  renderList({ old, new: current, diff }) {
    const list = $("#ed-diff-list", this.root);
    const section = (title, items) => (items.length ? [h("h4", { text: `${title} (${items.length})` }), h("ul", {}, items)] : []);
    const nodeItem = (id, state, changes = []) => {
      const item = h(
        "li",
        { class: `ed-diff-item diff-${state}`, tabindex: "0", dataset: { node: id }, onclick: () => this.focusNode(id) },
        h("code", { text: id }),
        changes.length ? h("ul", { class: "ed-changes" }, changes.map(changeItem)) : null,
      );
      this.listItems.set(id, item);
      return item;
    };
    const changeItem = (c) => h("li", {}, h("span", { class: "ed-field-name", text: c.field }), ": ", h("del", { text: show(c.old) }), " → ", h("ins", { text: show(c.new) }));
    const edgeItem = (e, state) =>
      h("li", { class: `ed-diff-item diff-${state}` }, h("code", { text: `${e.source} → ${e.target}` }), e.changes ? h("ul", { class: "ed-changes" }, e.changes.map(changeItem)) : null);
    const total = Object.values(diff).reduce((sum, items) => sum + items.length, 0);
    replaceChildren(
      list,
      h("p", {}, `From v${old.number} (${old.status}) to v${current.number} (${current.status}): `, h("strong", { text: total ? `${total} changes` : "no structural change" })),
      h("p", { class: "ed-legend" }, h("span", { class: "diff-added", text: "added" }), " ", h("span", { class: "diff-removed", text: "removed" }), " ", h("span", { class: "diff-changed", text: "changed" })),
      section("Nodes added", diff.nodes_added.map((id) => nodeItem(id, "added"))),
      section("Nodes removed", diff.nodes_removed.map((id) => nodeItem(id, "removed"))),
      section("Nodes changed", diff.nodes_changed.map((c) => nodeItem(c.node_id, "changed", c.changes))),
      section("Edges added", diff.edges_added.map((e) => edgeItem(e, "added"))),
      section("Edges removed", diff.edges_removed.map((e) => edgeItem(e, "removed"))),
      section("Edges changed", diff.edges_changed.map((e) => edgeItem(e, "changed"))),
    );
    this.root.dataset.changes = String(total);
  }

  focusNode(id) {
    const node = this.doc.nodeById(id);
    if (!node) return;
    this.selection = { nodes: new Set([node.uid]), edges: new Set() };
    this.canvas.centerOn(node.uid);
    this.canvas.requestSync();
  }

  nodeClass(node) {
    const state = this.nodeState.get(node.uid);
    return [state ? `diff-${state}` : "", this.selection.nodes.has(node.uid) ? "selected" : ""].join(" ").trim();
  }

  edgeClass(edge) {
    const state = this.edgeState.get(edge.uid);
    return [state ? `diff-${state}` : "", this.selection.edges.has(edge.uid) ? "selected" : ""].join(" ").trim();
  }

  pressNode(uid) {
    this.selection = { nodes: new Set([uid]), edges: new Set() };
    this.canvas.requestSync();
    const item = this.listItems.get(this.doc.nodes.get(uid).data.id);
    for (const el of this.listItems.values()) el.classList.toggle("ed-current", el === item);
    item?.scrollIntoView({ block: "nearest" });
  }

  pressEdge(uid) {
    this.selection = { nodes: new Set(), edges: new Set([uid]) };
    this.canvas.requestSync();
  }

  clearSelection() {
    this.selection = { nodes: new Set(), edges: new Set() };
    this.canvas.requestSync();
  }

  selectNodes(uids) {
    this.selection = { nodes: new Set(uids), edges: new Set() };
    this.canvas.requestSync();
  }

  beginMove() {}

  moveSelection(dx, dy) {
    for (const uid of this.selection.nodes) {
      const node = this.doc.nodes.get(uid);
      node.x += dx;
      node.y += dy;
    }
    this.canvas.requestSync();
  }

  endMove() {}

  connect() {}

  addNode() {}
}
