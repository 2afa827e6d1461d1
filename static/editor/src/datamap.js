// The inspector's "Data" section (issue 28, item 6): what a node's templates can name, shown
// as trees from a real run: the run input (`{input.…}`) and each direct predecessor's output
// (`{upstream.<node>.…}`). The sample is the editor's last test run when there is one, else
// the workflow's latest run. A click on a field inserts its placeholder at the cursor of the
// config field last focused (a text field or text area), as if typed there.
import { h, replaceChildren } from "./dom.js";

const NAME = /^[A-Za-z0-9_-]+$/; // a path segment placeholders accept (builtin.render_template)
const MAX_KEYS = 60; // per object shown; the rest are counted
const MAX_DEPTH = 6;

export class DataMap {
  constructor(app) {
    this.app = app;
    this.latest = undefined; // the workflow's latest run, once fetched (null: none)
    this.target = null; // the config text field last focused
  }

  // The run the trees come from: {id, label, input, outputs}, or null.
  async sample() {
    const state = this.app.runState;
    if (state && state.raw) return { id: state.id, label: `test run ${state.id}`, input: state.raw.input, outputs: outputsOf(state.raw) };
    if (this.latest === undefined) {
      const list = await this.app.api.request("GET", `${this.app.api.runsUrl}?${new URLSearchParams({ workflow: this.app.config.slug, limit: 1, include_tests: "true" })}`);
      const first = list.ok ? list.data.items[0] : null;
      const run = first ? await this.app.api.run(first.id) : null;
      this.latest = run && run.ok ? run.data : null;
    }
    const run = this.latest;
    return run ? { id: run.id, label: `run ${run.id}`, input: run.input, outputs: outputsOf(run) } : null;
  }

  // Remember the config field a click will insert into.
  watch(root) {
    root.addEventListener("focusin", (event) => {
      const el = event.target;
      if (el.closest(".ed-config") && (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type === "text"))) this.target = el;
    });
  }

  insert(placeholder) {
    const el = this.target && this.target.isConnected ? this.target : null;
    if (!el || el.disabled) return this.app.say("Click into a config text field first: the placeholder goes where its cursor is.", "error");
    const start = el.selectionStart ?? el.value.length;
    const end = el.selectionEnd ?? start;
    el.value = el.value.slice(0, start) + placeholder + el.value.slice(end);
    el.selectionStart = el.selectionEnd = start + placeholder.length;
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.focus();
  }

  // Fill `section` with the trees for the node whose upstream ids are `upstream`.
  async show(section, upstream) {
    replaceChildren(section, h("h4", { text: "Data" }), h("p", { class: "ed-help", text: "Loading a run's data…" }));
    const sample = await this.sample();
    if (!section.isConnected) return;
    if (!sample) {
      return replaceChildren(section, h("h4", { text: "Data" }), h("p", { class: "ed-help", text: "No run yet: start a test run to see the input and each upstream node's output here, and click a field to insert its placeholder." }));
    }
    const link = h("a", { href: `/runs/${sample.id}/`, text: sample.label, dataset: { link: "sample-run" } });
    const trees = [h("div", { class: "ed-data-tree", dataset: { source: "input" } }, h("strong", { text: "run input" }), tree(sample.input, "{input", this))];
    for (const id of upstream) {
      const output = sample.outputs[id];
      const body = output === undefined ? h("p", { class: "ed-help", text: "no output in this run" }) : NAME.test(id) ? tree(output, `{upstream.${id}`, this) : h("p", { class: "ed-help", text: "its id cannot be named in a placeholder" });
      trees.push(h("div", { class: "ed-data-tree", dataset: { source: id } }, h("strong", {}, "output of ", h("code", { text: id })), body));
    }
    replaceChildren(section, h("h4", { text: "Data" }), h("p", { class: "ed-help" }, "From ", link, ". Click a field to insert its placeholder into the config field you were in."), ...trees);
  }
}

function outputsOf(run) {
  const outputs = {};
  for (const node of run.nodes || []) if (node.status === "succeeded") outputs[node.node_id] = node.output;
  return outputs;
}

// A JSON value as a nested list; each nameable field is a button inserting `<prefix>.<path>}`.
function tree(value, prefix, map, depth = 0) {
  const list = h("ul", { class: "ed-data" });
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : value && typeof value === "object" ? Object.entries(value) : [];
  if (!entries.length) {
    list.append(h("li", {}, h("button", { type: "button", class: "ed-link ed-data-field", dataset: { placeholder: `${prefix}}` }, onclick: () => map.insert(`${prefix}}`), text: preview(value) })));
    return list;
  }
  for (const [key, child] of entries.slice(0, MAX_KEYS)) {
    const path = `${prefix}.${key}`;
    const label = NAME.test(key)
      ? h("button", { type: "button", class: "ed-link ed-data-field", dataset: { placeholder: `${path}}` }, onclick: () => map.insert(`${path}}`), text: key })
      : h("span", { class: "ed-muted", title: "this key cannot be named in a placeholder", text: key });
    const nested = child && typeof child === "object" && depth < MAX_DEPTH && NAME.test(key);
    list.append(h("li", {}, label, nested ? tree(child, path, map, depth + 1) : h("span", { class: "ed-muted", text: ` ${preview(child)}` })));
  }
  if (entries.length > MAX_KEYS) list.append(h("li", { class: "ed-muted", text: `… ${entries.length - MAX_KEYS} more` }));
  return list;
}

function preview(value) {
  const text = JSON.stringify(value);
  return text === undefined ? "" : text.length > 60 ? `${text.slice(0, 59)}…` : text;
}
