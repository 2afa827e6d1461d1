// The side panel's Inspect tab: edits the selected node or edge, or the workflow itself.
// It is rebuilt when the selection changes (or undo/redo), never while a field is being
// typed in; issues and test-run results are refreshed in place.
import { h, replaceChildren } from "./dom.js";
import { getPath } from "./model.js";
import { configFields, field, nextFieldId, numberInput } from "./schemaform.js";
import { DataMap } from "./datamap.js";

const RETRY_FIELDS = [
  ["max_attempts", "max attempts", true, 1, "Attempts in all, the first included (1 = no retry)."],
  ["backoff_seconds", "backoff (s)", false, 1, "Wait after the first failure; doubles each time."],
  ["backoff_max_seconds", "backoff cap (s)", false, 300, "Longest wait between attempts."],
  ["jitter", "jitter (0–1)", false, 0.1, "Spread each wait by up to this fraction."],
];
const KEY_HELP =
  "A key path: input.<field> (the run's input), or on a node upstream.<node>.<field> (a direct predecessor's output).";

// Text and number fields of a flow-control object (concurrency, debounce, singleton).
function keyFields(legend, value, disabled, onEdit, numbers, help) {
  const box = h("fieldset", { class: "ed-retry", dataset: { flow: legend } }, h("legend", { text: legend }));
  const key = h("input", { type: "text", disabled, autocomplete: "off", spellcheck: "false", placeholder: "input.customer_id" });
  key.value = typeof value?.key === "string" ? value.key : "";
  key.addEventListener("input", () => onEdit(["key"], key.value.trim() ? key.value.trim() : undefined));
  box.append(field("key", key, { key: `${legend}.key`, help: help ?? KEY_HELP }));
  for (const [name, label, integer, fieldHelp] of numbers) {
    const input = numberInput(value?.[name], integer, disabled, (v) => onEdit([name], v));
    input.placeholder = "none";
    box.append(field(label, input, { key: `${legend}.${name}`, help: fieldHelp }));
  }
  return box;
}

const CONCURRENCY_NUMBERS = [["limit", "limit per key", true, "At most this many attempts in flight per key value; the others wait, served in turns between keys."]];

const RATE_FIELDS = [
  ["count", "starts", true, "At most this many attempts of this node started per window, over every run."],
  ["per_seconds", "per (s)", false, "The window; the attempts beyond wait for it to slide."],
];
const MAP_HELP =
  "Optional. Run the handler once per item of the list this expression gives, over input (the run input) " +
  "and output (the predecessor's output; by node id when there are several): input.documents, output.rows. " +
  "Each item gets its own attempts, retries and dead letter; the node's output is the items' outputs in order. " +
  "Up to 10,000 items. Blank: run once.";
const CONDITION_HELP =
  "Optional. An expression over output (this edge's source output) and input (the run input): " +
  'output.score > 0.5, output.label == "positive", "error" not in output. Blank: always follow.';

export class Inspector {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.nodeUid = null;
    this.dataMap = new DataMap(app);
    this.dataMap.watch(root);
  }

  render() {
    const { nodes, edges } = this.app.selection;
    this.nodeUid = null;
    if (nodes.size === 1 && edges.size === 0) return this.renderNode(this.app.doc.nodes.get([...nodes][0]));
    if (edges.size === 1 && nodes.size === 0) return this.renderEdge(this.app.doc.edges.get([...edges][0]));
    if (nodes.size + edges.size > 1) return this.renderMany(nodes.size, edges.size);
    return this.renderWorkflow();
  }

  disabled() {
    return !this.app.canEdit;
  }

  renderWorkflow() {
    const doc = this.app.doc;
    const area = h("textarea", { rows: 3, disabled: this.disabled() });
    area.value = doc.description;
    area.addEventListener("input", () => this.app.editDescription(area.value));
    area.addEventListener("blur", () => this.app.undo.breakCoalescing());
    replaceChildren(
      this.root,
      h("h3", { text: "Workflow" }),
      h("p", { class: "ed-muted", text: `${doc.nodes.size} nodes, ${doc.edges.size} edges.` }),
      field("description", area, { key: "description" }),
      this.flowSection(doc.extra, this.disabled()),
      h(
        "div",
        { class: "ed-help ed-keys" },
        h("p", { text: "Click a handler in the palette (or drag it here) to add a node." }),
        h("p", { text: "Drag from a node's right port to another node to connect them." }),
        h("p", { text: "Shift-click or shift-drag to select several; drag the background to pan; wheel to zoom." }),
        h("p", { text: "Delete removes the selection; Ctrl+Z / Ctrl+Shift+Z undo and redo; F fits the view." }),
        h("p", { text: "Ctrl+C / Ctrl+V copy and paste nodes (with the edges between them); Ctrl+D duplicates; Ctrl+F finds a node." }),
      ),
    );
  }

  // The workflow's flow control: concurrency over all its nodes, debounce or singleton on starts.
  flowSection(extra, disabled) {
    const edit = (name) => (path, value) => this.app.editWorkflow([name, ...path], value);
    const concurrency = keyFields("concurrency", extra.concurrency, disabled, edit("concurrency"), CONCURRENCY_NUMBERS,
      "input.<field>: at most `limit` nodes of all the runs with one key value in flight at once.");
    const debounce = keyFields("debounce", extra.debounce, disabled, edit("debounce"),
      [["window_s", "window (s)", false, "A start waits this long; a later start with the same key replaces it."]],
      "input.<field>: a start with the same key within the window replaces the waiting one.");
    const singleton = keyFields("singleton", extra.singleton, disabled, edit("singleton"), [],
      "input.<field>: one active run per key value.");
    const mode = h("select", { disabled });
    for (const name of ["skip", "queue"]) mode.append(h("option", { value: name, text: name }));
    mode.value = extra.singleton?.mode ?? "skip";
    mode.addEventListener("change", () => this.app.editWorkflow(["singleton", "mode"], mode.value === "skip" ? undefined : mode.value));
    singleton.append(field("mode", mode, { key: "singleton.mode", help: "skip: a start while one is active is refused (409); queue: it waits its turn." }));
    return h("section", { class: "ed-flow" }, h("h4", { text: "Flow control by key" }), concurrency, debounce, singleton);
  }

  renderMany(nodeCount, edgeCount) {
    replaceChildren(
      this.root,
      h("h3", { text: "Selection" }),
      h("p", { text: `${nodeCount} nodes and ${edgeCount} edges selected.` }),
      h(
        "div",
        { class: "ed-row" },
        nodeCount ? h("button", { type: "button", onclick: () => this.app.copySelection(), text: "Copy" }) : null,
        this.app.canEdit && nodeCount ? h("button", { type: "button", onclick: () => this.app.duplicate(), text: "Duplicate" }) : null,
        this.app.canEdit
          ? h("button", { type: "button", class: "ed-danger", onclick: () => this.app.deleteSelection(), text: "Delete selection" })
          : null,
      ),
    );
  }

  renderNode(node) {
    this.nodeUid = node.uid;
    const app = this.app;
    const data = node.data;
    const disabled = this.disabled();
    const edit = (path, value) => app.editNode(node.uid, path, value);
    const handler = app.palette.get(data.handler);

    const idInput = h("input", { type: "text", disabled, autocomplete: "off", spellcheck: "false" });
    idInput.value = String(data.id ?? "");
    idInput.addEventListener("input", () => edit(["id"], idInput.value));

    const handlerSelect = h("select", { disabled });
    if (!handler) {
      handlerSelect.append(h("option", { value: "", text: `${data.handler ?? "(none)"} (not registered)` }));
    }
    for (const name of app.palette.keys()) handlerSelect.append(h("option", { value: name, text: name }));
    handlerSelect.value = handler ? data.handler : "";
    handlerSelect.addEventListener("change", () => app.changeHandler(node.uid, handlerSelect.value));

    const configSection = h(
      "fieldset",
      { class: "ed-config", dataset: { field: "config" } },
      h("legend", { text: "config" }),
      h("ul", { class: "ed-field-issues" }),
      handler
        ? configFields(handler.config_schema, data.config, {
            disabled,
            onChange: edit,
            getConfig: () => app.doc.nodes.get(node.uid)?.data.config ?? {},
            pickers: { workflow: app.config.workflows ?? [], mcpTools: app.config.mcpTools ?? [] },
          })
        : h("p", { class: "ed-muted", text: "Choose a registered handler to configure this node." }),
    );

    const compensate = this.compensateSection(node, disabled);

    const retry = h("fieldset", { class: "ed-retry" }, h("legend", { text: "retry policy" }));
    for (const [key, label, integer, fallback, help] of RETRY_FIELDS) {
      const input = numberInput(getPath(data, ["retry", key]), integer, disabled, (v) => edit(["retry", key], v));
      input.placeholder = String(fallback);
      retry.append(field(label, input, { key: `retry.${key}`, help }));
    }

    const timeout = numberInput(data.timeout_seconds, false, disabled, (v) => edit(["timeout_seconds"], v));
    timeout.placeholder = "300";

    const cap = numberInput(data.max_in_flight, true, disabled, (v) => edit(["max_in_flight"], v));
    cap.placeholder = "no cap";
    cap.min = "1";

    const mapping = this.mapFields(data, disabled, edit);

    const rate = h("fieldset", { class: "ed-retry" }, h("legend", { text: "rate limit" }));
    for (const [key, label, integer, help] of RATE_FIELDS) {
      const input = numberInput(getPath(data, ["rate_limit", key]), integer, disabled, (v) => edit(["rate_limit", key], v));
      input.placeholder = "none";
      rate.append(field(label, input, { key: `rate_limit.${key}`, help }));
    }

    const queue = h("select", { disabled });
    const queues = [...app.config.queues];
    if (data.queue && !queues.includes(data.queue)) queues.push(data.queue);
    for (const name of queues) queue.append(h("option", { value: name, text: name }));
    queue.value = data.queue ?? "default";
    queue.addEventListener("change", () => edit(["queue"], queue.value === "default" ? undefined : queue.value));

    const join = h("select", { disabled });
    // The rules, their help and the default come from the engine's table (editor_config).
    const { joinRules, defaultJoin } = app.config;
    const helpOf = (name) => joinRules.find((rule) => rule.name === name)?.help ?? "";
    for (const rule of joinRules) join.append(h("option", { value: rule.name, text: rule.name }));
    join.value = data.join ?? defaultJoin;
    const joinHelp = h("p", { class: "ed-help", text: helpOf(join.value) });
    join.addEventListener("change", () => {
      joinHelp.textContent = helpOf(join.value);
      edit(["join"], join.value === defaultJoin ? undefined : join.value);
    });
    const joinField = field("join rule", join, { key: "join" });
    joinField.append(joinHelp);

    replaceChildren(
      this.root,
      h("h3", {}, "Node ", h("code", { text: String(data.id ?? "") })),
      h("ul", { class: "ed-node-issues" }),
      field("id", idInput, { key: "id", help: "Letters, digits, '_' and '-'; starts with a letter or '_'." }),
      field("handler", handlerSelect, { key: "handler", help: handler ? handler.doc : "" }),
      configSection,
      h("section", { class: "ed-upstream", dataset: { area: "data" } }),
      mapping,
      compensate,
      retry,
      field("timeout (s)", timeout, { key: "timeout_seconds", help: "Each attempt is stopped after this long." }),
      field("queue", queue, { key: "queue", help: "Workers listening on this queue run the node." }),
      field("max in flight", cap, {
        key: "max_in_flight",
        help: "At most this many attempts of this node queued, running or waiting at once, over every run; the others wait.",
      }),
      rate,
      keyFields("concurrency", data.concurrency, disabled, (path, value) => edit(["concurrency", ...path], value), CONCURRENCY_NUMBERS),
      joinField,
      h("section", { class: "ed-node-run" }),
      this.app.canEdit
        ? h("button", { type: "button", class: "ed-danger", onclick: () => this.app.deleteSelection(), text: "Delete node" })
        : null,
    );
    this.root.querySelectorAll("input, textarea").forEach((el) =>
      el.addEventListener("blur", () => app.undo.breakCoalescing()),
    );
    this.showIssues();
    this.showRun();
  }

  // The data the selected node's templates can name: the run input and its upstream outputs.
  showData() {
    const section = this.root.querySelector(".ed-upstream");
    if (!section || !this.nodeUid) return;
    const upstream = [];
    for (const edge of this.app.doc.edges.values()) {
      if (edge.target === this.nodeUid) upstream.push(String(this.app.doc.nodes.get(edge.source)?.data.id ?? ""));
    }
    this.dataMap.show(section, upstream.filter(Boolean));
  }

  // The map settings: the list expression, how many items at once, what a failed item does.
  mapFields(data, disabled, edit) {
    const expression = h("input", { type: "text", disabled, autocomplete: "off", spellcheck: "false", placeholder: "not a map" });
    expression.value = typeof data.map === "string" ? data.map : "";
    expression.addEventListener("input", () => edit(["map"], expression.value.trim() ? expression.value : undefined));
    const parallel = numberInput(data.max_parallel, true, disabled, (v) => edit(["max_parallel"], v));
    parallel.placeholder = "10";
    parallel.min = "1";
    parallel.max = "1000";
    const policy = h("select", { disabled });
    for (const [value, text] of [["", "fail the node (default)"], ["fail", "fail the node"], ["continue", "continue, failures marked"]]) {
      policy.append(h("option", { value, text }));
    }
    policy.value = data.on_item_failure ?? "";
    policy.addEventListener("change", () => edit(["on_item_failure"], policy.value || undefined));
    return h(
      "fieldset",
      { class: "ed-retry ed-map" },
      h("legend", { text: "map over items" }),
      field("map", expression, { key: "map", help: MAP_HELP }),
      field("max parallel", parallel, { key: "max_parallel", help: "Items queued or running at once (1–1,000)." }),
      field("on item failure", policy, {
        key: "on_item_failure",
        help: "After an item's last attempt: fail the node once all items are done (its dead letters can be replayed one by one), or let it succeed with {failed, index, error} in the item's place.",
      }),
    );
  }

  // The saga step that undoes this node when its run fails or is cancelled after it
  // succeeded: a task handler (never a wait or a child run), its config form, its attempts.
  compensateSection(node, disabled) {
    const app = this.app;
    const step = node.data.compensate && typeof node.data.compensate === "object" ? node.data.compensate : null;
    const edit = (path, value) => app.editNode(node.uid, ["compensate", ...path], value);
    const select = h("select", { disabled, dataset: { picker: "compensate" } });
    select.append(h("option", { value: "", text: "(none: nothing to undo)" }));
    for (const [name, handler] of app.palette) {
      if (handler.kind === "task") select.append(h("option", { value: name, text: name }));
    }
    if (step && !app.palette.has(step.handler)) select.append(h("option", { value: step.handler, text: `${step.handler} (not registered)` }));
    select.value = step ? step.handler : "";
    select.addEventListener("change", () => app.changeCompensate(node.uid, select.value));
    const handler = step ? app.palette.get(step.handler) : null;
    const section = h(
      "fieldset",
      { class: "ed-config ed-compensate", dataset: { field: "compensate" } },
      h("legend", { text: "compensate (saga)" }),
      h("ul", { class: "ed-field-issues" }),
      field("handler", select, {
        key: "compensate.handler",
        help: "Undoes this node (given its output as upstream) when the run fails or is cancelled after it succeeded; the last done is undone first.",
      }),
    );
    if (handler) {
      section.append(
        ...configFields(handler.config_schema, step.config, {
          disabled,
          onChange: edit,
          getConfig: () => app.doc.nodes.get(node.uid)?.data.compensate?.config ?? {},
        }),
      );
      const attempts = numberInput(getPath(step, ["retry", "max_attempts"]), true, disabled, (v) => edit(["retry", "max_attempts"], v));
      attempts.placeholder = "1";
      section.append(field("undo attempts", attempts, { key: "compensate.retry.max_attempts", help: "Attempts of the undo; after the last, a dead letter and the run ends compensation_failed." }));
    }
    return section;
  }

  renderEdge(edge) {
    const app = this.app;
    const source = app.doc.nodes.get(edge.source)?.data.id ?? "?";
    const target = app.doc.nodes.get(edge.target)?.data.id ?? "?";
    const when = h("textarea", { rows: 3, disabled: this.disabled(), spellcheck: "false", id: nextFieldId() });
    when.value = typeof edge.data.when === "string" ? edge.data.when : "";
    when.addEventListener("input", () => app.editEdge(edge.uid, when.value));
    when.addEventListener("blur", () => app.undo.breakCoalescing());
    this.edgeUid = edge.uid;
    replaceChildren(
      this.root,
      h("h3", {}, "Edge ", h("code", { text: source }), " → ", h("code", { text: target })),
      h("ul", { class: "ed-node-issues" }),
      field("condition (when)", when, { key: "when", help: CONDITION_HELP }),
      this.app.canEdit
        ? h("button", { type: "button", class: "ed-danger", onclick: () => this.app.deleteSelection(), text: "Delete edge" })
        : null,
    );
    this.showIssues();
  }

  // Put each issue of the selected node or edge under its field (or at the top).
  showIssues() {
    const { nodes, edges } = this.app.selection;
    let issues = [];
    if (nodes.size === 1 && edges.size === 0) issues = this.app.nodeIssues.get([...nodes][0]) ?? [];
    else if (edges.size === 1 && nodes.size === 0) issues = this.app.edgeIssues.get([...edges][0]) ?? [];
    const fields = [...this.root.querySelectorAll("[data-field]")];
    for (const el of fields) {
      const list = el.querySelector(":scope > .ed-field-issues");
      if (list) list.replaceChildren();
      el.classList.remove("ed-invalid");
    }
    const top = this.root.querySelector(".ed-node-issues");
    if (top) top.replaceChildren();
    for (const issue of issues) {
      const target = bestField(fields, issue.target.field);
      const list = target?.querySelector(":scope > .ed-field-issues") ?? top;
      target?.classList.add("ed-invalid");
      list?.append(h("li", { text: issue.message }));
    }
    // Warnings (placeholders nothing provides) under their field too, in amber, never red.
    const uid = nodes.size === 1 && edges.size === 0 ? [...nodes][0] : null;
    for (const issue of (this.app.warnings ?? []).filter((w) => uid && w.target.uid === uid)) {
      const target = bestField(fields, issue.target.field);
      const list = target?.querySelector(":scope > .ed-field-issues") ?? top;
      list?.append(h("li", { class: "ed-field-warning", text: issue.message }, this.app.addFieldButton(issue)));
    }
  }

  // Show the last test run's result for the selected node, and the data it gives.
  showRun() {
    this.showData();
    const section = this.root.querySelector(".ed-node-run");
    if (!section || !this.nodeUid) return;
    const node = this.app.doc.nodes.get(this.nodeUid);
    const state = node && this.app.runState?.nodes?.[node.data.id];
    if (!state) return section.replaceChildren();
    replaceChildren(
      section,
      h("h4", { text: `Test run ${this.app.runState.id}` }),
      h("p", {}, "status ", h("span", { class: `ed-status-pill run-${state.status}`, text: state.status }), ` · attempt ${state.attempt}`),
      state.error ? h("pre", { class: "ed-error-text", text: state.error }) : null,
      state.output !== null ? h("pre", { class: "ed-output", text: state.output }) : null,
    );
  }
}

// The field whose key is the issue's field or its longest prefix ("config.headers" for
// "config.headers.accept"); null when none matches.
function bestField(fields, key) {
  let best = null;
  for (const el of fields) {
    const candidate = el.dataset.field;
    if (!candidate) continue;
    const matches = key === candidate || key.startsWith(`${candidate}.`) || key.startsWith(`${candidate}[`);
    if (matches && (!best || candidate.length > best.dataset.field.length)) best = el;
  }
  return best;
}
