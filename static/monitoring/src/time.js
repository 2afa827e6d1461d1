// Keeps "3 min ago" true and every absolute time in the reader's zone (static/shared/time.js):
// rewrites each <time datetime> (from the `when` filter, and those added later by htmx or
// the live updates) at load, after each swap, and every 15 seconds.
import { refreshTimes } from "../../shared/time.js";

const refresh = () => refreshTimes();
window.setInterval(refresh, 15000);
document.addEventListener("htmx:afterSettle", refresh);
document.addEventListener("sy:message", () => window.setTimeout(refresh, 0));
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", refresh);
else refresh();
