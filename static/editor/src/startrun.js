// The start-run dialog, on the workflow pages, the runs page and in the editor: a form drawn
// from the active version's `input_schema` (JSON mode as a fallback, and the only mode for a
// version without one), an optional priority and idempotency key, then straight to the
// run's page.
//
// It starts runs through the API's own operation (POST /api/v1/workflows/{slug}/runs) with
// the browser's session and CSRF token, like the editor; a refusal's field errors (paths
// such as `input.user_id`) are shown beside their fields. The API decides who may start.
//
// Priority: -100 to 100 (core/priorities.py); empty starts the run at the workflow's default.
import "./startrun.css";
import { Api } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { withPath } from "./model.js";
import { configFields, field } from "./schemaform.js";

const WORKFLOWS_SHOWN = 200;

export class StartRunDialog {
  // config: {api: "/api/v1", csrfToken, runPage: "/runs/{id}/"}
  constructor(config) {
    this.config = config;
    this.slug = null;
    this.schema = null;
    this.value = {};
    this.jsonMode = false;
    this.loads = 0; // answers to an older load (another workflow chosen since) are dropped
    this.build();
  }

  build() {
    this.workflowSelect = h("select", { id: "sr-workflow", onchange: () => this.load(this.workflowSelect.value) });
    this.workflowRow = field("workflow", this.workflowSelect, { key: "workflow" });
    this.versionNote = h("p", { class: "ed-help", id: "sr-version" });
    this.formArea = h("div", { id: "sr-form" });
    this.modeButton = h("button", { type: "button", class: "sr-link", id: "sr-mode", onclick: () => this.toggleMode() });
    this.keyInput = h("input", { type: "text", id: "sr-key", maxlength: "200", autocomplete: "off", placeholder: "optional" });
    this.priorityInput = h("input", { type: "number", id: "sr-priority", min: "-100", max: "100", step: "1", placeholder: "workflow default" });
    this.errors = h("ul", { class: "ed-field-issues", id: "sr-errors", role: "alert" });
    this.submit = h("button", { type: "submit", class: "sr-primary", id: "sr-start", text: "Start run" });
    this.dialog = h(
      "dialog",
      { class: "sr-dialog", id: "sr-dialog", "aria-labelledby": "sr-title" },
      h(
        "form",
        { method: "dialog", onsubmit: (e) => this.onSubmit(e) },
        h("h2", { id: "sr-title", text: "Start a run" }),
        this.workflowRow,
        this.versionNote,
        h("div", { class: "sr-input-head" }, h("strong", { text: "Input" }), this.modeButton),
        this.formArea,
        field("priority", this.priorityInput, {
          key: "priority",
          help: "Optional, -100 to 100. Higher goes first when nodes wait for workers; empty: the workflow's default.",
        }),
        field("idempotency key", this.keyInput, {
          key: "Idempotency-Key",
          help: "Optional. Starting again with the same key and input opens the run made the first time.",
        }),
        this.errors,
        h(
          "menu",
          {},
          h("button", { type: "button", value: "cancel", onclick: () => this.dialog.close(), text: "Cancel" }),
          this.submit,
        ),
      ),
    );
    document.body.append(this.dialog);
  }

  // Open for one workflow, or (no slug) with a choice of workflow.
  async open(slug = null) {
    this.workflowRow.hidden = Boolean(slug);
    replaceChildren(this.errors);
    this.keyInput.value = "";
    this.dialog.showModal();
    if (slug) return this.load(slug);
    await this.listWorkflows();
    if (this.workflowSelect.value) await this.load(this.workflowSelect.value);
  }

  async listWorkflows() {
    const api = this.api(null);
    const res = await api.request("GET", `${this.config.api}/workflows?limit=${WORKFLOWS_SHOWN}`);
    if (!res.ok) return this.refuse(res.error);
    const startable = res.data.items.filter((w) => w.active_version !== null);
    const options = startable.map((w) => h("option", { value: w.slug, text: `${w.title} (${w.slug})` }));
    replaceChildren(this.workflowSelect, options);
    if (!startable.length) this.refuse("No workflow has an active version yet: publish one first.");
  }

  api(slug) {
    const root = this.config.api;
    return new Api({ api: { workflow: `${root}/workflows/${slug}`, runs: `${root}/runs` }, csrfToken: this.config.csrfToken });
  }

  async load(slug) {
    const seq = ++this.loads;
    const current = () => seq === this.loads;
    this.slug = slug;
    this.schema = null;
    this.value = {};
    this.submit.disabled = true;
    replaceChildren(this.errors);
    this.dialog.dataset.state = "loading";
    const api = this.api(slug);
    const workflow = await api.request("GET", api.workflowUrl);
    if (!current()) return;
    if (!workflow.ok) return this.refuse(workflow.error);
    const number = workflow.data.active_version;
    if (number === null) return this.refuse(`${workflow.data.title} has no active version: publish one first.`);
    const version = await api.version(number);
    if (!current()) return;
    if (!version.ok) return this.refuse(version.error);
    const schema = version.data.definition.input_schema ?? null;
    this.schema = schema && typeof schema.properties === "object" ? requiredFirst(schema) : null;
    this.versionNote.textContent = `${workflow.data.title}: runs v${number}, the active version.${
      this.schema ? "" : " It declares no input schema: any JSON object is accepted."
    }`;
    this.jsonMode = !this.schema;
    this.renderInput();
    this.submit.disabled = false;
    this.dialog.dataset.state = "ready";
  }

  renderInput() {
    this.modeButton.hidden = !this.schema;
    this.modeButton.textContent = this.jsonMode ? "Use the form" : "Edit as JSON";
    if (this.jsonMode) {
      this.jsonArea = h("textarea", { id: "sr-json", class: "ed-json", rows: 8, spellcheck: "false" });
      this.jsonArea.value = JSON.stringify(this.value, null, 2);
      return replaceChildren(this.formArea, field("input (JSON object)", this.jsonArea, { key: "input" }));
    }
    const fields = configFields(this.schema, this.value, {
      disabled: false,
      root: "input",
      getConfig: () => this.value,
      onChange: (path, v) => (this.value = path.length > 1 ? withPath(this.value, path.slice(1), v) : (v ?? {})),
    });
    replaceChildren(this.formArea, fields);
  }

  toggleMode() {
    if (this.jsonMode) {
      const parsed = this.readJson();
      if (parsed === undefined) return;
      this.value = parsed;
    }
    this.jsonMode = !this.jsonMode;
    this.renderInput();
  }

  // The JSON text as an object, or undefined (the problem shown) when it is not one.
  readJson() {
    let parsed;
    try {
      parsed = JSON.parse(this.jsonArea.value.trim() || "{}");
    } catch (err) {
      this.showErrors([{ path: "input", message: `is not valid JSON: ${err.message}` }]);
      return undefined;
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
      this.showErrors([{ path: "input", message: "must be a JSON object, such as {} or {\"user_id\": \"u-7\"}" }]);
      return undefined;
    }
    return parsed;
  }

  async onSubmit(event) {
    event.preventDefault();
    const input = this.jsonMode ? this.readJson() : this.value;
    if (input === undefined || !this.slug) return;
    this.showErrors([]);
    this.submit.disabled = true;
    const api = this.api(this.slug);
    const key = this.keyInput.value.trim();
    const body = { input };
    const priority = this.priorityInput.value.trim();
    if (priority !== "") body.priority = Number(priority);
    const res = await api.request("POST", `${api.workflowUrl}/runs`, body, key ? { "Idempotency-Key": key } : {});
    if (res.ok) {
      this.dialog.dataset.state = "started";
      window.location.assign(this.config.runPage.replace("{id}", String(res.data.id)));
      return;
    }
    this.submit.disabled = false;
    this.showErrors(res.errors.length ? res.errors : [], res.error);
  }

  // Put each error beside its field (the longest field path it falls under); the rest, and
  // the problem's detail, under the form.
  showErrors(errors, detail = "") {
    for (const list of this.dialog.querySelectorAll(".ed-field-issues")) list.replaceChildren();
    for (const box of this.dialog.querySelectorAll(".ed-field.ed-invalid")) box.classList.remove("ed-invalid");
    const general = detail ? [h("li", { text: detail })] : [];
    const fields = [...this.dialog.querySelectorAll("[data-field]")].filter((el) => el.dataset.field);
    for (const error of errors) {
      const path = error.path ?? "";
      const home = fields
        .filter((el) => path === el.dataset.field || path.startsWith(`${el.dataset.field}.`) || path.startsWith(`${el.dataset.field}[`))
        .sort((a, b) => b.dataset.field.length - a.dataset.field.length)[0];
      const exact = home && home.dataset.field === path;
      const item = h("li", { text: exact ? error.message : `${path}: ${error.message}` });
      if (home) {
        home.classList.add("ed-invalid");
        home.querySelector(".ed-field-issues").append(item);
      } else {
        general.push(item);
      }
    }
    replaceChildren(this.errors, general);
    this.dialog.dataset.state = errors.length || detail ? "refused" : "ready";
  }

  refuse(message) {
    this.dialog.dataset.state = "refused";
    this.submit.disabled = true;
    replaceChildren(this.errors, h("li", { text: message }));
  }
}

// The schema with its required properties first (a stored definition keeps no key order).
function requiredFirst(schema) {
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const entries = Object.entries(schema.properties);
  const properties = Object.fromEntries([...entries.filter(([k]) => required.has(k)), ...entries.filter(([k]) => !required.has(k))]);
  return { ...schema, properties };
}
