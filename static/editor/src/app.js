// The editor: owns the document, selection, undo, validation, saving and publishing, and
// wires the canvas and the side panel to them.
import { Api } from "./api.js";
import { Canvas, PALETTE_MIME } from "./canvas.js";
import { CATEGORY_ORDER, category, categoryOf, paintIcon } from "./categories.js";
import { copyFragment, pasteFragment } from "./clipboard.js";
import { $, debounce, download, h, isTyping, replaceChildren, svg } from "./dom.js";
import { Finder } from "./finder.js";
import { Inspector } from "./inspector.js";
import { Layouter, quickLayout } from "./layouter.js";
import { Minimap } from "./minimap.js";
import { definitionFromImport, Doc, EXPORT_FORMAT, UndoStack, withInputField, withPath } from "./model.js";
import { StartRunDialog } from "./startrun.js";
import { SuitePanel } from "./suitepanel.js";
import { TestRunPanel } from "./testrun.js";
import { PUBLISH_NOTE, VersionsPanel } from "./versions.js";

const VALIDATE_DELAY_MS = 300;
const MAX_PROBLEMS_SHOWN = 200;

export class Editor {
  constructor(root, config) {
    this.root = root;
    this.config = config;
    this.api = new Api(config);
    this.can = config.can;
    this.canEdit = config.can.edit;
    this.palette = new Map(config.palette.map((handler) => [handler.name, handler]));
    this.doc = new Doc();
    this.undo = new UndoStack(this.doc);
    this.selection = { nodes: new Set(), edges: new Set() };
    this.version = null;
    this.savedJson = JSON.stringify(this.doc.toDefinition());
    this.validatedJson = null;
    this.dirty = false;
    this.busy = false;
    this.issues = [];
    this.nodeIssues = new Map();
    this.edgeIssues = new Map();
    this.cycle = { nodes: new Set(), edges: new Set() };
    this.refusal = null;
    this.runState = null;
    this.validationSeq = 0;
    this.edits = 0; // changes made so far: tells a validation answer it is out of date
    this.timings = {};
    this.layouter = new Layouter();
    this.positionsKey = `switchyard:positions:${config.slug}`;
    this.canvas = new Canvas($("#ed-canvas", root), this);
    this.minimap = new Minimap($("#ed-canvas", root), this);
    this.finder = new Finder($("#ed-canvas", root), this);
    this.clipboard = null; // a fragment (clipboard.js), kept in this page only
    this.inspector = new Inspector($("#ed-inspect", root), this);
    this.versionsPanel = new VersionsPanel($("#ed-versions", root), this);
    this.testRun = new TestRunPanel($("#ed-testrun", root), this);
    this.suitePanel = new SuitePanel($("#ed-suite", root), this);
    this.scheduleValidation = debounce(() => this.validateNow(), VALIDATE_DELAY_MS);
    this.savePositionsSoon = debounce(() => this.savePositions(), 500);
  }

  async start() {
    this.bindToolbar();
    this.bindKeys();
    this.renderPalette();
    this.bindTabs();
    this.root.dataset.layout = "idle";
    if (this.config.version) {
      await this.loadVersion(this.config.version);
    } else {
      this.openDefinition({ nodes: [], edges: [] });
      this.say("A new workflow: add nodes from the palette, connect them, then save a first draft.");
    }
    this.versionsPanel.refresh();
    this.loadMcpTools();
  }

  // The MCP tools an agent node may offer (its form's picker), read once from the API; the
  // form is drawn again when they arrive. A refusal leaves the picker empty (the JSON stays editable).
  async loadMcpTools() {
    const res = await this.api.mcpTools();
    this.config.mcpTools = res.ok ? res.data : [];
    if (res.ok && res.data.length) this.inspector.render();
  }

  // ------------------------------------------------------------------ wiring

  bindToolbar() {
    const commands = {
      undo: () => this.doUndo(),
      redo: () => this.doRedo(),
      "zoom-in": () => this.canvas.zoomBy(1.25),
      "zoom-out": () => this.canvas.zoomBy(0.8),
      fit: () => this.canvas.fit(),
      layout: () => this.autoLayout({ record: true }),
      delete: () => this.deleteSelection(),
      import: () => $("#ed-import-file", this.root).click(),
      export: () => this.exportJson(),
      save: () => this.save(),
      publish: () => this.version && this.publish(this.version.number),
      find: () => this.finder.open(),
      copy: () => this.copySelection(),
      paste: () => this.paste(),
      duplicate: () => this.duplicate(),
      "start-run": () => this.openStartRun(),
    };
    this.root.addEventListener("click", (e) => {
      const button = e.target.closest("[data-cmd]");
      if (button && commands[button.dataset.cmd] && !button.disabled) commands[button.dataset.cmd]();
    });
    $("#ed-import-file", this.root)?.addEventListener("change", (e) => this.importFile(e.target));
    $("#ed-conflict-reload", this.root)?.addEventListener("click", () => this.reloadAfterConflict());
    $("#ed-conflict-download", this.root)?.addEventListener("click", () => this.exportJson());
    window.addEventListener("beforeunload", (e) => {
      if (this.dirty && this.canEdit) e.preventDefault();
    });
  }

  bindKeys() {
    document.addEventListener("keydown", (e) => {
      if (isTyping(e.target) || e.target.closest?.("dialog")) return;
      const mod = e.ctrlKey || e.metaKey;
      const key = e.key.toLowerCase();
      let handled = true;
      if ((key === "delete" || key === "backspace") && !mod) this.deleteSelection();
      else if (mod && key === "z" && e.shiftKey) this.doRedo();
      else if (mod && key === "z") this.doUndo();
      else if (mod && key === "y") this.doRedo();
      else if (mod && key === "a") this.selectNodes([...this.doc.nodes.keys()], false);
      else if (mod && key === "s") this.save();
      else if (mod && key === "f") this.finder.open();
      else if (mod && key === "c" && this.selection.nodes.size) this.copySelection();
      else if (mod && key === "v" && this.clipboard) this.paste();
      else if (mod && key === "d") this.duplicate();
      else if (key === "escape") this.clearSelection();
      else if (key === "f" && !mod) this.canvas.fit();
      else if ((key === "+" || key === "=") && !mod) this.canvas.zoomBy(1.25);
      else if (key === "-" && !mod) this.canvas.zoomBy(0.8);
      else handled = false;
      if (handled) e.preventDefault();
    });
  }

  bindTabs() {
    const tabs = [...this.root.querySelectorAll("[data-tab]")];
    for (const tab of tabs) {
      tab.addEventListener("click", () => this.showTab(tab.dataset.tab));
    }
  }

  showTab(name) {
    for (const tab of this.root.querySelectorAll("[data-tab]")) {
      const active = tab.dataset.tab === name;
      tab.setAttribute("aria-selected", String(active));
      $(`#${tab.getAttribute("aria-controls")}`, this.root).hidden = !active;
    }
  }

  // The palette: one group per category (categories.js), demo handlers last; the search
  // box hides what does not match and the groups left empty.
  renderPalette() {
    const list = $("#ed-palette-list", this.root);
    const filter = $("#ed-palette-filter", this.root);
    if (!list) return;
    const groups = new Map(CATEGORY_ORDER.map((key) => [key, []]));
    for (const handler of this.palette.values()) groups.get(categoryOf(handler.name).key).push(this.paletteItem(handler));
    const sections = [...groups].filter(([, items]) => items.length).map(([key, items]) => this.paletteGroup(category(key), items));
    const empty = h("p", { class: "ed-palette-empty", hidden: true, text: "No handler matches." });
    replaceChildren(list, sections, empty);
    filter?.addEventListener("input", () => {
      const text = filter.value.trim().toLowerCase();
      let shown = 0;
      for (const section of sections) {
        let inGroup = 0;
        for (const item of section.querySelectorAll(".ed-palette-item")) {
          item.hidden = Boolean(text) && !item.textContent.toLowerCase().includes(text);
          inGroup += item.hidden ? 0 : 1;
        }
        section.hidden = inGroup === 0;
        shown += inGroup;
      }
      empty.hidden = shown > 0;
    });
  }

  paletteGroup(cat, items) {
    const icon = svg("path");
    paintIcon(icon, cat);
    const mark = svg("svg", { viewBox: "0 0 16 16", "aria-hidden": "true" });
    mark.append(icon);
    const section = h("section", { class: `ed-palette-group cat-${cat.key}`, dataset: { category: cat.key } }, h("h3", {}, mark, cat.label), items);
    section.style.setProperty("--cat", cat.colour);
    return section;
  }

  paletteItem(handler) {
    return h(
      "button",
      {
        type: "button",
        class: "ed-palette-item",
        draggable: "true",
        title: handler.doc,
        dataset: { handler: handler.name },
        onclick: () => this.addNode(handler.name),
        ondragstart: (e) => {
          e.dataTransfer.setData(PALETTE_MIME, handler.name);
          e.dataTransfer.effectAllowed = "copy";
        },
      },
      h("strong", { text: handler.name }),
      h("span", { text: handler.summary }),
    );
  }

  say(text, kind = "info") {
    const status = $("#ed-status", this.root);
    status.textContent = text;
    status.dataset.kind = kind;
  }

  // ------------------------------------------------------------------ loading

  async loadVersion(number) {
    const started = performance.now();
    this.root.dataset.loading = "true";
    const res = await this.api.version(number);
    this.root.dataset.loading = "false";
    if (!res.ok) return this.say(`Version ${number} could not be opened: ${res.error}`, "error");
    this.timings.fetchMs = performance.now() - started;
    this.openDefinition(res.data.definition);
    this.setVersion(res.data);
    this.timings.openMs = performance.now() - started;
  }

  openDefinition(definition) {
    const started = performance.now();
    const { doc, dropped } = Doc.fromDefinition(definition);
    this.doc.replaceWith(doc);
    this.undo.clear();
    this.selection = { nodes: new Set(), edges: new Set() };
    this.runState = null;
    this.refusal = null;
    this.savedJson = JSON.stringify(this.doc.toDefinition());
    this.dirty = false;
    const placed = this.placeFromStorage();
    this.canvas.sync();
    this.canvas.fit();
    this.timings.renderMs = performance.now() - started;
    this.timings.drawnAt = performance.now(); // since navigation start
    if (!placed) this.autoLayout({ record: false });
    else this.root.dataset.layout = "done";
    if (dropped.length) this.say(`Dropped ${dropped.length} edges that name missing nodes: ${dropped.join(", ")}.`, "error");
    this.inspector.render();
    this.updateButtons();
    this.validateNow();
  }

  // Positions are a view preference, not part of the definition (whose schema is strict
  // and whose checksum covers only what runs): they live in this browser's storage.
  placeFromStorage() {
    let stored = null;
    try {
      stored = JSON.parse(localStorage.getItem(this.positionsKey) || "null");
    } catch {
      stored = null; // unreadable or disabled storage: lay out afresh
    }
    const nodes = [...this.doc.nodes.values()];
    const complete = stored && nodes.length > 0 && nodes.every((n) => Array.isArray(stored[n.data.id]));
    const quick = complete ? null : quickLayout(this.doc);
    for (const node of nodes) {
      const at = complete ? { x: stored[node.data.id][0], y: stored[node.data.id][1] } : quick.get(node.uid);
      node.x = at.x;
      node.y = at.y;
    }
    return Boolean(complete);
  }

  savePositions() {
    const positions = {};
    for (const node of this.doc.nodes.values()) positions[node.data.id] = [Math.round(node.x), Math.round(node.y)];
    try {
      localStorage.setItem(this.positionsKey, JSON.stringify(positions));
    } catch {
      // Storage full or disabled: positions are a convenience, the layout button remains.
    }
  }

  async autoLayout({ record = true, fit = true } = {}) {
    if (!this.doc.nodes.size) {
      this.root.dataset.layout = "done";
      return;
    }
    const started = performance.now();
    this.root.dataset.layout = "running";
    this.say(`Laying out ${this.doc.nodes.size} nodes…`);
    const result = await this.layouter.layout(this.doc);
    if (result.error) {
      this.root.dataset.layout = "failed";
      return this.say(`Automatic layout failed: ${result.error}`, "error");
    }
    if (record) this.undo.record();
    for (const [uid, [x, y]] of result.positions) {
      const node = this.doc.nodes.get(uid);
      if (node) Object.assign(node, { x, y });
    }
    this.canvas.sync();
    if (fit) this.canvas.fit();
    this.timings.layoutMs = performance.now() - started;
    this.timings.layoutWorkerMs = result.ms;
    this.timings.laidOutAt = performance.now();
    this.root.dataset.layout = "done";
    this.say(`Laid out ${this.doc.nodes.size} nodes in ${Math.round(this.timings.layoutMs)} ms.`);
    this.savePositionsSoon();
    this.updateButtons();
  }

  setVersion(detail) {
    const { definition, ...version } = detail;
    this.version = version;
    const label = $("#ed-version-label", this.root);
    const parts = [`v${version.number}`, version.test_snapshot ? "test version (a frozen draft, no release)" : version.status];
    if (version.status === "draft") parts.push(`revision ${version.revision}`);
    if (version.active) parts.push("active");
    label.textContent = parts.join(" · ");
    label.dataset.status = version.status;
    const url = new URL(window.location.href);
    url.searchParams.set("version", String(version.number));
    window.history.replaceState(null, "", url);
    this.updateButtons();
  }

  // ------------------------------------------------------------------ changing

  // Apply a change to the document as one undo step (or part of the step `key` names).
  change(fn, { key = null, panel = false } = {}) {
    if (!this.canEdit) return;
    this.undo.record(key);
    fn();
    this.afterChange({ panel });
  }

  afterChange({ panel = false } = {}) {
    this.edits += 1;
    this.clearRefusal();
    for (const uid of this.selection.nodes) if (!this.doc.nodes.has(uid)) this.selection.nodes.delete(uid);
    for (const uid of this.selection.edges) if (!this.doc.edges.has(uid)) this.selection.edges.delete(uid);
    this.dirty = true;
    this.canvas.requestSync();
    if (panel) this.inspector.render();
    this.updateButtons();
    this.scheduleValidation();
  }

  doUndo() {
    if (this.canEdit && this.undo.undo()) this.afterChange({ panel: true });
  }

  doRedo() {
    if (this.canEdit && this.undo.redo()) this.afterChange({ panel: true });
  }

  addNode(handlerName, at = null) {
    const handler = this.palette.get(handlerName);
    if (!handler || !this.canEdit) return null;
    const selected = this.selection.nodes.size === 1 ? this.doc.nodes.get([...this.selection.nodes][0]) : null;
    const spot = at ?? this.canvas.freeSpot(selected);
    let node = null;
    this.change(() => {
      node = this.doc.addNode({ id: this.doc.uniqueId(handler.name), handler: handler.name, config: {} }, spot.x, spot.y);
    });
    this.selectOnly([node.uid], []);
    this.canvas.ensureVisible(node.uid);
    this.savePositionsSoon();
    return node;
  }

  editNode(uid, path, value) {
    const node = this.doc.nodes.get(uid);
    if (!node) return;
    this.change(() => (node.data = withPath(node.data, path, value)), { key: `${uid}:${path.join(".")}` });
  }

  changeHandler(uid, name) {
    const node = this.doc.nodes.get(uid);
    if (!node || !this.palette.has(name)) return;
    this.change(() => (node.data = { ...node.data, handler: name, config: {} }), { panel: true });
  }

  // A node's compensate handler (a saga step): a new one starts with an empty config; "" removes it.
  changeCompensate(uid, name) {
    const node = this.doc.nodes.get(uid);
    if (!node || (name && !this.palette.has(name))) return;
    this.change(() => (node.data = withPath(node.data, ["compensate"], name ? { handler: name, config: {} } : undefined)), { panel: true });
  }

  editEdge(uid, when) {
    const edge = this.doc.edges.get(uid);
    if (!edge) return;
    this.change(() => (edge.data = withPath(edge.data, ["when"], when.trim() ? when : undefined)), { key: `${uid}:when` });
  }

  // A workflow-level field (concurrency, debounce, singleton): `path` inside the document's
  // other fields; undefined removes it. `extra` is replaced, never changed in place (undo).
  editWorkflow(path, value) {
    this.change(() => (this.doc.extra = withPath(this.doc.extra, path, value)), { key: `workflow:${path.join(".")}` });
  }

  editDescription(text) {
    this.change(() => (this.doc.description = text), { key: "description" });
  }

  deleteSelection() {
    const { nodes, edges } = this.selection;
    if (!this.canEdit || (!nodes.size && !edges.size)) return;
    this.change(() => {
      this.doc.removeNodes(nodes);
      this.doc.removeEdges(edges);
    });
    this.clearSelection();
  }

  copySelection() {
    if (!this.selection.nodes.size) return;
    this.clipboard = copyFragment(this.doc, this.selection.nodes);
    const { nodes, edges } = this.clipboard;
    this.say(`Copied ${nodes.length} nodes and ${edges.length} edges between them: Ctrl+V pastes them.`);
    this.updateButtons();
  }

  paste(fragment = this.clipboard) {
    if (!this.canEdit || !fragment) return;
    let uids = [];
    this.change(() => (uids = pasteFragment(this.doc, fragment)));
    this.selectNodes(uids, false);
    this.savePositionsSoon();
    this.say(`Pasted ${uids.length} nodes with new ids.`, "ok");
  }

  duplicate() {
    if (this.selection.nodes.size) this.paste(copyFragment(this.doc, this.selection.nodes));
  }

  openStartRun() {
    this.startRun ??= new StartRunDialog(this.config.startRun);
    this.startRun.open(this.config.slug);
  }

  // Add an edge only if the graph core accepts it: a connection that would close a cycle
  // (or repeat an edge, or loop a node onto itself) is refused and the cycle highlighted.
  async connect(sourceUid, targetUid) {
    this.canvas.hideDraftEdge();
    if (!this.canEdit) return;
    const existing = this.doc.findEdge(sourceUid, targetUid);
    if (existing) return this.selectOnly([], [existing.uid]);
    const candidate = this.doc.toDefinition();
    const source = this.doc.nodes.get(sourceUid).data.id;
    const target = this.doc.nodes.get(targetUid).data.id;
    candidate.edges.push({ source, target });
    const edgeIndex = candidate.edges.length - 1;
    this.root.dataset.validation = "pending";
    const res = await this.api.check(candidate);
    this.root.dataset.validation = "done";
    if (!res.ok) return this.say(`Could not check the connection: ${res.error}`, "error");
    const known = new Set(this.issues.filter((i) => i.code === "cycle").map((i) => i.cycle.join(" ")));
    const blocking = res.data.errors.filter(
      (i) => i.field.startsWith(`edges[${edgeIndex}]`) || (i.code === "cycle" && !known.has(i.cycle.join(" "))),
    );
    if (blocking.length) return this.refuse(sourceUid, targetUid, `${source} → ${target}`, blocking[0]);
    let edge = null;
    this.change(() => (edge = this.doc.addEdge(sourceUid, targetUid)));
    this.selectOnly([], [edge.uid]);
  }

  refuse(sourceUid, targetUid, label, issue) {
    const { message } = issue;
    this.refusal = { label, message, cycle: this.cycleOf(issue.cycle ?? []) };
    this.canvas.showRefusedEdge(sourceUid, targetUid);
    this.canvas.requestSync();
    this.renderProblems();
    this.say(`Connection ${label} refused: ${message}`, "error");
  }

  clearRefusal() {
    if (!this.refusal) return;
    this.refusal = null;
    this.canvas.hideDraftEdge();
    this.renderProblems();
  }

  // ------------------------------------------------------------------ selection and moves

  selectOnly(nodeUids, edgeUids) {
    this.selection = { nodes: new Set(nodeUids), edges: new Set(edgeUids) };
    this.selectionChanged();
  }

  selectNodes(uids, additive) {
    if (!additive) this.selection = { nodes: new Set(), edges: new Set() };
    for (const uid of uids) this.selection.nodes.add(uid);
    this.selectionChanged();
  }

  clearSelection() {
    if (!this.selection.nodes.size && !this.selection.edges.size) return;
    this.selectOnly([], []);
  }

  pressNode(uid, additive) {
    const { nodes } = this.selection;
    if (additive) {
      if (nodes.has(uid)) nodes.delete(uid);
      else nodes.add(uid);
      this.selectionChanged();
    } else if (!nodes.has(uid) || this.selection.edges.size) {
      this.selectOnly([uid], []);
    }
  }

  // A click (no drag) on one node of a group selects just that node.
  clickNode(uid, additive) {
    const { nodes, edges } = this.selection;
    if (!additive && (nodes.size > 1 || edges.size)) this.selectOnly([uid], []);
  }

  pressEdge(uid, additive) {
    if (!additive) return this.selectOnly([], [uid]);
    const { edges } = this.selection;
    if (edges.has(uid)) edges.delete(uid);
    else edges.add(uid);
    this.selectionChanged();
  }

  selectionChanged() {
    this.canvas.requestSync();
    this.minimap.requestDraw();
    this.inspector.render();
    this.updateButtons();
    const { nodes, edges } = this.selection;
    if (nodes.size + edges.size) this.showTab("inspect");
  }

  beginMove(uid) {
    if (!this.selection.nodes.has(uid)) this.selectOnly([uid], []);
    this.undo.record();
  }

  moveSelection(dx, dy) {
    for (const uid of this.selection.nodes) {
      const node = this.doc.nodes.get(uid);
      node.x += dx;
      node.y += dy;
    }
    this.canvas.requestSync();
  }

  endMove() {
    this.undo.breakCoalescing();
    this.savePositionsSoon();
    this.updateButtons();
  }

  // ------------------------------------------------------------------ validation

  async validateNow() {
    this.scheduleValidation.cancel();
    const definition = this.doc.toDefinition();
    const order = this.doc.order();
    const json = JSON.stringify(definition);
    this.dirty = json !== this.savedJson;
    this.updateButtons();
    const seq = ++this.validationSeq; // answers to older requests are ignored from now on
    if (json === this.validatedJson) {
      this.root.dataset.validation = "done"; // back to what the shown issues describe (undo)
      return;
    }
    const edits = this.edits;
    this.root.dataset.validation = "pending";
    const res = await this.api.check(definition);
    // Stale if a newer check started, or the document changed since (one is scheduled).
    if (seq !== this.validationSeq || edits !== this.edits) return;
    this.root.dataset.validation = "done";
    if (!res.ok) return this.say(`Could not validate: ${res.error}`, "error");
    this.validatedJson = json;
    this.applyIssues(res.data.errors, order, res.data.warnings ?? []);
  }

  // `warnings` (the server's, core/contracts.template_gaps): placeholders nothing is sure to
  // provide; listed under the problems, never blocking a save.
  applyIssues(issues, order, warnings = []) {
    this.warnings = warnings.map((issue) => ({ ...issue, target: this.locate(issue, order) }));
    this.issues = issues.map((issue) => ({ ...issue, target: this.locate(issue, order) }));
    this.nodeIssues = new Map();
    this.edgeIssues = new Map();
    const cycleNodes = new Set();
    const cycleEdges = new Set();
    for (const issue of this.issues) {
      const { kind, uid } = issue.target;
      const index = kind === "node" ? this.nodeIssues : kind === "edge" ? this.edgeIssues : null;
      if (index && uid) index.set(uid, [...(index.get(uid) ?? []), issue]);
      if (kind === "cycle") {
        const cycle = this.cycleOf(issue.cycle);
        cycle.nodes.forEach((uid) => cycleNodes.add(uid));
        cycle.edges.forEach((uid) => cycleEdges.add(uid));
      }
    }
    this.cycle = { nodes: cycleNodes, edges: cycleEdges };
    this.root.dataset.issues = String(this.issues.length);
    this.canvas.requestSync();
    this.renderProblems();
    this.inspector.showIssues();
    this.updateButtons();
  }

  // Map an issue's JSON path to what it is about: nodes[2].retry -> node, field "retry".
  locate(issue, order) {
    if (issue.code === "cycle") return { kind: "cycle" };
    let match = /^nodes\[(\d+)\]\.?(.*)$/.exec(issue.field);
    if (match) return { kind: "node", uid: order.nodeUids[Number(match[1])], field: match[2] };
    match = /^edges\[(\d+)\]\.?(.*)$/.exec(issue.field);
    if (match) return { kind: "edge", uid: order.edgeUids[Number(match[1])], field: match[2] };
    return { kind: "document" };
  }

  // A cycle's node ids, as the core lists them (["a", "b", "a"]) -> the uids of its nodes
  // and of the edges along it.
  cycleOf(ids) {
    const nodes = new Set();
    const edges = new Set();
    const uids = ids.map((id) => this.doc.nodeById(id)?.uid);
    uids.forEach((uid) => uid && nodes.add(uid));
    for (let i = 0; i + 1 < uids.length; i++) {
      const edge = uids[i] && uids[i + 1] ? this.doc.findEdge(uids[i], uids[i + 1]) : null;
      if (edge) edges.add(edge.uid);
    }
    return { nodes, edges };
  }

  renderProblems() {
    const list = $("#ed-problems-list", this.root);
    const items = [];
    if (this.refusal) {
      items.push(
        h("li", { class: "ed-problem ed-refusal" }, h("span", { class: "ed-where", text: `refused ${this.refusal.label}` }), this.refusal.message),
      );
    }
    for (const issue of this.issues.slice(0, MAX_PROBLEMS_SHOWN)) {
      items.push(
        h(
          "li",
          { class: "ed-problem", tabindex: "0", onclick: () => this.reveal(issue), onkeydown: (e) => e.key === "Enter" && this.reveal(issue) },
          h("span", { class: "ed-where", text: this.describe(issue) }),
          issue.message,
          this.addFieldButton(issue),
        ),
      );
    }
    if (this.issues.length > MAX_PROBLEMS_SHOWN) {
      items.push(h("li", { class: "ed-muted", text: `… and ${this.issues.length - MAX_PROBLEMS_SHOWN} more.` }));
    }
    if (!items.length) items.push(h("li", { class: "ed-ok", text: "No problems: this definition is valid." }));
    for (const issue of (this.warnings ?? []).slice(0, MAX_PROBLEMS_SHOWN)) items.push(this.warningItem(issue));
    replaceChildren(list, items);
    const count = this.issues.length + (this.refusal ? 1 : 0);
    $("#ed-problems-count", this.root).textContent = String(count);
    $("#ed-problems", this.root).dataset.count = String(count);
  }

  warningItem(issue) {
    return h(
      "li",
      { class: "ed-problem ed-warning", tabindex: "0", onclick: () => this.reveal(issue), onkeydown: (e) => e.key === "Enter" && this.reveal(issue) },
      h("span", { class: "ed-where", text: `warning · ${this.describe(issue)}` }),
      issue.message,
      this.addFieldButton(issue),
    );
  }

  // One click adds the run-input field a placeholder needs to the input schema (a required string).
  addFieldButton(issue) {
    const name = issue.input_field;
    if (!name || !this.canEdit) return null;
    const add = (event) => {
      event.stopPropagation();
      this.change(() => (this.doc.inputSchema = withInputField(this.doc.inputSchema, name)));
      this.say(`Added ${name} (a required string) to the input schema; save to keep it.`);
    };
    return h("button", { type: "button", class: "ed-add-field", "data-add-field": name, onclick: add, text: `Add ${name} to input schema` });
  }

  describe(issue) {
    const { kind, uid, field } = issue.target;
    if (kind === "node") {
      const id = this.doc.nodes.get(uid)?.data.id ?? "?";
      return field ? `node ${id} · ${field}` : `node ${id}`;
    }
    if (kind === "edge") {
      const edge = this.doc.edges.get(uid);
      const label = edge ? `${this.doc.nodes.get(edge.source).data.id} → ${this.doc.nodes.get(edge.target).data.id}` : "?";
      return field ? `edge ${label} · ${field}` : `edge ${label}`;
    }
    return kind === "cycle" ? "graph" : issue.field || "definition";
  }

  reveal(issue) {
    const { kind, uid } = issue.target;
    if (kind === "node" && this.doc.nodes.has(uid)) {
      this.selectOnly([uid], []);
      this.canvas.centerOn(uid);
    } else if (kind === "edge" && this.doc.edges.has(uid)) {
      this.selectOnly([], [uid]);
      this.canvas.centerOn(this.doc.edges.get(uid).source);
    } else if (kind === "cycle") {
      this.canvas.fit(this.cycle.nodes);
    }
  }

  // ------------------------------------------------------------------ canvas decoration

  nodeClass(node) {
    const parts = [];
    const uid = node.uid;
    if (this.selection.nodes.has(uid)) parts.push("selected");
    if (this.nodeIssues.has(uid)) parts.push("has-issue");
    if (this.cycle.nodes.has(uid) || this.refusal?.cycle.nodes.has(uid)) parts.push("in-cycle");
    const state = this.runState?.nodes?.[node.data.id];
    if (state) parts.push(`run-${state.status}`);
    return parts.join(" ");
  }

  edgeClass(edge) {
    const parts = [];
    const uid = edge.uid;
    if (this.selection.edges.has(uid)) parts.push("selected");
    if (this.edgeIssues.has(uid)) parts.push("has-issue");
    if (this.cycle.edges.has(uid) || this.refusal?.cycle.edges.has(uid)) parts.push("in-cycle");
    if (edge.data.when) parts.push("has-when");
    return parts.join(" ");
  }

  setRunState(state) {
    this.runState = state;
    this.canvas.requestSync();
    this.inspector.showRun();
  }

  // ------------------------------------------------------------------ buttons

  updateButtons() {
    const v = this.version;
    const set = (cmd, disabled, title) => {
      const button = this.root.querySelector(`[data-cmd="${cmd}"]`);
      if (!button) return;
      button.disabled = disabled;
      if (title !== undefined) button.title = title;
    };
    const problems = this.issues.length;
    set("undo", !this.canEdit || !this.undo.past.length);
    set("redo", !this.canEdit || !this.undo.future.length);
    set("delete", !this.canEdit || !(this.selection.nodes.size + this.selection.edges.size));
    set("duplicate", !this.canEdit || !this.selection.nodes.size);
    set("copy", !this.selection.nodes.size);
    set("paste", !this.canEdit || !this.clipboard);
    const saveBlock = this.busy
      ? "Working…"
      : !this.dirty
        ? "No unsaved changes."
        : problems
          ? `Fix the ${problems} problems listed below first: only valid definitions are saved.`
          : "";
    set("save", Boolean(saveBlock), saveBlock || "Save (Ctrl+S)");
    const saveButton = this.root.querySelector('[data-cmd="save"]');
    if (saveButton) saveButton.textContent = !v || v.status === "published" ? "Save as new draft" : "Save draft";
    const publishBlock = this.busy
      ? "Working…"
      : !v || v.status !== "draft"
        ? "Only a saved draft can be published."
        : this.dirty
          ? "Save your changes first."
          : problems
            ? "Fix the problems first: nothing invalid can be published."
            : "";
    set("publish", Boolean(publishBlock), publishBlock || PUBLISH_NOTE);
    this.root.dataset.dirty = String(this.dirty);
    this.testRun.refresh();
    this.suitePanel.refresh();
  }

  // ------------------------------------------------------------------ saving

  async save() {
    if (!this.canEdit || this.busy) return;
    await this.validateNow();
    if (!this.dirty) return this.say("Nothing to save.");
    if (this.issues.length) return this.say("Not saved: fix the problems listed below first.", "error");
    const definition = this.doc.toDefinition();
    const order = this.doc.order();
    const v = this.version;
    const comment = $("#ed-comment", this.root)?.value ?? "";
    this.busy = true;
    this.updateButtons();
    this.say("Saving…");
    const started = performance.now();
    // A draft changes in place if nobody saved it since it was read (its ETag as If-Match);
    // anything else (a published version, a new workflow) starts the next draft.
    const res =
      v && v.status === "draft" ? await this.api.updateDraft(v, definition, comment) : await this.api.createDraft(definition, comment);
    this.timings.saveMs = performance.now() - started;
    this.busy = false;
    if (res.ok) {
      this.savedJson = JSON.stringify(definition);
      this.dirty = JSON.stringify(this.doc.toDefinition()) !== this.savedJson;
      this.hideConflict();
      this.setVersion(res.data);
      const comment = $("#ed-comment", this.root);
      if (comment) comment.value = "";
      this.say(res.status === 201 ? `Saved as new draft v${res.data.number}.` : `Saved draft v${res.data.number} (revision ${res.data.revision}).`, "ok");
      this.versionsPanel.refresh();
    } else if (res.status === 409 || res.status === 412) {
      this.showConflict(res.error);
    } else {
      const issues = definitionIssues(res.errors);
      if (issues.length) this.applyIssues(issues, order);
      this.say(`Not saved: ${res.error}`, "error");
    }
    this.updateButtons();
  }

  showConflict(message) {
    const banner = $("#ed-conflict", this.root);
    $("#ed-conflict-message", this.root).textContent = message;
    banner.hidden = false;
    this.say("Not saved: someone else changed this version.", "error");
  }

  hideConflict() {
    $("#ed-conflict", this.root).hidden = true;
  }

  async reloadAfterConflict() {
    if (this.dirty && !(await this.confirm("Reload discards your unsaved changes (download them first to keep them).", "Reload"))) return;
    this.hideConflict();
    await this.loadVersion(this.version.number);
    this.say(`Reloaded v${this.version.number} (revision ${this.version.revision}).`, "ok");
  }

  async publish(number) {
    if (!this.can.publish || this.busy) return;
    const ok = await this.confirm(`Publish v${number} and make it the active version? ${PUBLISH_NOTE}`, "Publish");
    if (!ok) return;
    this.busy = true;
    const res = await this.api.publish(number);
    this.busy = false;
    if (!res.ok) {
      this.updateButtons();
      const issues = definitionIssues(res.errors);
      if (issues.length && this.version?.number === number) this.applyIssues(issues, this.doc.order());
      return this.say(`Not published: ${res.error}`, "error");
    }
    this.say(`v${number} is published and active. New runs use it; runs in flight stay on the version they started with.`, "ok");
    if (this.version?.number === number) this.setVersion({ ...this.version, ...res.data });
    this.versionsPanel.refresh();
  }

  async activate(number) {
    if (!this.can.publish || this.busy) return;
    const ok = await this.confirm(`Make v${number} the active version? ${PUBLISH_NOTE}`, "Make active");
    if (!ok) return;
    const res = await this.api.activate(number);
    if (!res.ok) return this.say(`Not activated: ${res.error}`, "error");
    this.say(`v${number} is now active. New runs use it; runs in flight stay on the version they started with.`, "ok");
    if (this.version) this.setVersion({ ...this.version, active: this.version.number === number });
    this.versionsPanel.refresh();
  }

  confirm(message, okLabel) {
    const dialog = $("#ed-dialog", this.root);
    $("#ed-dialog-message", dialog).textContent = message;
    $("#ed-dialog-ok", dialog).textContent = okLabel;
    dialog.returnValue = "";
    dialog.showModal();
    return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
  }

  // ------------------------------------------------------------------ import / export

  exportJson() {
    const data = { format: EXPORT_FORMAT, slug: this.config.slug, title: this.config.title, definition: this.doc.toDefinition() };
    download(`${this.config.slug}.json`, `${JSON.stringify(data, null, 2)}\n`);
  }

  async importFile(input) {
    const file = input.files?.[0];
    input.value = "";
    if (!file || !this.canEdit) return;
    let definition;
    try {
      definition = definitionFromImport(JSON.parse(await file.text()));
    } catch (err) {
      return this.say(`Not imported: ${err.message}.`, "error");
    }
    if (this.doc.nodes.size && !(await this.confirm("Replace the canvas with the imported definition? Undo brings the current one back.", "Import"))) return;
    const started = performance.now();
    const { doc, dropped } = Doc.fromDefinition(definition);
    const quick = quickLayout(doc);
    for (const node of doc.nodes.values()) Object.assign(node, quick.get(node.uid));
    this.change(() => this.doc.replaceWith(doc));
    this.selection = { nodes: new Set(), edges: new Set() };
    this.inspector.render();
    this.canvas.sync();
    this.canvas.fit();
    this.timings.importRenderMs = performance.now() - started;
    const note = dropped.length ? ` Dropped ${dropped.length} edges that name missing nodes: ${dropped.slice(0, 5).join(", ")}.` : "";
    this.say(`Imported ${doc.nodes.size} nodes and ${doc.edges.size} edges from ${file.name}.${note}`, dropped.length ? "error" : "ok");
    await this.autoLayout({ record: false });
  }

  onCanvasResize() {
    // Keep the view; the SVG fills its box by CSS.
  }
}

// The items of a refusal that are about the definition (they carry the core's `field`).
function definitionIssues(errors) {
  return errors.filter((e) => typeof e.field === "string");
}
