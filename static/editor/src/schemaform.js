// Form fields generated from a handler's config JSON schema: strings, numbers, integers,
// booleans and enums get their own input, arrays of choices a checkbox each; anything else (objects, arrays, untyped values)
// is edited as JSON text. Each field is tagged with the issue path it answers for
// (`config.url`, `config["content-type"]`), so server issues land next to their field.
import { h } from "./dom.js";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const LONG_TEXT = /prompt|system|body|template|message|text/i;

function fieldKey(parts) {
  let key = "";
  for (const part of parts) {
    if (typeof part === "number") key += `[${part}]`;
    else if (IDENTIFIER.test(part)) key += key ? `.${part}` : part;
    else key += `[${JSON.stringify(part)}]`;
  }
  return key;
}

let fieldCounter = 0;
export const nextFieldId = () => `ed-field-${++fieldCounter}`;

// A labelled field; `control` is the input, `extra` goes under it (help, issues).
export function field(label, control, { key, help, required } = {}) {
  const id = control.id || (control.id = nextFieldId());
  return h(
    "div",
    { class: "ed-field", dataset: { field: key ?? "" } },
    h("label", { for: id }, label, required ? h("span", { class: "ed-required", title: "required" }, " *") : null),
    control,
    help ? h("p", { class: "ed-help", text: help }) : null,
    h("ul", { class: "ed-field-issues" }),
  );
}

function jsonText(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

// A textarea holding JSON; calls onValue(parsed | undefined) when the text parses, and marks
// itself invalid (without calling) when it does not.
function jsonArea(value, { disabled, onValue, rows = 3, placeholder }) {
  const area = h("textarea", { class: "ed-json", rows, spellcheck: "false", disabled, placeholder });
  area.value = jsonText(value);
  area.addEventListener("input", () => {
    const text = area.value.trim();
    if (!text) {
      area.setCustomValidity("");
      area.title = "";
      return onValue(undefined);
    }
    try {
      const parsed = JSON.parse(text);
      area.setCustomValidity("");
      area.title = "";
      onValue(parsed);
    } catch (err) {
      area.setCustomValidity(`Not valid JSON: ${err.message}`);
      area.title = `Not valid JSON: ${err.message}`;
    }
  });
  return area;
}

// `getConfig` returns the node's config as it is now (the form outlives single edits);
// `root` is the name the value goes by in paths ("config" of a node, "input" of a run).
// `pickers` holds the choices of properties marked `"x-picker"` (workflow.run's `workflow`:
// the other workflows, [{slug, title, paused, versions}]).
export function configFields(schema, config, { disabled, onChange, getConfig, root = "config", pickers = {} }) {
  config = config && typeof config === "object" && !Array.isArray(config) ? config : {};
  const properties = schema && typeof schema.properties === "object" ? schema.properties : null;
  if (!properties) {
    const area = jsonArea(config, { disabled, rows: 5, onValue: (v) => onChange([root], v ?? {}) });
    return [field(`${root} (JSON)`, area, { key: root, help: "Any JSON object." })];
  }
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(properties).map(([name, prop]) =>
    propertyField(name, prop || {}, config[name], required.has(name), { disabled, onChange, root, pickers }),
  );
  const known = new Set(Object.keys(properties));
  const others = Object.fromEntries(Object.entries(config).filter(([name]) => !known.has(name)));
  if (Object.keys(others).length || schema.additionalProperties !== false) {
    const area = jsonArea(Object.keys(others).length ? others : undefined, {
      disabled,
      placeholder: schema.additionalProperties === false ? "" : '{"key": "value"}',
      onValue: (value) => onChange([root], { ...pick(getConfig(), known), ...(value ?? {}) }),
    });
    const help =
      schema.additionalProperties === false
        ? "None of these keys is accepted: remove them."
        : "Keys the form above does not list, as a JSON object.";
    fields.push(field("other keys (JSON)", area, { key: root, help }));
  }
  return fields;
}

function pick(obj, keys) {
  return Object.fromEntries(Object.entries(obj).filter(([name]) => keys.has(name)));
}

function propertyField(name, prop, value, required, { disabled, onChange, root, pickers }) {
  const key = fieldKey([root, name]);
  const path = [root, name];
  const help = [prop.description, prop.default !== undefined ? `Default: ${JSON.stringify(prop.default)}.` : ""]
    .filter(Boolean)
    .join(" ");
  const opts = { key, help, required };
  if (Array.isArray(prop.enum)) return field(name, enumSelect(prop, value, required, disabled, (v) => onChange(path, v)), opts);
  if (prop["x-picker"] === "workflow") return field(name, workflowPicker(pickers.workflow ?? [], value, disabled, (v) => onChange(path, v)), opts);
  if (prop["x-picker"] === "workflows") return field(name, workflowChecks(pickers.workflow ?? [], value, disabled, (v) => onChange(path, v)), opts);
  if (prop["x-picker"] === "mcp-tools") return field(name, mcpToolChecks(pickers.mcpTools ?? [], value, disabled, (v) => onChange(path, v)), opts);
  const type = Array.isArray(prop.type) ? null : prop.type;
  if (type === "string") {
    const long = LONG_TEXT.test(name);
    const input = long
      ? h("textarea", { rows: 3, disabled, placeholder: prop.default ?? "" })
      : h("input", { type: "text", disabled, placeholder: prop.default ?? "" });
    input.value = typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
    input.addEventListener("input", () => onChange(path, input.value === "" && !required ? undefined : input.value));
    return field(name, input, opts);
  }
  if (type === "number" || type === "integer") {
    const input = numberInput(value, type === "integer", disabled, (v) => onChange(path, v));
    if (prop.default !== undefined) input.placeholder = String(prop.default);
    return field(name, input, opts);
  }
  if (type === "boolean") return field(name, booleanSelect(prop, value, disabled, (v) => onChange(path, v)), opts);
  if (type === "array" && prop.items && Array.isArray(prop.items.enum)) {
    return field(name, checkList(prop.items.enum, value, disabled, (v) => onChange(path, v)), opts);
  }
  const area = jsonArea(value, { disabled, onValue: (v) => onChange(path, v) });
  return field(`${name} (JSON)`, area, opts);
}

export function numberInput(value, integer, disabled, onValue) {
  const input = h("input", { type: "number", step: integer ? "1" : "any", disabled });
  input.value = typeof value === "number" ? String(value) : "";
  input.addEventListener("input", () => {
    if (input.value === "") return onValue(undefined);
    const number = Number(input.value);
    if (Number.isFinite(number)) onValue(number);
  });
  return input;
}

function enumSelect(prop, value, required, disabled, onValue) {
  const select = h("select", { disabled });
  const values = prop.enum;
  const optionText = (option) => (typeof option === "string" ? option : JSON.stringify(option));
  if (!required || value === undefined) {
    const unset = prop.default !== undefined ? `(default: ${optionText(prop.default)})` : "(not set)";
    select.append(h("option", { value: "", text: unset }));
  }
  const labels = Array.isArray(prop["x-labels"]) ? prop["x-labels"] : [];
  values.forEach((option, index) =>
    select.append(h("option", { value: String(index), text: labels[index] ?? optionText(option) })),
  );
  const index = values.findIndex((option) => JSON.stringify(option) === JSON.stringify(value));
  select.value = index >= 0 ? String(index) : "";
  select.addEventListener("change", () => onValue(select.value === "" ? undefined : values[Number(select.value)]));
  return select;
}

// An array of choices (an agent's tools): one checkbox per choice, kept in the choices' order.
function checkList(choices, value, disabled, onValue, labels = []) {
  const chosen = new Set(Array.isArray(value) ? value.map((v) => JSON.stringify(v)) : []);
  const list = h("div", { class: "ed-checklist", role: "group" });
  const boxes = choices.map((choice, index) => {
    const box = h("input", { type: "checkbox", disabled, value: JSON.stringify(choice) });
    box.checked = chosen.has(JSON.stringify(choice));
    const text = labels[index] ?? (typeof choice === "string" ? choice : JSON.stringify(choice));
    list.append(h("label", { class: "ed-check" }, box, text));
    return box;
  });
  list.addEventListener("change", () => {
    const picked = boxes.filter((b) => b.checked).map((b) => JSON.parse(b.value));
    onValue(picked.length ? picked : undefined);
  });
  return list;
}

function booleanSelect(prop, value, disabled, onValue) {
  const select = h("select", { disabled });
  const label = prop.default !== undefined ? `(default: ${prop.default})` : "(not set)";
  select.append(h("option", { value: "", text: label }), h("option", { value: "true", text: "true" }));
  select.append(h("option", { value: "false", text: "false" }));
  select.value = value === true ? "true" : value === false ? "false" : "";
  select.addEventListener("change", () => onValue(select.value === "" ? undefined : select.value === "true"));
  return select;
}

function workflowLabel(w) {
  const notes = [w.paused ? "paused" : "", w.versions.length ? "" : "no published version"].filter(Boolean);
  return `${w.slug} — ${w.title}${notes.length ? ` (${notes.join(", ")})` : ""}`;
}

// The workflows an agent may call as tools (`workflow_tools`): a checkbox each, as the picker
// below describes them; a chosen one no longer offered (deleted) stays listed, unticked on a click.
function workflowChecks(workflows, value, disabled, onValue) {
  const slugs = workflows.map((w) => w.slug);
  const labels = workflows.map(workflowLabel);
  for (const slug of Array.isArray(value) ? value : []) {
    if (typeof slug === "string" && !slugs.includes(slug)) {
      slugs.push(slug);
      labels.push(`${slug} (not found)`);
    }
  }
  const list = checkList(slugs, value, disabled, onValue, labels);
  list.dataset.picker = "workflows";
  return list;
}

// The MCP tools an agent may offer (`mcp_tools`: [{server, tools: [names]}]): a group of
// checkboxes per registered server, a tool listed as unusable shown disabled with its reason.
// A chosen tool no longer listed stays, marked, so the validator's issue next to it makes sense.
function mcpToolChecks(servers, value, disabled, onValue) {
  const chosen = new Map();
  for (const entry of Array.isArray(value) ? value : []) {
    if (entry && typeof entry.server === "string") chosen.set(entry.server, new Set(Array.isArray(entry.tools) ? entry.tools : []));
  }
  const groups = servers.map((s) => ({ server: s.server, error: s.error, tools: s.tools.map((t) => ({ ...t })) }));
  for (const [server, tools] of chosen) {
    let group = groups.find((g) => g.server === server);
    if (!group) groups.push((group = { server, error: "not registered", tools: [] }));
    for (const name of tools) {
      if (!group.tools.some((t) => t.name === name)) group.tools.push({ name, usable: false, problem: "not listed" });
    }
  }
  const list = h("div", { class: "ed-checklist", role: "group", dataset: { picker: "mcp-tools" } });
  if (!groups.length) list.append(h("p", { class: "ed-muted", text: "No MCP server is registered (an admin adds them on the MCP page)." }));
  const boxes = [];
  for (const group of groups) {
    const set = h("fieldset", { class: "ed-mcp-server", dataset: { server: group.server } }, h("legend", { text: group.server }));
    if (group.error) set.append(h("p", { class: "ed-muted", text: group.error }));
    if (!group.tools.length && !group.error) set.append(h("p", { class: "ed-muted", text: "no tools listed yet" }));
    for (const tool of group.tools) {
      const picked = chosen.get(group.server)?.has(tool.name) ?? false;
      const box = h("input", { type: "checkbox", disabled: disabled || (!tool.usable && !picked), value: tool.name });
      box.checked = picked;
      box.dataset.server = group.server;
      const label = tool.usable ? tool.name : `${tool.name} (${tool.problem || "unusable"})`;
      set.append(h("label", { class: "ed-check", title: tool.description || "" }, box, label));
      boxes.push(box);
    }
    list.append(set);
  }
  list.addEventListener("change", () => {
    const picked = [];
    for (const box of boxes.filter((b) => b.checked)) {
      const entry = picked.find((p) => p.server === box.dataset.server);
      if (entry) entry.tools.push(box.value);
      else picked.push({ server: box.dataset.server, tools: [box.value] });
    }
    onValue(picked.length ? picked : undefined);
  });
  return list;
}

// A select of the workflows a workflow.run node may call; a value no longer offered (deleted)
// stays shown, so the validator's issue next to it makes sense.
function workflowPicker(workflows, value, disabled, onValue) {
  const select = h("select", { disabled, dataset: { picker: "workflow" } });
  select.append(h("option", { value: "", text: "(choose a workflow)" }));
  for (const w of workflows) select.append(h("option", { value: w.slug, text: workflowLabel(w) }));
  if (typeof value === "string" && value && !workflows.some((w) => w.slug === value)) {
    select.append(h("option", { value, text: `${value} (not found)` }));
  }
  select.value = typeof value === "string" ? value : "";
  select.addEventListener("change", () => onValue(select.value || undefined));
  return select;
}
