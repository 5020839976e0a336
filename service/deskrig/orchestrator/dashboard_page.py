"""The dashboard's page: a table of running sessions and one of ended ones, refreshed from
``/dashboard/sessions`` every second. Text goes in with ``textContent`` only (names and errors come
from clients); a failed refresh says so and keeps the last table."""

DASHBOARD_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>deskrig: sessions</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.2em 2em;color:#222}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;width:100%;table-layout:fixed}th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #ddd}
th{background:#f3f3f3;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.state{font-weight:600}.ready{color:#187a2f}.failed{color:#b00}.starting,.queued,.stopping{color:#a66b00}
.errors{color:#b00;font-size:.92em}#status{color:#666}#status.down{color:#b00}
a{margin-right:.7em}
</style></head><body>
<h1>deskrig sessions</h1><div id="status">loading</div>
<h2>Running <span id="running-count"></span></h2>
<table id="running"><thead><tr><th>Session</th><th>State</th><th>Age</th><th>App</th><th>Turns</th>
<th>Errors</th><th>Open</th></tr></thead><tbody></tbody></table>
<h2>Ended <span id="ended-count"></span></h2>
<table id="ended"><thead><tr><th>Session</th><th>State</th><th>Age</th><th>App</th><th>Turns</th>
<th>Errors</th><th>Open</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
function age(seconds) {
  if (seconds < 60) return Math.floor(seconds) + " s";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.floor(seconds % 60) + " s";
  return Math.floor(seconds / 3600) + " h " + Math.floor(seconds % 3600 / 60) + " min";
}
function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}
function link(td, href, text) {
  if (!href) return;
  const a = document.createElement("a");
  a.href = href; a.textContent = text; a.target = "_blank"; a.rel = "noreferrer noopener";
  td.appendChild(a);
}
function fill(table, sessions) {
  const body = document.createElement("tbody");
  for (const s of sessions) {
    const row = body.insertRow();
    row.dataset.session = s.id;
    cell(row, s.name ? `${s.name} (${s.id})` : s.id);
    cell(row, s.state, "state " + s.state);
    cell(row, age(s.age_seconds), "num");
    cell(row, s.app + (s.backend ? ` [${s.backend}]` : ""));
    cell(row, String(s.turns), "num");
    cell(row, s.errors.join("; "), "errors");
    const open = row.insertCell();
    link(open, s.live, "live screen"); link(open, s.view, "viewer"); link(open, s.artifacts, "artifacts");
  }
  table.replaceChild(body, table.tBodies[0]);
}
async function refresh() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("/dashboard/sessions", {credentials: "same-origin", cache: "no-store"});
    if (response.status === 401) { location.reload(); return; }
    if (!response.ok) throw new Error("HTTP " + response.status);
    const sessions = await response.json();
    const running = sessions.filter(s => s.running), ended = sessions.filter(s => !s.running);
    fill(document.getElementById("running"), running);
    fill(document.getElementById("ended"), ended);
    document.getElementById("running-count").textContent = `(${running.length})`;
    document.getElementById("ended-count").textContent = `(${ended.length})`;
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
  } catch (e) {
    status.textContent = "cannot reach the orchestrator: " + e.message;
    status.className = "down";
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body></html>
"""
