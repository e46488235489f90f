"""The one HTML page of ``opbridge serve``: an upload form and the job list, polling the JSON API.
Self-contained (no external scripts, styles or fonts), so it works on a machine without network."""

from __future__ import annotations

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>opbridge serve</title>
<link rel="icon" href="data:,">
<style>
body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}
fieldset{border:1px solid #ccc;padding:1em}label{display:block;margin:.4em 0}
table{border-collapse:collapse;width:100%;margin-top:1em}td,th{border-bottom:1px solid #ddd;padding:.3em;text-align:left}
.done{color:#070}.failed{color:#b00}.running{color:#a60}.queued{color:#666}
</style></head><body>
<h1>opbridge serve</h1>
<form id="f"><fieldset><legend>Convert, compile and validate a model</legend>
<label>Model (.onnx .prototxt .ts.json) <input type="file" name="model" required></label>
<label>Weights (.caffemodel, or the .safetensors of a .ts.json; optional) <input type="file" name="weights"></label>
<label>Plugins (.py, if the server allows them) <input type="file" name="plugin" multiple></label>
<label>Input shape (NAME=1,3,224,224, optional) <input type="text" name="input_shape"></label>
<label>Target <input type="text" name="target" value="bm1684"></label>
<button>Submit</button> <span id="msg"></span></fieldset></form>
<table><thead><tr><th>job</th><th>model</th><th>status</th><th>verdict / error</th><th>artefacts</th><th></th></tr></thead>
<tbody id="jobs"></tbody></table>
<script>
"use strict";
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => "&#" + c.charCodeAt(0) + ";");
document.getElementById("f").addEventListener("submit", async ev => {
  ev.preventDefault();
  const r = await fetch("/api/jobs", {method: "POST", body: new FormData(ev.target)});
  const j = await r.json();
  document.getElementById("msg").textContent = r.ok ? "queued " + j.id : j.error + (j.hint ? " (" + j.hint + ")" : "");
  refresh();
});
async function del(id) { await fetch("/api/jobs/" + id, {method: "DELETE"}); refresh(); }
async function refresh() {
  const r = await fetch("/api/jobs");
  const {jobs} = await r.json();
  document.getElementById("jobs").innerHTML = jobs.map(j => {
    const links = Object.entries(j.links || {}).map(([n, u]) => `<a href="${esc(u)}">${esc(n)}</a>`).join(" ");
    const what = j.status === "failed" ? esc(j.error) : esc(j.summary || j.verdict);
    return `<tr><td>${esc(j.id)}</td><td>${esc(j.model)}</td><td class="${esc(j.status)}">${esc(j.status)}</td>` +
      `<td>${what}</td><td>${links}</td><td><button onclick="del('${esc(j.id)}')">delete</button></td></tr>`;
  }).join("");
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
"""
