// The document being edited: nodes and edges in definition order, plus canvas positions.
//
// Nodes and edges carry an internal uid, so renaming a node never rewrites its edges.
// Node and edge `data` objects are treated as immutable (every change builds a new one),
// which makes an undo snapshot a shallow copy and lets the canvas spot changes by identity.

export const NODE_W = 200;
export const NODE_H = 52;
export const EXPORT_FORMAT = "switchyard.workflow/v1";

let uidCounter = 0;
const nextUid = (prefix) => `${prefix}${++uidCounter}`;

export class Doc {
  constructor() {
    this.description = "";
    this.inputSchema = null; // the definition's input_schema, kept as it is (null: none)
    // Every other top-level field (concurrency, debounce, singleton, ...), kept
    // as it came and written back, so that editing a workflow never drops what it declares.
    this.extra = {};
    this.nodes = new Map(); // uid -> {uid, data, x, y}
    this.edges = new Map(); // uid -> {uid, source, target, data}
  }

  // Build a document from a definition; edges naming unknown nodes cannot be drawn and are
  // returned in `dropped` so the editor can say so.
  static fromDefinition(definition) {
    const doc = new Doc();
    const dropped = [];
    doc.description = typeof definition.description === "string" ? definition.description : "";
    const schema = definition.input_schema;
    doc.inputSchema = schema && typeof schema === "object" && !Array.isArray(schema) ? schema : null;
    for (const [key, value] of Object.entries(definition)) {
      if (!["nodes", "edges", "description", "input_schema"].includes(key) && value !== undefined && value !== null) doc.extra[key] = value;
    }
    const byId = new Map(); // the first node of an id wins, as in the graph core
    for (const raw of Array.isArray(definition.nodes) ? definition.nodes : []) {
      const data = raw && typeof raw === "object" && !Array.isArray(raw) ? { ...raw } : { id: String(raw) };
      const node = doc.addNode(data, 0, 0);
      if (!byId.has(data.id)) byId.set(data.id, node);
    }
    for (const raw of Array.isArray(definition.edges) ? definition.edges : []) {
      const { source, target, ...data } = raw && typeof raw === "object" ? raw : {};
      const from = byId.get(source);
      const to = byId.get(target);
      if (from && to) doc.addEdge(from.uid, to.uid, data);
      else dropped.push(`${source} -> ${target}`);
    }
    return { doc, dropped };
  }

  toDefinition() {
    const nodes = [];
    const edges = [];
    for (const node of this.nodes.values()) nodes.push(node.data);
    for (const edge of this.edges.values()) {
      const item = { source: this.nodes.get(edge.source).data.id, target: this.nodes.get(edge.target).data.id };
      for (const [key, value] of Object.entries(edge.data)) {
        if (!(key === "when" && (value === null || value === ""))) item[key] = value;
      }
      edges.push(item);
    }
    const definition = { ...this.extra, nodes, edges };
    if (this.description) definition.description = this.description;
    if (this.inputSchema) definition.input_schema = this.inputSchema;
    return definition;
  }

  // The uids in the order toDefinition() lists them: issue paths (nodes[3]) index these.
  order() {
    return { nodeUids: [...this.nodes.keys()], edgeUids: [...this.edges.keys()] };
  }

  nodeById(id) {
    for (const node of this.nodes.values()) if (node.data.id === id) return node;
    return null;
  }

  addNode(data, x, y) {
    const node = { uid: nextUid("n"), data, x, y };
    this.nodes.set(node.uid, node);
    return node;
  }

  addEdge(source, target, data = {}) {
    const edge = { uid: nextUid("e"), source, target, data };
    this.edges.set(edge.uid, edge);
    return edge;
  }

  findEdge(source, target) {
    for (const edge of this.edges.values()) if (edge.source === source && edge.target === target) return edge;
    return null;
  }

  removeNodes(uids) {
    for (const uid of uids) this.nodes.delete(uid);
    for (const [uid, edge] of this.edges) {
      if (uids.has(edge.source) || uids.has(edge.target)) this.edges.delete(uid);
    }
  }

  removeEdges(uids) {
    for (const uid of uids) this.edges.delete(uid);
  }

  // A fresh node id from a handler name: "demo.fetch_profile" -> "fetch_profile", "_2", ...
  uniqueId(handler) {
    let base = String(handler).split(".").pop().replace(/[^A-Za-z0-9_-]/g, "_") || "node";
    if (!/^[A-Za-z_]/.test(base)) base = `n_${base}`;
    base = base.slice(0, 56);
    const taken = new Set([...this.nodes.values()].map((n) => n.data.id));
    if (!taken.has(base)) return base;
    for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
  }

  snapshot() {
    return {
      description: this.description,
      inputSchema: this.inputSchema,
      extra: this.extra,
      nodes: [...this.nodes.values()].map((n) => ({ ...n })),
      edges: [...this.edges.values()].map((e) => ({ ...e })),
    };
  }

  restore(snap) {
    this.description = snap.description;
    this.inputSchema = snap.inputSchema;
    this.extra = snap.extra ?? {};
    this.nodes = new Map(snap.nodes.map((n) => [n.uid, { ...n }]));
    this.edges = new Map(snap.edges.map((e) => [e.uid, { ...e }]));
  }

  replaceWith(other) {
    this.description = other.description;
    this.inputSchema = other.inputSchema;
    this.extra = other.extra;
    this.nodes = other.nodes;
    this.edges = other.edges;
  }
}

const parts = (path) => (Array.isArray(path) ? path : path.split("."));

// Return a copy of `obj` with `path` (dotted, or an array of keys) set to `value`; undefined
// removes the key, and an object left empty by that is removed too.
export function withPath(obj, path, value) {
  const [head, ...rest] = parts(path);
  const copy = { ...(obj && typeof obj === "object" && !Array.isArray(obj) ? obj : {}) };
  if (rest.length) {
    const child = withPath(copy[head], rest, value);
    if (Object.keys(child).length) copy[head] = child;
    else delete copy[head];
  } else if (value === undefined) {
    delete copy[head];
  } else {
    copy[head] = value;
  }
  return copy;
}

export function getPath(obj, path) {
  let value = obj;
  for (const part of parts(path)) {
    if (value === null || typeof value !== "object") return undefined;
    value = value[part];
  }
  return value;
}

// Accept a bare definition ({"nodes": [...]}) or an export ({"format": ..., "definition"}).
export function definitionFromImport(data) {
  if (data && typeof data === "object" && data.format === EXPORT_FORMAT) data = data.definition;
  if (!data || typeof data !== "object" || Array.isArray(data) || !Array.isArray(data.nodes)) {
    throw new Error('expected a workflow definition ({"nodes": [...], "edges": [...]}) or a Switchyard export');
  }
  return data;
}

// Undo and redo by snapshots. Consecutive changes with the same key (typing in one field)
// collapse into one step until `breakCoalescing` is called (the field loses focus).
export class UndoStack {
  constructor(doc, limit = 200) {
    this.doc = doc;
    this.limit = limit;
    this.past = [];
    this.future = [];
    this.lastKey = null;
  }

  record(key = null) {
    if (key !== null && key === this.lastKey) return;
    this.lastKey = key;
    this.past.push(this.doc.snapshot());
    if (this.past.length > this.limit) this.past.shift();
    this.future = [];
  }

  breakCoalescing() {
    this.lastKey = null;
  }

  undo() {
    if (!this.past.length) return false;
    this.future.push(this.doc.snapshot());
    this.doc.restore(this.past.pop());
    this.lastKey = null;
    return true;
  }

  redo() {
    if (!this.future.length) return false;
    this.past.push(this.doc.snapshot());
    this.doc.restore(this.future.pop());
    this.lastKey = null;
    return true;
  }

  clear() {
    this.past = [];
    this.future = [];
    this.lastKey = null;
  }
}

// Return `schema` with `name` added as a required string property (an object schema if none).
// The schema is treated as immutable, like node data: undo snapshots share it.
export function withInputField(schema, name) {
  const base = schema && typeof schema === "object" ? schema : { type: "object" };
  const properties = { ...(base.properties ?? {}) };
  if (!(name in properties)) properties[name] = { type: "string" };
  const required = Array.isArray(base.required) ? base.required : [];
  return { ...base, properties, required: required.includes(name) ? required : [...required, name] };
}
