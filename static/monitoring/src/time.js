// Keeps "3 min ago" true: rewrites every <time datetime> rendered by the `when` filter
// (and those added later by htmx or the live updates) every 15 seconds.
const UNITS = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];

function relative(then, now) {
  const seconds = Math.round((now - then) / 1000);
  const size = Math.abs(seconds);
  if (size < 10) return "just now";
  for (const [unit, span] of UNITS) {
    if (size >= span) {
      const amount = `${Math.floor(size / span)} ${unit}`;
      return seconds > 0 ? `${amount} ago` : `in ${amount}`;
    }
  }
  return "just now";
}

function refresh() {
  const now = Date.now();
  for (const node of document.querySelectorAll("time[datetime][title]")) {
    const then = Date.parse(node.getAttribute("datetime"));
    if (!Number.isNaN(then)) node.textContent = relative(then, now);
  }
}

window.setInterval(refresh, 15000);
document.addEventListener("htmx:afterSettle", refresh);
