// opbridge HTML report: sortable and filterable tables, diagram colouring. No dependencies.
"use strict";
(function () {
  function cellKey(row, col, numeric) {
    var cell = row.cells[col];
    if (!numeric) return cell.textContent.toLowerCase();
    var v = cell.getAttribute("data-v");
    return v === null || v === "" ? NaN : parseFloat(v);
  }

  function sortBy(table, th) {
    var col = th.cellIndex, numeric = th.getAttribute("data-sort") === "num";
    var asc = !th.classList.contains("asc");
    table.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
    th.classList.add(asc ? "asc" : "desc");
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellKey(a, col, numeric), y = cellKey(b, col, numeric);
      if (numeric) {  // blanks (NaN) last either way
        if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y);
        return asc ? x - y : y - x;
      }
      return asc ? x.localeCompare(y) : y.localeCompare(x);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.addEventListener("click", function () { sortBy(table, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(table, th); });
    });
  });

  var table = document.getElementById("layer-table");
  var box = document.getElementById("filter");
  var onlyFailed = document.getElementById("only-failed");
  var count = document.getElementById("row-count");

  function applyFilter() {
    if (!table) return;
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean), shown = 0;
    var rows = table.tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      var text = rows[i].textContent.toLowerCase();
      var ok = words.every(function (w) { return text.indexOf(w) >= 0; });
      if (onlyFailed.checked && !rows[i].classList.contains("fail")) ok = false;
      rows[i].style.display = ok ? "" : "none";
      if (ok) shown++;
    }
    count.textContent = shown + " of " + rows.length + " rows";
  }
  if (table) {
    box.addEventListener("input", applyFilter);
    onlyFailed.addEventListener("change", applyFilter);
    applyFilter();
  }

  var graphBox = document.getElementById("graph-box");
  document.querySelectorAll('input[name="colour"]').forEach(function (radio) {
    radio.addEventListener("change", function () {
      graphBox.classList.toggle("by-unit", radio.value === "unit");
      graphBox.classList.toggle("by-status", radio.value === "status");
    });
  });
  document.querySelectorAll("svg.diagram .node").forEach(function (node) {
    node.addEventListener("click", function () {
      document.querySelectorAll("svg.diagram .node.picked").forEach(function (n) { n.classList.remove("picked"); });
      node.classList.add("picked");
      if (!table) return;
      box.value = node.getAttribute("data-node");
      applyFilter();
      table.scrollIntoView({ behavior: "smooth", block: "start" });
    });
  });
})();
