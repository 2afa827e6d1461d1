// Durations of what is still going on (a live run, a running or waiting node) grow on the
// page: the server renders them with `data-live-since` (epoch seconds, the `live_since`
// filter), and this rewrites their text from the clock, formatted as the server's `millis`
// filter does (840 ms, 3.2 s, 4 min 10 s). A finished one is rendered without the attribute.
export function millis(ms) {
  if (ms < 1000) return ms >= 10 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.floor((ms % 60000) / 1000)} s`;
}

export function tickDurations(now = Date.now()) {
  for (const node of document.querySelectorAll("[data-live-since]")) {
    const since = parseFloat(node.dataset.liveSince);
    if (!Number.isNaN(since)) node.textContent = millis(Math.max(0, now - since * 1000));
  }
}
