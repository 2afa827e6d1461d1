// The side panel's Suite tab: "Test against recent runs". Runs the workflow's suite of
// its last N succeeded runs on the saved draft (POST .../suites/recent-runs: each case replays
// its run's recorded calls and expects the output that run had), polls the suite run every
// second until it is evaluated, and shows the report: pass or fail per case, the nodes that
// changed against the case's run with a link to the comparison page, and cost. Beside it, a
// link to the version diff (active -> this draft), so an author reads the change and its effect
// together before publishing.
import { h, replaceChildren } from "./dom.js";

const POLL_MS = 1000;
const MODES = ["recorded-then-live", "recorded", "live"];

export class SuitePanel {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.timer = null;
    this.last = h("input", { type: "number", id: "ed-suite-last", min: "1", max: "200", value: "20", class: "ed-num" });
    this.mode = h("select", { id: "ed-suite-mode" }, MODES.map((m) => h("option", { value: m, text: m })));
    this.button = h("button", { type: "button", id: "ed-suite-start", class: "ed-primary", onclick: () => this.start(), text: "Test against recent runs" });
    this.explain = h("p", { class: "ed-help" });
    this.links = h("p", { class: "ed-help" });
    this.result = h("div", { class: "ed-suite-result", id: "ed-suite-report", "aria-live": "polite" });
    replaceChildren(
      root,
      h("h3", { text: "Test against recent runs" }),
      this.explain,
      h("div", { class: "ed-row" }, h("label", { for: "ed-suite-last", text: "last" }), this.last, h("span", { text: "runs" })),
      h("div", { class: "ed-row" }, h("label", { for: "ed-suite-mode", text: "calls" }), this.mode),
      h("div", { class: "ed-row" }, this.button),
      this.links,
      this.result,
    );
    this.refresh();
  }

  refresh() {
    const app = this.app;
    const v = app.version;
    let reason = "";
    if (!app.can.runSuite) reason = "Your role may not run suites.";
    else if (!v) reason = "Save the workflow first.";
    else if (app.dirty) reason = "Save your changes first: the suite runs the saved version.";
    else if (v.status === "draft" && !app.can.publish) reason = "Only editors can test a draft.";
    this.button.disabled = Boolean(reason) || this.timer !== null;
    this.explain.textContent =
      reason ||
      `Runs v${v.number}${v.status === "draft" ? " (this draft)" : ""} on the inputs of the workflow's last runs, replaying their recorded calls; a case fails when its output differs from what its run gave.`;
    const active = app.config.activeNumber;
    const diff = v && v.status === "draft" && active ? `${app.config.urls.diffPage}?from=${active}&to=${v.number}` : null;
    replaceChildren(
      this.links,
      diff ? h("a", { href: diff, id: "ed-suite-diff", text: `Diff v${active} → v${v.number}` }) : null,
      diff ? " · " : null,
      h("a", { href: app.config.urls.suitesPage, text: "All suites" }),
    );
  }

  async start() {
    const last = Number.parseInt(this.last.value, 10) || 20;
    this.button.disabled = true;
    const res = await this.app.api.testRecentRuns(this.app.version.number, last, this.mode.value);
    if (!res.ok) {
      this.refresh();
      return this.app.say(`Suite not started: ${res.error}`, "error");
    }
    this.app.say(`Testing v${this.app.version.number} against ${res.data.cases.length} recent runs…`, "ok");
    this.show(res.data);
    this.poll(res.data.url);
  }

  poll(url) {
    clearTimeout(this.timer);
    this.timer = setTimeout(async () => {
      const res = await this.app.api.suiteRun(url);
      if (!res.ok) {
        this.timer = null;
        this.refresh();
        return this.app.say(`Could not follow the suite run: ${res.error}`, "error");
      }
      this.show(res.data);
      if (res.data.state === "running") return this.poll(url);
      this.timer = null;
      this.refresh();
      const s = res.data.summary;
      this.app.say(`Suite ${res.data.state}: ${s.passed} of ${s.cases} cases passed.`, res.data.state === "passed" ? "ok" : "error");
      this.app.versionsPanel.refresh();
    }, POLL_MS);
  }

  show(run) {
    const ended = run.cases.filter((c) => c.passed !== null || ["succeeded", "failed", "cancelled"].includes(c.run_status)).length;
    const s = run.summary;
    const head =
      run.state === "running"
        ? `${ended} of ${run.cases.length} cases ended…`
        : `${s.passed} passed, ${s.failed} failed of ${s.cases}; ${s.changed} changed; cost ${s.cost === null ? "none priced" : `$${s.cost}`}`;
    const rows = run.cases.map((c) =>
      h(
        "li",
        { dataset: { case: c.name, passed: c.passed === null ? "pending" : String(c.passed) } },
        h("span", { class: `ed-status-pill run-${c.passed === null ? c.run_status : c.passed ? "succeeded" : "failed"}`, text: c.passed === null ? c.run_status : c.passed ? "pass" : "fail" }),
        " ",
        h("a", { href: `/runs/${c.run}/`, text: c.name }),
        c.origin ? [" ", h("a", { href: `/runs/${c.origin}/compare/${c.run}/`, class: "ed-suite-diff-link", text: c.changed.length ? `changed: ${c.changed.join(", ")}` : "diff" })] : null,
        c.verdicts.filter((v) => !v.passed).map((v) => h("div", { class: "ed-error-text", text: `${v.judge ? "judge: " : ""}${v.message}` })),
      ),
    );
    replaceChildren(
      this.result,
      h("p", {}, h("span", { class: `ed-status-pill run-${run.state === "passed" ? "succeeded" : run.state}`, id: "ed-suite-state", text: run.state }), " ", head),
      h("p", {}, h("a", { href: `/suite-runs/${run.id}/`, text: "Full report" })),
      h("ul", { class: "ed-run-nodes" }, rows),
    );
  }
}
