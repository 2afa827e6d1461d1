// Streamed LLM text, live: the broadcaster sends, a few times a second, the whole text so far
// of each attempt that moved (monitoring/livetext.py), so a missed message costs nothing.
// Each node shows its newest attempt; a newer attempt replaces the older one's text with a
// note that the attempt restarted (never a spliced text). The node panel, when it shows an
// LLM node, follows the same text. An agent's message carries its current turn ({seq, turn,
// state}) and that turn's text: the node panel shows it below the agent timeline while it is
// written, until the timeline (polled) shows it as a recorded step.
(function () {
  "use strict";
  const live = document.getElementById("live");
  const list = document.getElementById("llm-streams");
  const card = document.getElementById("llm-streams-card");
  if (!live || !list || !live.dataset.streamTopic) return;
  const topic = live.dataset.streamTopic;
  const MAX_SHOWN = 20;
  const latest = {}; // "run:node" -> stream data (newest attempt)

  function turnState(s) {
    const turn = s.turn;
    if (turn.state === "recorded") {
      const asks = turn.tool_calls && turn.tool_calls.length ? ` · asks for ${turn.tool_calls.join(", ")}` : "";
      return `recorded${asks}`;
    }
    if (turn.state === "failed") return "failed";
    return s.done ? "cut short" : "writing…";
  }

  function state(s) {
    if (s.turn) return `turn ${s.turn.turn} · ${turnState(s)}${s.done ? (s.error ? " · attempt failed" : " · done") : ""}`;
    return s.error ? "failed" : s.done ? "done" : "streaming…";
  }

  function label(s) {
    const cut = s.cut ? ` (first ${s.cut} characters not shown)` : "";
    return `run ${s.run} · ${s.node} · attempt ${s.attempt} · ${state(s)}${cut}`;
  }

  function restartNote(s, before) {
    if (s.turn || before.turn) {
      return `Attempt ${s.attempt} took over: it continues after the last recorded step; attempt ${before.attempt}'s unfinished turn was discarded.`;
    }
    return `Attempt ${s.attempt} restarted the answer; attempt ${before.attempt}'s partial text (${before.chars} characters) was discarded.`;
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
    if (live.dataset.topics.startsWith("run:") && String(s.run) !== live.dataset.topics.slice(4)) return;
    const node = CSS.escape(s.node);
    const turn = document.querySelector(`#node-detail [data-agent-live="${node}"]`);
    if (turn) showTurn(s, turn);
    const panel = document.querySelector(`#node-detail [data-llm-node="${node}"]`);
    if (!panel) return;
    panel.textContent = s.text;
    panel.dataset.attempt = s.attempt;
    const shown = panel.parentElement.querySelector("[data-llm-state]");
    if (shown) shown.textContent = `attempt ${s.attempt} · ${state(s)}`;
  }

  // The agent turn being written, below the timeline; hidden once the timeline has its step.
  function showTurn(s, box) {
    const recorded = s.turn && document.querySelector(`#agent-steps [data-seq="${s.turn.seq}"]`);
    box.hidden = !s.turn || Boolean(recorded);
    if (box.hidden) return;
    box.dataset.seq = s.turn.seq;
    box.dataset.attempt = s.attempt;
    box.dataset.state = s.turn.state;
    box.querySelector("[data-live-label]").textContent = `turn ${s.turn.turn}`;
    box.querySelector("[data-live-state]").textContent = `attempt ${s.attempt} · ${turnState(s)}`;
    box.querySelector("[data-live-text]").textContent = s.text;
  }

  function show(s) {
    const key = `${s.run}:${s.node}`;
    const before = latest[key];
    if (before && before.attempt > s.attempt) return; // an older attempt's late message
    latest[key] = s;
    const box = block(key, s);
    const [head, restart, pre] = box.children;
    if (before && before.attempt < s.attempt) {
      restart.hidden = false;
      restart.textContent = restartNote(s, before);
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
