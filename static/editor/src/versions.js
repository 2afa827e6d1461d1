// The side panel's Versions tab: history (who, when, comment, status), open, compare,
// publish and roll back.
import { h, replaceChildren } from "./dom.js";
import { timeElement } from "../../shared/time.js";

export const PUBLISH_NOTE =
  "Publishing or activating a version takes effect for new runs at once: running schedulers " +
  "pick it up without a restart. Runs already in flight finish on the version they started with.";

export class VersionsPanel {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.versions = [];
  }

  async refresh() {
    const res = await this.app.api.versions();
    if (!res.ok) {
      replaceChildren(this.root, h("p", { class: "ed-error-text", text: res.error }));
      return;
    }
    this.versions = res.data.items;
    this.render();
  }

  render() {
    const app = this.app;
    const current = app.version?.number;
    const rows = this.versions.map((v) => {
      const badges = [h("span", { class: `ed-badge ed-badge-${v.status}`, text: v.status })];
      if (v.active) badges.push(h("span", { class: "ed-badge ed-badge-active", text: "active" }));
      if (v.test_snapshot) badges.push(h("span", { class: "ed-badge", text: "test version" }));
      const actions = [h("a", { href: `${app.config.urls.editor}?version=${v.number}`, text: v.number === current ? "open (current)" : "open" })];
      if (app.can.publish && v.status === "draft") {
        actions.push(h("button", { type: "button", class: "ed-link", onclick: () => app.publish(v.number), text: "publish" }));
      }
      if (app.can.publish && v.status === "published" && !v.active) {
        const active = this.versions.find((other) => other.active);
        const label = active && v.number < active.number ? "roll back to this" : "make active";
        actions.push(h("button", { type: "button", class: "ed-link", onclick: () => app.activate(v.number), text: label }));
      }
      return h(
        "li",
        { class: `ed-version${v.number === current ? " ed-current" : ""}`, dataset: { number: String(v.number) } },
        h("div", { class: "ed-version-head" }, h("strong", { text: `v${v.number}` }), ...badges),
        h("div", { class: "ed-muted" }, `${v.created_by || "unknown"} · `, timeElement(v.created_at), ` · ${v.nodes} nodes`),
        v.comment ? h("div", { class: "ed-version-comment", text: v.comment }) : null,
        h("div", { class: "ed-version-actions" }, actions),
      );
    });
    replaceChildren(
      this.root,
      h("h3", { text: "Versions" }),
      h("p", { class: "ed-note", text: PUBLISH_NOTE }),
      this.versions.length >= 2 ? this.compareForm() : null,
      rows.length ? h("ol", { class: "ed-version-list" }, rows) : h("p", { class: "ed-muted", text: "No version saved yet." }),
      h("p", {}, h("a", { href: app.config.urls.historyPage, text: "Full history page" })),
    );
  }

  compareForm() {
    const numbers = this.versions.map((v) => v.number);
    const from = h("select", { name: "from", "aria-label": "compare from" });
    const to = h("select", { name: "to", "aria-label": "compare to" });
    for (const n of numbers) {
      from.append(h("option", { value: String(n), text: `v${n}` }));
      to.append(h("option", { value: String(n), text: `v${n}` }));
    }
    to.value = String(numbers[0]);
    from.value = String(numbers[1]);
    return h(
      "form",
      { class: "ed-compare", method: "get", action: this.app.config.urls.diffPage },
      "Compare ",
      from,
      " with ",
      to,
      " ",
      h("button", { type: "submit", text: "Show diff" }),
    );
  }
}
