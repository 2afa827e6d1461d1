// Selection in a list with bulk actions: "select all on this page", a count of the ticked, and
// buttons that say how many they act on: `data-count-label="Replay {n} selected…"`, and, while
// the form's "all matching" box is ticked, `data-matching-label="Replay all 19 matching…"`.
function update(form) {
  const count = form.querySelectorAll('input[name="ids"]:checked').length;
  const out = form.querySelector("[data-selected-count]");
  if (out) out.textContent = `${count} selected`;
  const matching = form.querySelector('input[name="scope"][value="matching"]:checked');
  for (const button of form.querySelectorAll("button[data-count-label]")) {
    const label = matching && button.dataset.matchingLabel;
    button.textContent = label || button.dataset.countLabel.replace("{n}", String(count));
  }
}
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!(box instanceof HTMLInputElement) || !box.form) return;
  if (box.matches("[data-select-all]")) {
    for (const b of box.form.querySelectorAll('input[name="ids"]')) b.checked = box.checked;
  }
  if (box.matches('[data-select-all], input[name="ids"], input[name="scope"]')) update(box.form);
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
