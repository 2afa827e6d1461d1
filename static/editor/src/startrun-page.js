// Entry point on pages other than the editor (workflow list, live page, runs page): every
// button with data-start-run opens the start-run dialog, for its workflow (the attribute's
// value) or, empty, with a choice of workflow. The config comes from {% start_run_dialog %}.
import { StartRunDialog } from "./startrun.js";

const config = JSON.parse(document.getElementById("start-run-config").textContent);
let dialog = null;

document.addEventListener("click", (event) => {
  const button = event.target.closest?.("[data-start-run]");
  if (!button) return;
  event.preventDefault();
  dialog ??= new StartRunDialog(config);
  dialog.open(button.dataset.startRun || null);
});
