// The side panel's Test run tab: start a run of the open version with some input and light
// up its nodes on the canvas. Polls every 500 ms until the run finishes (the dashboard's
// websocket can replace the polling once it carries per-run node states). The run is the
// API's (POST .../versions/{n}/test-runs, then GET /runs/{id}); `overlay` turns it into what
// the canvas and the inspector show per node.
import { h, replaceChildren } from "./dom.js";

const POLL_MS = 500;
const FINISHED = new Set(["succeeded", "failed", "cancelled"]);
const ERROR_CHARS = 500;
const OUTPUT_PREVIEW_CHARS = 2000;

// A run as the API reads it -> {id, status, version, finished, nodes: {node id: state}}.
export function overlay(run) {
  const nodes = {};
  for (const node of run.nodes) {
    nodes[node.node_id] = { status: node.status, attempt: node.attempt, error: node.error.slice(0, ERROR_CHARS), output: preview(node.output) };
  }
  // `raw`: the run's input and nodes as the API gave them, for the inspector's data trees (datamap.js).
  return { id: run.id, status: run.status, version: run.version, testVersion: run.test_version, finished: FINISHED.has(run.status), nodes, raw: run };
}

function preview(output) {
  if (output === null || output === undefined) return null;
  const text = JSON.stringify(output);
  return text.length <= OUTPUT_PREVIEW_CHARS ? text : `${text.slice(0, OUTPUT_PREVIEW_CHARS)}… (${text.length} characters)`;
}

export class TestRunPanel {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.timer = null;
    this.input = h("textarea", { rows: 4, spellcheck: "false", id: "ed-run-input", class: "ed-json" });
    this.input.value = "{}";
    this.startButton = h("button", { type: "button", id: "ed-run-start", onclick: () => this.start(), text: "Start test run" });
    this.explain = h("p", { class: "ed-help" });
    this.result = h("div", { class: "ed-run-result", "aria-live": "polite" });
    replaceChildren(
      root,
      h("h3", { text: "Test run" }),
      this.explain,
      h("label", { for: "ed-run-input", text: "input (JSON object)" }),
      this.input,
      h("div", { class: "ed-row" }, this.startButton, h("button", { type: "button", onclick: () => this.clear(), text: "Clear" })),
      this.result,
    );
    this.refresh();
  }

  // Say what will run, and why the button is off when it is.
  refresh() {
    const app = this.app;
    const v = app.version;
    let reason = "";
    if (!app.can.run) reason = "Your role may not start runs.";
    else if (!v) reason = "Save the workflow first.";
    else if (app.dirty) reason = "Save your changes first: a test run uses the saved version.";
    else if (v.status === "draft" && !app.can.publish) reason = "Only editors can test-run a draft.";
    this.startButton.disabled = Boolean(reason) || this.timer !== null;
    let text = reason;
    if (!reason && v.status === "draft") {
      text = `Runs draft v${v.number} as it is saved. The draft is frozen into a published but inactive test snapshot; live runs keep using the active version.`;
    } else if (!reason) {
      text = `Runs v${v.number}${v.active ? " (the active version)" : " (not the active version; live runs are unaffected)"}.`;
    }
    this.explain.textContent = text;
  }

  async start() {
    let input;
    try {
      input = JSON.parse(this.input.value || "{}");
    } catch (err) {
      return this.app.say(`The input is not valid JSON: ${err.message}`, "error");
    }
    this.startButton.disabled = true;
    const res = await this.app.api.testRun(this.app.version.number, input);
    if (!res.ok) {
      this.refresh();
      return this.app.say(`Test run not started: ${res.error}`, "error");
    }
    const state = overlay(res.data);
    this.app.say(`Test run ${state.id} started on v${state.version}.`, "ok");
    if (state.version !== this.app.version.number) this.app.versionsPanel.refresh();
    this.show(state);
    this.poll(state.id);
  }

  poll(runId) {
    clearTimeout(this.timer);
    this.timer = setTimeout(async () => {
      const res = await this.app.api.run(runId);
      if (!res.ok) {
        this.timer = null;
        this.refresh();
        return this.app.say(`Could not follow run ${runId}: ${res.error}`, "error");
      }
      const state = overlay(res.data);
      this.show(state);
      if (state.finished) {
        this.timer = null;
        this.refresh();
        this.app.say(`Test run ${runId} ${state.status}.`, state.status === "succeeded" ? "ok" : "error");
      } else {
        this.poll(runId);
      }
    }, POLL_MS);
  }

  show(state) {
    this.app.setRunState(state);
    const items = Object.entries(state.nodes).map(([id, node]) =>
      h(
        "li",
        { dataset: { node: id } },
        h("span", { class: `ed-status-pill run-${node.status}`, text: node.status }),
        " ",
        h("a", { href: `/runs/${state.id}/?node=${encodeURIComponent(id)}#node-panel`, title: "this node on the run page" }, h("code", { text: id })),
        node.error ? h("div", { class: "ed-error-text", text: node.error }) : null,
        node.output !== null ? h("div", { class: "ed-muted ed-run-output", text: node.output }) : null,
      ),
    );
    replaceChildren(
      this.result,
      h("p", {}, h("a", { href: `/runs/${state.id}/`, dataset: { link: "test-run" }, text: `Run ${state.id}` }), ` on ${state.testVersion ? "test version " : ""}v${state.version}: `, h("strong", { class: `ed-run-status run-${state.status}`, text: state.status })),
      h("ul", { class: "ed-run-nodes" }, items),
    );
    this.app.root.dataset.run = state.status;
  }

  clear() {
    clearTimeout(this.timer);
    this.timer = null;
    this.result.replaceChildren();
    this.app.setRunState(null);
    delete this.app.root.dataset.run;
    this.refresh();
  }
}
