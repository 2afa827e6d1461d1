// Live updates of a dashboard page over one websocket.
//
// The page names its topics in <div id="live" data-topics="...">. Every message carries
// its topic, the sender's epoch and a sequence number; HTML fragments in `html` replace the
// inner HTML of the elements with those ids, `data` goes to the page's own scripts as a
// `sy:message` event. A gap in the numbers, or a reconnect, triggers `sy:resync` on <body>:
// every live element re-fetches its fragment with htmx (hx-trigger="sy:resync from:body").
function startLive() {
  const live = document.getElementById("live");
  if (!live || !window.WebSocket) return;
  // The navigation's inbox count follows `approvals` on every live page that shows it.
  const named = live.dataset.topics.split(",").filter(Boolean);
  if (document.getElementById("nav-inbox-count") && !named.includes("approvals")) named.push("approvals");
  // Streamed LLM text (llmstream.js) travels on a topic of its own.
  if (live.dataset.streamTopic) named.push(live.dataset.streamTopic);
  const topics = named.join(",");
  const status = document.getElementById("live-status");
  const REFRESH_MS = 1000;
  let state = {};
  let socket = null;
  let delay = 500;
  let connectedBefore = false;
  let stopped = false;
  const refreshing = {};

  function show(text, kind) {
    if (!status) return;
    status.hidden = false;
    status.textContent = text;
    status.className = "live-status " + kind;
  }

  function trigger(name) {
    if (window.htmx) window.htmx.trigger(document.body, name);
    else document.body.dispatchEvent(new CustomEvent(name));
  }

  function resync() {
    trigger("sy:resync");
    document.dispatchEvent(new CustomEvent("sy:resync"));
  }

  // Lists re-fetch themselves on change, at most once a second (with a trailing refresh).
  function refresh(topic) {
    if (refreshing[topic]) {
      refreshing[topic].again = true;
      return;
    }
    trigger("sy:refresh-" + topic);
    const entry = { again: false };
    refreshing[topic] = entry;
    setTimeout(function () {
      delete refreshing[topic];
      if (entry.again) refresh(topic);
    }, REFRESH_MS);
  }

  // A <select data-options-from="attr"> outside the live fragments (a form needs the page's
  // CSRF token, which broadcast HTML cannot carry) offers one option per live row
  // [data-<attr>]: a worker that starts after the page loaded can be picked without a reload.
  function followRows() {
    for (const select of document.querySelectorAll("select[data-options-from]")) {
      const attr = select.dataset.optionsFrom;
      const names = [...document.querySelectorAll(`tr[data-${attr}]`)].map((tr) => tr.dataset[attr]);
      const have = [...select.options].map((o) => o.value);
      if (names.join("\n") === have.join("\n")) continue;
      const chosen = select.value;
      select.replaceChildren(...names.map((name) => new Option(name, name, false, name === chosen)));
    }
  }

  function apply(msg) {
    const last = state[msg.topic];
    const gap = last && (last.epoch !== msg.epoch || msg.seq !== last.seq + 1);
    state[msg.topic] = { epoch: msg.epoch, seq: msg.seq };
    if (gap) resync();
    for (const [id, html] of Object.entries(msg.html || {})) {
      const target = document.getElementById(id);
      if (!target) continue;
      target.innerHTML = html;
      if (window.htmx) window.htmx.process(target);
    }
    followRows();
    if (msg.topic === "runs" || msg.topic === "deadletters" || msg.topic === "approvals") refresh(msg.topic);
    live.dataset.lastSeq = msg.topic + ":" + msg.seq;
    document.dispatchEvent(new CustomEvent("sy:message", { detail: msg }));
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/monitor/?topics=" + encodeURIComponent(topics));
    socket.onopen = function () {
      delay = 500;
      state = {};
      show("live", "ok");
      live.dataset.connected = "true";
      if (connectedBefore) resync();
      connectedBefore = true;
    };
    socket.onmessage = function (event) {
      apply(JSON.parse(event.data));
    };
    socket.onclose = function (event) {
      live.dataset.connected = "false";
      if (stopped) return;
      if (event.code === 4403) {
        show("not allowed: log in again", "bad");
        return;
      }
      show("reconnecting…", "warn");
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 5000);
    };
  }

  window.addEventListener("pagehide", function () {
    stopped = true;
    if (socket) socket.close();
  });
  connect();
}

startLive();
