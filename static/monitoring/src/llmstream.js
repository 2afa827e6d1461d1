// Streamed LLM text, live: the broadcaster sends each attempt's new piece as the workers
// write it (`offset`: where it goes; monitoring/services/livefeed.py) and, every two seconds, at the end and when an agent's turn
// moves on, its whole text (`whole`) (monitoring/services/livetext.py). A piece that continues the
// text shown is appended; a piece after a gap (a missed message, a page opened mid-stream)
// waits for the next whole text. Each node shows its newest attempt; a newer attempt replaces the older one's text with a
// note that the attempt restarted (never a spliced text). The node panel, when it shows an
// LLM node, follows the same text. An agent's message carries its current turn ({seq, turn,
// state}) and that turn's text: the node panel shows it below the agent timeline while it is
// written, until the timeline (polled) shows it as a recorded step.
function startStreams() {
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
    const sameTurn = (before && before.turn ? before.turn.seq : null) === (s.turn ? s.turn.seq : null);
    if (!before || before.attempt !== s.attempt || !sameTurn || s.offset !== before.start + before.text.length) return null;
    const text = before.text + s.text;
    const over = Math.max(0, text.length - MAX_CHARS);
    return { ...s, start: before.start + over, text: text.slice(over) };
  }

  function turnState(s) {
    const turn = s.turn;
    if (turn.state === "recorded") {
      const asks = turn.tool_calls && turn.tool_calls.length ? ` · asks for ${turn.tool_calls.join(", ")}` : "";
      return `recorded${asks}`;
    }
    if (turn.state === "failed") return "failed";
    if (s.done) return "cut short";
    if (turn.state === "calling") return `writing tool calls: ${callNames(turn.calls)}`;
    return "writing…";
  }

  function callNames(calls) {
    return (calls || []).map((c) => c.name || "…").join(", ");
  }

  function state(s) {
    if (s.turn) return `turn ${s.turn.turn} · ${turnState(s)}${s.done ? (s.error ? " · attempt failed" : " · done") : ""}`;
    return s.error ? "failed" : s.done ? "done" : "streaming…";
  }

  function label(s) {
    const cut = s.start ? ` (first ${s.start} characters not shown)` : "";
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
    // The tool calls the model is writing: name and arguments so far (text, never HTML).
    const calls = box.querySelector("[data-live-calls]");
    const writing = s.turn.state === "calling" && !s.done ? s.turn.calls || [] : [];
    calls.hidden = !writing.length;
    calls.replaceChildren(
      ...writing.map((c) => {
        const item = document.createElement("li");
        item.textContent = `${c.name || "…"}(${c.arguments})`;
        return item;
      })
    );
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
}

startStreams();
