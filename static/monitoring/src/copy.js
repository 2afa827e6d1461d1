// Copy buttons: <button data-copy="#field"> copies the field's value to the clipboard and
// says so beside it (`data-copied-for`). Falls back to selecting the text for Ctrl+C.
document.addEventListener("click", async function (event) {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const field = document.querySelector(button.dataset.copy);
  if (!field) return;
  const note = document.querySelector(`[data-copied-for="${button.dataset.copy}"]`);
  try {
    await navigator.clipboard.writeText(field.value);
    if (note) { note.textContent = "Copied to the clipboard."; note.hidden = false; }
  } catch (err) {
    field.select();
    if (note) { note.textContent = "Selected: press Ctrl+C to copy."; note.hidden = false; }
  }
});
