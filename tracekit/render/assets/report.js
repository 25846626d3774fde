// report.html's script starts here, after the parts it uses (tables.js, time_axis.js, timeline.js,
// timeline_lanes.js), all inlined in one function by render/html.py: no library, no network.
sortableTables();
Array.prototype.forEach.call(document.querySelectorAll("script.tracekit-timeline"), function (node) {
  var holder = document.getElementById(node.getAttribute("data-target"));
  tracekit.timelines.push(new Timeline(holder, JSON.parse(node.textContent)));
});
tracekit.ready = true;
