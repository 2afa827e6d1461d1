// One date format on every page: relative text ("3 min ago", "in 2 h"), with the absolute
// time in the browser's own time zone on hover. The server renders `<time datetime title>`
// (the `when` filter: its title is UTC until this runs); the editor builds the same element
// with `timeElement`. Millisecond precision stays in the title: a run's steps are read there.
const UNITS = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];

export function relative(then, now) {
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

const pad = (n, width = 2) => String(n).padStart(width, "0");

// 2026-11-27 09:14:03.250 CET: the local date and time, and the zone's short name.
export function absoluteLocal(date) {
  const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
    .formatToParts(date)
    .find((part) => part.type === "timeZoneName");
  const day = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
  return `${day} ${time}${zone ? " " + zone.value : ""}`;
}

// Bring every <time datetime> under `root` up to date: the relative text (unless the element
// keeps its own text: `data-keep-text`) and the local absolute time in its title.
export function refreshTimes(root = document, now = Date.now()) {
  for (const node of root.querySelectorAll("time[datetime]")) {
    const then = Date.parse(node.getAttribute("datetime"));
    if (Number.isNaN(then)) continue;
    node.title = absoluteLocal(new Date(then));
    if (!node.hasAttribute("data-keep-text")) node.textContent = relative(then, now);
  }
}

export function timeElement(iso) {
  const node = document.createElement("time");
  if (!iso) return node;
  node.setAttribute("datetime", iso);
  refreshTimes({ querySelectorAll: () => [node] });
  return node;
}
