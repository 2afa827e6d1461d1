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
