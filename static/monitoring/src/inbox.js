// The inbox: keep the ticked approvals and the open one marked when the list refreshes
// itself (a new approval arrived, one was decided), count the selection, select all.
function startInbox() {
  const list = document.getElementById("inbox-list");
  if (!list) return;
  const counter = document.querySelector("[data-selected-count]");
  const idle = counter ? counter.textContent : "";
  let ticked = new Set();

  function boxes() {
    return Array.from(list.querySelectorAll('input[name="ids"]'));
  }

  function openId() {
    const pane = document.querySelector("[data-approval-detail]");
    return pane ? pane.dataset.approvalDetail : "";
  }

  function mark() {
    const open = openId();
    for (const row of list.querySelectorAll("tr[data-approval]")) {
      row.classList.toggle("selected", row.dataset.approval === open);
    }
  }

  function count() {
    const n = boxes().filter((b) => b.checked).length;
    if (counter) counter.textContent = n ? n + " selected" : idle;
    // Each button states how many approvals it decides (nothing is ticked for the person).
    for (const button of document.querySelectorAll("[data-inbox-bulk] button[data-count-label]")) {
      button.textContent = button.dataset.countLabel.replace("{n}", String(n));
    }
  }

  list.addEventListener("htmx:beforeSwap", function () {
    ticked = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
  });
  list.addEventListener("htmx:afterSwap", function () {
    for (const box of boxes()) box.checked = ticked.has(box.value);
    mark();
    count();
  });
  list.addEventListener("change", function (event) {
    if (event.target.matches("[data-select-all]")) {
      for (const box of boxes()) box.checked = event.target.checked;
    }
    count();
  });
  // A refused decision (4xx) carries the pane with its message: show it, do not drop it.
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    const status = event.detail.xhr.status;
    if (status >= 400 && status < 500 && event.detail.target && event.detail.target.id === "inbox-detail") {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  document.body.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "inbox-detail") mark();
  });
}

startInbox();
