// The overview's and the live page's charts: uPlot canvases over the JSON of /charts/<name>.json.
// One window picker drives every chart of the page; the choice is kept in the URL (?window=)
// and redrawn every REFRESH_MS. Colours come from CSS custom properties, so the dark theme
// applies to the charts too.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "./charts.css";

const REFRESH_MS = 30000;
const PALETTE = ["--chart-1", "--chart-2", "--chart-3", "--chart-4", "--chart-5", "--chart-6"];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

function colourFor(label, index) {
  if (label === "succeeded") return cssVar("--ok");
  if (label === "failed" || label === "opened") return cssVar("--bad");
  return cssVar(PALETTE[index % PALETTE.length]);
}

// Durations and backlog samples have gaps (no run finished, no sample taken): joined, with
// their points drawn, so a single sample still shows.
const SPARSE = new Set(["durations", "backlog"]);

function formatMs(v) {
  if (v == null) return "–";
  return v >= 1000 ? `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)} s` : `${Math.round(v)} ms`;
}

function formatTime(ts, withDay) {
  const iso = new Date(ts * 1000).toISOString(); // UTC, as every absolute time on the pages
  return withDay ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(11, 16);
}

function seriesOf(data, unit, sparse) {
  return data.series.map((s, i) => ({
    label: s.label,
    stroke: colourFor(s.label, i),
    width: 2,
    dash: s.label.endsWith(" p50") ? [6, 4] : undefined,
    spanGaps: sparse,
    points: sparse ? { show: true, size: 5, fill: colourFor(s.label, i) } : undefined,
    value: (u, v) => (unit === "ms" ? formatMs(v) : v == null ? "–" : String(v)),
  }));
}

function options(el, data, unit, sparse) {
  const ink = cssVar("--muted");
  const grid = { stroke: cssVar("--line"), width: 1 };
  return {
    width: Math.max(240, el.clientWidth),
    height: 180,
    series: [{ value: (u, ts) => (ts == null ? "–" : `${formatTime(ts, true)} UTC`) }, ...seriesOf(data, unit, sparse)],
    axes: [
      { stroke: ink, grid, ticks: grid, values: (u, splits) => splits.map((ts) => formatTime(ts, data.step >= 3600)) },
      { stroke: ink, grid, ticks: grid, size: 64, values: (u, vals) => vals.map((v) => (unit === "ms" ? formatMs(v) : v)) },
    ],
    scales: { y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    legend: { live: true },
  };
}

class Chart {
  constructor(el) {
    this.el = el;
    this.name = el.dataset.chart;
    this.unit = el.dataset.unit || "";
    this.workflow = el.dataset.workflow || "";
    this.plot = null;
    this.tickets = 0;
  }

  url(windowName) {
    const q = new URLSearchParams({ window: windowName });
    if (this.workflow) q.set("workflow", this.workflow);
    return `/charts/${this.name}.json?${q}`;
  }

  async load(windowName) {
    // Answers can arrive out of order (a window picked while the last load is in flight):
    // only the latest request's answer is drawn, or an older window could be drawn last.
    const ticket = ++this.tickets;
    const answer = await fetch(this.url(windowName), { headers: { Accept: "application/json" } });
    if (ticket !== this.tickets) return;
    if (!answer.ok) {
      this.el.dataset.state = "error";
      this.el.textContent = `Could not load this chart (HTTP ${answer.status}).`;
      return;
    }
    const data = await answer.json();
    if (ticket === this.tickets) this.draw(data);
  }

  draw(data) {
    const columns = [data.t, ...data.series.map((s) => s.values)];
    const points = data.series.reduce((n, s) => n + s.values.filter((v) => v != null && v !== 0).length, 0);
    this.el.dataset.points = String(points);
    this.el.dataset.window = data.window;
    const empty = this.el.parentElement.querySelector(".chart-empty");
    if (empty) empty.hidden = points > 0;
    if (this.plot) this.plot.destroy();
    this.el.replaceChildren();
    this.plot = new uPlot(options(this.el, data, this.unit, SPARSE.has(this.name)), columns, this.el);
    this.el.dataset.state = "drawn";
  }

  resize() {
    if (this.plot) this.plot.setSize({ width: Math.max(240, this.el.clientWidth), height: 180 });
  }
}

function start() {
  const nodes = document.querySelectorAll("[data-chart]");
  if (!nodes.length) return;
  const charts = Array.from(nodes, (el) => new Chart(el));
  const picker = document.querySelector("[data-chart-window]");
  let current = new URLSearchParams(window.location.search).get("window") || "1h";

  function loadAll() {
    return Promise.all(charts.map((c) => c.load(current)));
  }

  function select(name) {
    current = name;
    if (picker) {
      for (const b of picker.querySelectorAll("button[data-window]")) {
        b.setAttribute("aria-pressed", String(b.dataset.window === name));
      }
    }
    const url = new URL(window.location.href);
    url.searchParams.set("window", name);
    window.history.replaceState(null, "", url);
    loadAll();
  }

  if (picker) {
    picker.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-window]");
      if (button) select(button.dataset.window);
    });
  }
  window.addEventListener("resize", () => charts.forEach((c) => c.resize()));
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", loadAll);
  window.setInterval(loadAll, REFRESH_MS);
  select(current);
}

start();
