// -- tables: a click on a header sorts by its column (first click: largest first) ---------------------------
function sortTable(table, column, header) {
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var descending = header.getAttribute("data-order") !== "desc";
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) { cell.removeAttribute("data-order"); });
  header.setAttribute("data-order", descending ? "desc" : "asc");
  function key(row) {
    var cell = row.cells[column];
    var value = cell.getAttribute("data-value");
    return value === null ? cell.textContent : Number(value);
  }
  rows.sort(function (a, b) {
    var x = key(a), y = key(b), order;
    if (typeof x === "number" && typeof y === "number") {
      order = (isNaN(x) ? -Infinity : x) - (isNaN(y) ? -Infinity : y);
    } else {
      order = String(x).localeCompare(String(y));
    }
    return descending ? -order : order;
  });
  rows.forEach(function (row) { body.appendChild(row); });
}

function sortableTables() {
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      header.addEventListener("click", function () { sortTable(table, column, header); });
    });
  });
}
