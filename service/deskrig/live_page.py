"""The live screen's page: reads ``/live/frames`` (MJPEG) with ``fetch`` and shows each frame.

An ``<img src=/live/frames>`` would show the stream too, but gives a page no way to tell when a
frame arrived or that the stream broke. So the page parses the parts itself (each says its
``Content-Length``), decodes each JPEG before swapping it in (no flicker), reconnects after a
break, and keeps what it has shown in ``window.deskrigLive`` (``frames``, ``seq``, ``grabbedMs``,
``shownMs``) for tests and the benchmark to read. Clicking the picture toggles between fitting the
window and actual size; nothing is ever sent to the desktop: the page only watches.
"""

LIVE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>deskrig: live screen</title>
<style>
body{margin:0;background:#1b1b1b;color:#ddd;font:13px system-ui,sans-serif}
header{display:flex;gap:1em;align-items:center;padding:.4em .8em;background:#111}
#state{font-weight:600}#state.live{color:#5c5}#state.down{color:#e66}
main{padding:.5em;text-align:center}
#screen{max-width:100%;cursor:zoom-in;image-rendering:auto;box-shadow:0 0 0 1px #333}
#screen.actual{max-width:none;cursor:zoom-out}
</style></head><body>
<header><span id="state" class="down">connecting</span><span id="info"></span>
<span style="margin-left:auto">view only</span></header>
<main><img id="screen" alt="the rig's screen"></main>
<script>
"use strict";
const screenImg = document.getElementById("screen");
const stateEl = document.getElementById("state");
const infoEl = document.getElementById("info");
window.deskrigLive = {frames: 0, seq: 0, grabbedMs: 0, shownMs: 0};
screenImg.addEventListener("click", () => screenImg.classList.toggle("actual"));

function setState(text, live) { stateEl.textContent = text; stateEl.className = live ? "live" : "down"; }

function headEnd(buffer) {
  for (let i = 0; i + 3 < buffer.length; i++) {
    if (buffer[i] === 13 && buffer[i + 1] === 10 && buffer[i + 2] === 13 && buffer[i + 3] === 10) return i;
  }
  return -1;
}

function header(head, name) {
  const line = head.split("\\r\\n").find(l => l.toLowerCase().startsWith(name + ":"));
  return line ? line.slice(name.length + 1).trim() : "";
}

async function show(jpeg, head) {
  const url = URL.createObjectURL(new Blob([jpeg], {type: "image/jpeg"}));
  const decoded = new Image();
  decoded.src = url;
  try { await decoded.decode(); } catch (e) { URL.revokeObjectURL(url); return; }
  const old = screenImg.src;
  screenImg.src = url;
  if (old.startsWith("blob:")) URL.revokeObjectURL(old);
  const live = window.deskrigLive;
  live.frames += 1;
  live.seq = Number(header(head, "x-frame-seq"));
  live.grabbedMs = Number(header(head, "x-frame-time"));
  live.shownMs = Date.now();
  infoEl.textContent = `${decoded.naturalWidth}\\u00d7${decoded.naturalHeight} \\u00b7 frame ${live.seq} \\u00b7 ` +
    `changed ${new Date(live.grabbedMs).toLocaleTimeString()}`;
}

async function watch() {
  const response = await fetch("/live/frames", {credentials: "same-origin", cache: "no-store"});
  if (response.status === 401) { location.reload(); return; }  // the page session ended: sign in again
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  setState("live", true);
  const reader = response.body.getReader();
  let buffer = new Uint8Array(0);
  for (;;) {
    for (;;) {
      const end = headEnd(buffer);
      if (end < 0) break;
      const head = new TextDecoder().decode(buffer.subarray(0, end));
      const start = end + 4, length = Number(header(head, "content-length"));
      if (buffer.length < start + length + 2) break;
      const jpeg = buffer.slice(start, start + length);
      buffer = buffer.slice(start + length + 2);
      await show(jpeg, head);
    }
    const {value, done} = await reader.read();
    if (done) throw new Error("the stream ended");
    const grown = new Uint8Array(buffer.length + value.length);
    grown.set(buffer);
    grown.set(value, buffer.length);
    buffer = grown;
  }
}

(async () => {
  for (;;) {
    try { await watch(); } catch (e) { setState("reconnecting: " + e.message, false); }
    await new Promise(resolve => setTimeout(resolve, 1000));
  }
})();
</script>
</body></html>
"""
