// Streamed LLM text, live: the broadcaster sends, a few times a second, each attempt's new
// piece (`offset`: where it goes) and, every two seconds and at the end, its whole text
// (`whole`) (monitoring/livetext.py). A piece that continues the text shown is appended; a
// piece after a gap (a missed message, a page opened mid-stream) waits for the next whole
// text. Each node shows its newest attempt; a newer attempt replaces the older one's text with a
// note that the attempt restarted (never a spliced text). The node panel, when it shows an
// LLM node, follows the same text.
(function () {
  "use strict";
  const live = document.getElementById("live");
  const list = document.getElementById("llm-streams");
  const card = document.getElementById("llm-streams-card");
  if (!live || !list || !live.dataset.streamTopic) return;
  const topic = live.dataset.streamTopic;
  const MAX_SHOWN = 20;
  const MAX_CHARS = 20000; // as the broadcaster's whole texts
  const latest = {}; // "run:node" -> the newest attempt's state: its data, `start` and `text`

  // The state after message `s`, or null if `s` cannot be placed (wait for a whole text).
  function merged(before, s) {
    if (s.whole) return { ...s, start: s.offset };
    if (!before || before.attempt !== s.attempt || s.offset !== before.start + before.text.length) return null;
    const text = before.text + s.text;
    const over = Math.max(0, text.length - MAX_CHARS);
    return { ...s, start: before.start + over, text: text.slice(over) };
  }

  function label(s) {
    const state = s.error ? "failed" : s.done ? "done" : "streaming…";
    const cut = s.start ? ` (first ${s.start} characters not shown)` : "";
    return `run ${s.run} · ${s.node} · attempt ${s.attempt} · ${state}${cut}`;
  }

  function block(key, s) {
    let box = list.querySelector(`[data-stream="${CSS.escape(key)}"]`);
    if (!box) {
      box = document.createElement("div");
      box.className = "llm-stream";
      box.dataset.stream = key;
      const head = document.createElement("div");
      head.className = "llm-stream-head muted";
      const restart = document.createElement("div");
      restart.className = "llm-restart";
      restart.hidden = true;
      const pre = document.createElement("pre");
      pre.className = "code llm-text";
      box.append(head, restart, pre);
    }
    list.prepend(box);
    return box;
  }

  function showPanel(s) {
    const panel = document.querySelector(`#node-detail [data-llm-node="${CSS.escape(s.node)}"]`);
    if (!panel || (live.dataset.topics.startsWith("run:") && String(s.run) !== live.dataset.topics.slice(4))) return;
    panel.textContent = s.text;
    panel.dataset.attempt = s.attempt;
    const state = panel.parentElement.querySelector("[data-llm-state]");
    if (state) state.textContent = `attempt ${s.attempt} · ${s.error ? "failed" : s.done ? "done" : "streaming…"}`;
  }

  function show(message) {
    const key = `${message.run}:${message.node}`;
    const before = latest[key];
    if (before && before.attempt > message.attempt) return; // an older attempt's late message
    const s = merged(before, message);
    if (!s) return;
    latest[key] = s;
    const box = block(key, s);
    const [head, restart, pre] = box.children;
    if (before && before.attempt < s.attempt) {
      restart.hidden = false;
      restart.textContent = `Attempt ${s.attempt} restarted the answer; attempt ${before.attempt}'s partial text (${before.chars} characters) was discarded.`;
    }
    head.textContent = label(s);
    box.dataset.attempt = s.attempt;
    box.dataset.done = s.done ? "true" : "false";
    pre.textContent = s.text;
    pre.classList.toggle("error", Boolean(s.error));
    while (list.children.length > MAX_SHOWN) list.lastElementChild.remove();
    card.hidden = false;
    showPanel(s);
  }

  document.addEventListener("sy:message", (event) => {
    if (event.detail.topic !== topic) return;
    for (const s of event.detail.data.streams) show(s);
  });
  // A node panel loaded after its text started streaming catches up from what came already.
  document.body.addEventListener("htmx:afterSwap", () => Object.values(latest).forEach(showPanel));
})();
