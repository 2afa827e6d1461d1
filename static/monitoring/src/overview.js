// The executions-per-second chart of the overview: an SVG area over the last minute.
function startRateChart() {
  const svg = document.getElementById("rate-chart");
  const initial = document.getElementById("rate-data");
  if (!svg || !initial) return;
  const NS = "http://www.w3.org/2000/svg";
  const W = 600;
  const H = 120;

  function el(name, attrs) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  }

  function draw(series) {
    svg.replaceChildren();
    if (!series || !series.length) {
      svg.setAttribute("aria-label", "No data yet: the broadcaster fills this in.");
      return;
    }
    const max = Math.max(1, ...series);
    const step = W / Math.max(1, series.length - 1);
    const points = series.map((v, i) => `${(i * step).toFixed(1)},${(H - 4 - (v / max) * (H - 24)).toFixed(1)}`);
    svg.appendChild(el("polygon", { points: `0,${H} ${points.join(" ")} ${W},${H}`, class: "chart-area" }));
    svg.appendChild(el("polyline", { points: points.join(" "), class: "chart-line" }));
    const peak = document.getElementById("rate-peak");
    if (peak) peak.textContent = `peak ${max}/s · `;
  }

  draw(JSON.parse(initial.textContent));
  document.addEventListener("sy:message", function (event) {
    if (event.detail.topic === "overview") draw(event.detail.data.rate);
  });
}

startRateChart();
