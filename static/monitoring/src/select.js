// Selection in a list with bulk actions: "select all on this page" and a count of the ticked.
function update(form) {
  const count = form.querySelectorAll('input[name="ids"]:checked').length;
  const out = form.querySelector("[data-selected-count]");
  if (out) out.textContent = `${count} selected`;
}
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.form) return;
  if (box.matches("[data-select-all]")) {
    for (const b of box.form.querySelectorAll('input[name="ids"]')) b.checked = box.checked;
  }
  if (box.matches('[data-select-all], input[name="ids"]')) update(box.form);
});

// A list with a selection is not refreshed under the user's hands: a live refresh of an element
// with data-hold-refresh-while="<selector>" is dropped while the selector matches inside it
// (the next one after the selection is cleared goes through). Not an hx-trigger filter: htmx
// evaluates those as code, which the Content-Security-Policy refuses (controlplane/csp.py).
document.addEventListener("htmx:confirm", (event) => {
  const list = event.detail.elt;
  const cause = event.detail.triggeringEvent;
  const hold = list instanceof HTMLElement ? list.dataset.holdRefreshWhile : undefined;
  if (hold && cause && cause.type.startsWith("sy:refresh-") && list.querySelector(hold)) {
    event.preventDefault();
  }
});
