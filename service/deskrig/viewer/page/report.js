"use strict";
// The trajectory viewer. Everything it shows comes from the JSON in #deskrig-data; text is always
// set with textContent (window titles and typed text are the app's, not ours). Only the selected
// turn's images are in the page, so a recording of thousands of turns loads as fast as one.
(() => {
  const data = JSON.parse(document.getElementById("deskrig-data").textContent);
  const turns = data.turns;
  const $ = (id) => document.getElementById(id);
  const list = $("turns"), detail = $("turn"), video = $("video"), markers = $("markers");
  let selected = -1, onlyErrors = false, videoPath = null;

  const el = (tag, props = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("data-")) node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  };
  const url = (path) => data.base + path.split("/").map(encodeURIComponent).join("/");
  const failed = (turn) => turn.action.is_error || !!turn.problem;
  const shortArgs = (args) => Object.entries(args || {})
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join(" ");
  const ms = (value) => value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
  const clock = (iso) => iso.replace(/^.*T/, "").replace(/(\.\d{3})\d*/, "$1").replace(/Z|[+-]00:00$/, "");
  const seconds = (s) => `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, "0")}`;

  function stats() {
    const errors = turns.filter(failed).length;
    const total = turns.reduce((sum, t) => sum + (t.action.duration_ms || 0), 0);
    const box = $("stats");
    box.replaceChildren(
      el("span", {}, el("b", { text: String(turns.length) }), ` turn${turns.length === 1 ? "" : "s"} · `),
      el("span", { class: "errors" }, el("b", { text: String(errors) }), ` failed · `),
      el("span", { text: `${ms(total)} in actions` }),
    );
    if (data.live) box.append(" ", el("span", { class: "live-badge", text: "LIVE" }));
  }

  function row(turn, index) {
    const node = el("div", { class: "turn" + (failed(turn) ? " error" : ""), role: "option", "data-turn": String(turn.number) },
      el("span", { class: "num", text: `#${turn.number}` }),
      el("span", { class: "tool", text: turn.action.tool },
        failed(turn) ? el("span", { class: "badge err", text: turn.action.error ? turn.action.error.code : "damaged" }) : null),
      el("span", { class: "time", text: ms(turn.action.duration_ms || 0) }),
      el("span", { class: "args", text: shortArgs(turn.action.arguments) }));
    node.addEventListener("click", () => select(index, true));
    return node;
  }

  function renderTimeline() {
    const rows = document.createDocumentFragment();
    turns.forEach((turn, index) => { if (!onlyErrors || failed(turn)) rows.append(row(turn, index)); });
    list.replaceChildren(rows);
    if (selected >= 0) highlight();
  }

  function highlight() {
    for (const node of list.querySelectorAll(".turn.selected")) node.classList.remove("selected");
    for (const node of markers.querySelectorAll(".mark.selected")) node.classList.remove("selected");
    const turn = turns[selected];
    const node = list.querySelector(`[data-turn="${turn.number}"]`);
    if (node) { node.classList.add("selected"); node.scrollIntoView({ block: "nearest" }); }
    const mark = markers.querySelector(`[data-turn="${turn.number}"]`);
    if (mark) mark.classList.add("selected");
  }

  function shot(label, path, turn, marker) {
    const frame = el("div", { class: "frame" });
    if (path) {
      frame.append(el("img", { src: url(path), loading: "lazy", decoding: "async", alt: `${label} turn ${turn.number}` }));
      if (marker) {
        const dot = el("div", { class: "click-marker", title: "click point" });
        dot.style.left = `${marker.x * 100}%`; dot.style.top = `${marker.y * 100}%`;
        frame.append(dot);
      }
    } else {
      const name = label === "Before" ? "before.png" : "after.png";
      const why = turn.evidence[name];
      frame.append(el("div", { class: "missing", text: `no image${why ? ` — ${why.message || why.classification || why.status}` : ""}` }));
    }
    return el("figure", { class: `shot ${label.toLowerCase()}` }, el("figcaption", { text: label }), frame);
  }

  function diffList(diff) {
    const items = diff.changes.map((change) => {
      const what = change.name ? `${change.role} "${change.name}"` : change.role;
      const line = el("li", { class: change.kind }, el("span", { class: "kind", text: change.kind }));
      if (change.kind === "added" || change.kind === "removed") line.append(what);
      else if (change.kind === "renamed") line.append(`${change.role} `, el("del", { text: `"${change.before}"` }), " → ", el("ins", { text: `"${change.after}"` }));
      else if (change.kind === "states") {
        const gone = (change.before || "").split(" ").filter(Boolean).map((state) => el("del", { text: `−${state}` }));
        const came = (change.after || "").split(" ").filter(Boolean).map((state) => el("ins", { text: `+${state}` }));
        line.append(`${what}: `);
        [...gone, ...came].forEach((part, i) => line.append(...(i ? [" ", part] : [part])));
      }
      else line.append(`${what}: `, el("del", { text: change.before ?? "∅" }), " → ", el("ins", { text: change.after ?? "∅" }));
      if (change.where) line.append(el("div", { class: "where", text: `in ${change.where}` }));
      return line;
    });
    const card = el("div", { class: "card a11y-diff" }, el("h3", { text: "Accessibility tree: before → after" }));
    if (items.length) card.append(el("ul", { class: "diff" }, ...items));
    else if (!diff.note) card.append(el("div", { class: "muted", text: "no change" }));
    if (diff.note) card.append(el("div", { class: "muted", text: diff.note }));
    return card;
  }

  function evidenceTable(evidence) {
    const rows = Object.entries(evidence).map(([name, e]) => el("tr", {},
      el("td", { text: name }), el("td", { class: e.status, text: e.status }),
      el("td", { class: "muted", text: [e.classification, e.message, e.source && `from the ${e.source}`].filter(Boolean).join(" · ") })));
    return el("table", { class: "evidence" }, el("tbody", {}, ...rows));
  }

  function renderTurn(turn) {
    const a = turn.action;
    const head = el("div", { class: "card turn-detail" + (failed(turn) ? " error" : "") },
      el("div", { class: "turn-head" },
        el("h2", { text: `Turn ${turn.number} · ${a.tool}` }),
        el("span", { class: "meta", text: `${clock(a.timestamp)} · ${ms(a.duration_ms || 0)}` +
          (turn.video ? ` · video ${seconds(turn.video.offset_s)}` : "") +
          (a.window_title ? ` · window "${a.window_title}"` : "") }),
        failed(turn) ? el("span", { class: "badge err", text: "FAILED" }) : null));
    if (turn.problem) head.append(el("div", { class: "problem", text: turn.problem }));
    if (a.error) {
      head.append(el("div", { class: "error-box" }, el("span", { class: "code", text: a.error.code }), a.error.message,
        a.error.remediation ? el("div", { class: "hint", text: a.error.remediation }) : null));
    }
    const result = a.result || {};
    if (result.effect) {
      const checks = Array.isArray(result.evidence) ? result.evidence : [];
      head.append(el("div", { class: "effect" }, el("span", { class: `effect-${result.effect}`, text: `effect: ${result.effect}` }),
        checks.length ? el("ul", { class: "checks" }, ...checks.map((line) => el("li", { text: String(line) }))) : null));
    }
    const shots = el("div", { class: "card" }, el("h3", { text: "Screen" }),
      el("div", { class: "shots" }, shot("Before", turn.before, turn, turn.marker), shot("After", turn.after, turn, null)));
    const call = el("div", { class: "card" }, el("div", { class: "cols" },
      el("div", {}, el("h3", { text: "Arguments" }), el("pre", { class: "arguments", text: JSON.stringify(a.arguments, null, 2) })),
      el("div", {}, el("h3", { text: a.error ? "Error" : "Result" }),
        el("pre", { class: "result", text: JSON.stringify(a.error || a.result, null, 2) }))));
    const evidence = el("div", { class: "card" }, el("h3", { text: "Evidence" }), evidenceTable(turn.evidence));
    detail.replaceChildren(head, shots, diffList(turn.diff), call, evidence);
  }

  function seek(turn) {
    if (!turn.video || turn.video.path !== videoPath) { if (turn.video) loadVideo(turn.video.path, turn.video.offset_s); return; }
    video.pause();
    video.currentTime = turn.video.offset_s;
  }

  function select(index, seekVideo) {
    if (index < 0 || index >= turns.length) return;
    selected = index;
    const turn = turns[index];
    renderTurn(turn);
    highlight();
    if (seekVideo) seek(turn);
    history.replaceState(null, "", `#turn-${turn.number}`);
  }

  function step(delta) {
    const visible = turns.map((t, i) => i).filter((i) => !onlyErrors || failed(turns[i]));
    if (!visible.length) return;
    const here = visible.indexOf(selected);
    const next = here < 0 ? (delta > 0 ? visible[0] : visible[visible.length - 1]) : visible[Math.min(visible.length - 1, Math.max(0, here + delta))];
    select(next, true);
  }

  function renderMarkers() {
    markers.replaceChildren();
    const duration = video.duration;
    if (!isFinite(duration) || duration <= 0) return;
    turns.forEach((turn, index) => {
      if (!turn.video || turn.video.path !== videoPath) return;
      const mark = el("button", { class: "mark" + (failed(turn) ? " error" : ""), title: `#${turn.number} ${turn.action.tool}`, "data-turn": String(turn.number) });
      mark.style.left = `${Math.min(100, (turn.video.offset_s / duration) * 100)}%`;
      mark.addEventListener("click", () => select(index, true));
      markers.append(mark);
    });
    markers.append(el("div", { class: "playhead", id: "playhead" }));
    if (selected >= 0) highlight();
  }

  function loadVideo(path, at) {
    $("video-panel").hidden = false;
    videoPath = path;
    video.src = url(path);
    video.addEventListener("loadedmetadata", () => { renderMarkers(); if (at != null) video.currentTime = at; }, { once: true });
  }

  function setUpVideo() {
    const used = turns.find((t) => t.video && data.videos.includes(t.video.path));
    const path = used ? used.video.path : data.videos[data.videos.length - 1];
    if (!path) {
      if (data.live) { $("video-panel").hidden = false; $("video-note").textContent = "The video appears here once the recording is finalised."; }
      return;
    }
    loadVideo(path, null);
    if (!turns.some((t) => t.video)) $("video-note").textContent = "This recording does not say where its turns are in the video.";
    video.addEventListener("timeupdate", () => {
      const head = $("playhead");
      if (head && isFinite(video.duration)) head.style.left = `${(video.currentTime / video.duration) * 100}%`;
    });
  }

  function follow() {
    const source = new EventSource(`${data.live.events}?after=${turns.length ? turns[turns.length - 1].number : 0}`);
    source.addEventListener("turn", async (event) => {
      const seq = JSON.parse(event.data).seq;
      const response = await fetch(`${data.live.turn}${seq}`);
      if (!response.ok) return;
      const turn = await response.json();
      const atEnd = selected === turns.length - 1;
      turns.push(turn);
      stats();
      if (!onlyErrors || failed(turn)) list.append(row(turn, turns.length - 1));
      if (atEnd || selected < 0) select(turns.length - 1, false);
    });
    source.addEventListener("video", (event) => {
      const path = JSON.parse(event.data).path;
      if (!data.videos.includes(path)) data.videos.push(path);
      $("video-note").textContent = "";
      loadVideo(path, null);
    });
    // Another recording became the rig's current one: show it instead.
    source.addEventListener("recording", () => { source.close(); location.reload(); });
  }

  document.addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLInputElement || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "ArrowRight" || event.key === "ArrowDown" || event.key === "j") { step(1); event.preventDefault(); }
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp" || event.key === "k") { step(-1); event.preventDefault(); }
    else if (event.key === "e" || event.key === "E") {
      const next = turns.findIndex((t, i) => i > selected && failed(t));
      if (next >= 0) select(next, true);
    }
  });
  $("only-errors").addEventListener("change", (event) => { onlyErrors = event.target.checked; renderTimeline(); });

  $("title").textContent = data.title;
  stats();
  renderTimeline();
  setUpVideo();
  const linked = /^#turn-(\d+)$/.exec(location.hash);
  const start = linked ? turns.findIndex((t) => t.number === Number(linked[1])) : -1;
  if (turns.length) select(start >= 0 ? start : 0, false);
  else detail.replaceChildren(el("div", { class: "card muted", text: "No turn recorded yet." }));
  if (data.live) follow();
})();
