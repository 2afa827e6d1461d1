// Keyboard shortcuts: `?` lists them; g o / g r / g d / g w go to a page; `/` focuses the
// page's search field. Ignored while typing in a field.
const GO = { o: "/", r: "/runs/", d: "/dead-letters/", w: "/workflows/" };
let pending = null;

function typing(target) {
  return target.closest("input, textarea, select, [contenteditable]") !== null;
}

function toggleHelp(show) {
  const dialog = document.getElementById("shortcuts");
  if (!dialog) return;
  if (show && !dialog.open) dialog.showModal();
  else if (!show && dialog.open) dialog.close();
}

document.addEventListener("click", function (event) {
  if (event.target.closest("[data-shortcuts]")) toggleHelp(true);
});

document.addEventListener("keydown", function (event) {
  if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
  if (pending && GO[event.key]) {
    event.preventDefault();
    window.location.assign(GO[event.key]);
    return;
  }
  pending = event.key === "g" ? window.setTimeout(function () { pending = null; }, 1500) : null;
  if (event.key === "?") {
    event.preventDefault();
    toggleHelp(true);
  } else if (event.key === "/") {
    const search = document.querySelector("[data-search], input[type=search], form.filters input[type=text]");
    if (search) { event.preventDefault(); search.focus(); }
  }
});
