// -- timelines ------------------------------------------------------------------------------------------
// One interactive timeline per trace, drawn with level of detail: when a lane has more rows in view than
// pixels, each pixel column shows how much of its time the lane was busy (its opacity) in the colour of the
// category that took most of it, so a gap thinner than a pixel still lightens that pixel. However many
// lanes a trace has, the canvas holds at most SHOWN of them (a browser paints nothing on a canvas past its
// size limits): a scroll bar beside the lanes (or shift+wheel) moves through the rest, and the line under
// the timeline says which lanes are shown of how many. A host thread's ranges (or CPU ops), with its CUDA
// API calls in a lane below the deepest, are one lane, every depth drawn over the one above it; a click on
// its name opens one lane per depth.
var tracekit = (window.tracekit = { timelines: [] });
var LANE = 18, AXIS = 22, STEPS = 18, LABEL = 150, MEMORY = 48;
var SHOWN = 40, GUTTER = 16, SCROLL_PX = 1000000; // lanes on the canvas; the scroll bar's width and its travel
var NESTED_ALPHA = 0.55; // each depth of a folded host lane over the one above: deeper is darker

function upperBound(values, from, to, x) { // first index in [from, to) with values[i] > x
  while (from < to) {
    var middle = (from + to) >>> 1;
    if (values[middle] <= x) from = middle + 1; else to = middle;
  }
  return from;
}

function columns(data) { // rows by lane then start: lane sizes, and each start as a step from the last
  var count = data.start_step.length, lane = new Int32Array(count), start = new Float64Array(count), row = 0;
  var runs = [];
  for (var l = 0; l < data.lane_counts.length; l++) {
    runs.push([row, row + data.lane_counts[l]]);
    for (var k = 0; k < data.lane_counts[l]; k++, row++) {
      lane[row] = l;
      start[row] = (k === 0 ? 0 : start[row - 1]) + data.start_step[row];
    }
  }
  return {
    lane: lane, start: start, duration: Float64Array.from(data.duration), name: Int32Array.from(data.name),
    category: Int32Array.from(data.category), count: count, runs: runs // runs[lane]: [first, end) of its rows
  };
}

function fitText(context, text, room) { // the text, cut with an ellipsis to fit ``room`` px
  if (context.measureText(text).width <= room) return text;
  var low = 0, high = text.length;
  while (low < high) {
    var middle = (low + high + 1) >>> 1;
    if (context.measureText(text.slice(0, middle) + "…").width <= room) low = middle; else high = middle - 1;
  }
  return text.slice(0, low) + "…";
}

function Timeline(holder, data) {
  this.holder = holder;
  this.data = data;
  var empty = { lane_counts: [], start_step: [], duration: [], name: [], category: [] };
  this.ops = columns(data.ops);
  this.gaps = columns(data.gaps);
  this.ranges = columns(data.ranges); // the phases' ranges (forward, backward, optimizer) on the host
  this.host = columns(data.host || empty); // each host thread's ranges, CPU ops and calls, one lane per depth
  this.opRange = Int32Array.from(data.op_range); // the innermost range the launching thread had open
  this.launches = launchesOf(data, this.ops.count);
  this.expanded = {}; // host groups opened into one lane per depth
  this.first = 0; // the first lane on the canvas
  this.arrange();
  this.gutter = this.lanes > SHOWN ? GUTTER : 0;
  this.steps = { start: Float64Array.from(data.steps.start), duration: Float64Array.from(data.steps.duration) };
  var begin = 0, end = 0; // the GPU ops, the host rows and the steps, which may start before the first op
  [this.ops, this.ranges, this.host].forEach(function (table) {
    for (var i = 0; i < table.count; i++) {
      begin = Math.min(begin, table.start[i]);
      end = Math.max(end, table.start[i] + table.duration[i]);
    }
  });
  for (var j = 0; j < this.steps.start.length; j++) {
    begin = Math.min(begin, this.steps.start[j]);
    end = Math.max(end, this.steps.start[j] + this.steps.duration[j]);
  }
  this.extent = [begin, Math.max(end, begin + 1)];
  this.view = this.extent.slice();
  this.count = data.count;
  this.canvas = document.createElement("canvas");
  this.overlay = document.createElement("canvas"); // the hovered op's launch arrow, over the lanes
  this.overlay.className = "overlay";
  this.tip = document.createElement("div");
  this.tip.className = "tip";
  this.help = document.createElement("div");
  this.help.className = "help";
  var hints = ["wheel: zoom", "drag: pan", "double-click: whole trace"], hover = [];
  if (this.steps.start.length) hints.push("click a step: zoom to it");
  if (this.host.count) hints.push("click a thread's name: one lane per depth");
  if (this.ranges.count) hover.push("a phase");
  if (this.host.count) { // what the host lanes hold: ranges and CPU ops, CUDA API calls
    var held = {};
    for (var k = 0; k < this.host.count; k++) held[data.host_kinds[this.host.category[k]]] = true;
    if (held["range"] || held["CPU op"]) hover.push("a range");
    if (held["CUDA API"]) hover.push("a CUDA API call");
  }
  if (this.ops.count) hover.push("an op", "a gap");
  if (hover.length) hints.push("hover: " + hover.join(", ").replace(/, ([^,]*)$/, " or $1"));
  this.hints = hints.join(" · "); // only what this trace has to zoom to or hover
  holder.appendChild(this.canvas);
  holder.appendChild(this.overlay);
  holder.appendChild(this.tip);
  if (this.gutter) { // a native scroll bar whose position picks the first lane shown
    this.scroller = document.createElement("div");
    this.scroller.className = "lanes-scroll";
    this.scroller.style.cssText = "top:" + (AXIS + STEPS) + "px;height:" + this.shown * LANE + "px;width:" + GUTTER + "px";
    this.travel = document.createElement("div");
    this.travel.style.height = Math.min(SCROLL_PX, this.lanes * LANE) + "px";
    this.scroller.appendChild(this.travel);
    holder.appendChild(this.scroller);
  }
  holder.appendChild(this.help);
  this.pending = false;
  this.listen();
  this.draw();
}

Timeline.prototype.arrange = function () { // the lanes shown, in order: all but the depths of folded groups
  var lanes = this.data.lanes, order = [];
  this.rowOf = new Int32Array(lanes.length).fill(-1); // a lane's place in ``order`` (-1: folded away)
  for (var l = 0; l < lanes.length; l++) {
    if (lanes[l].kind === "host" && lanes[l].depth > 0 && !this.expanded[lanes[l].group]) continue;
    this.rowOf[l] = order.length;
    order.push(l);
  }
  this.order = Int32Array.from(order);
  this.lanes = order.length;
  this.shown = Math.min(this.lanes, SHOWN);
  this.first = Math.max(0, Math.min(this.first, this.lanes - this.shown));
  if (this.travel) this.travel.style.height = Math.min(SCROLL_PX, this.lanes * LANE) + "px";
};

Timeline.prototype.height = function () { return AXIS + STEPS + this.shown * LANE + (this.data.memory ? MEMORY : 0) + 4; };

Timeline.prototype.plotWidth = function () { return this.canvas.clientWidth - this.gutter; };

Timeline.prototype.scrolled = function () { // the scroll bar moved: the lanes it points at
  var room = this.scroller.scrollHeight - this.scroller.clientHeight;
  var first = room > 0 ? Math.round(this.scroller.scrollTop / room * (this.lanes - this.shown)) : 0;
  if (first !== this.first) { this.first = first; this.schedule(); }
};

Timeline.prototype.scrollToLane = function (lane) { // the scroll bar to the position that shows row ``lane`` first
  var first = Math.max(0, Math.min(lane, this.lanes - this.shown));
  if (this.scroller) {
    var room = this.scroller.scrollHeight - this.scroller.clientHeight;
    this.scroller.scrollTop = this.lanes > this.shown ? first / (this.lanes - this.shown) * room : 0;
  }
  this.first = first;
  this.draw();
};

Timeline.prototype.lanesText = function () {
  var all = this.lanes.toLocaleString("en-US");
  if (this.shown === this.lanes) return this.lanes === 1 ? "1 lane" : all + " lanes";
  return "lanes " + (this.first + 1).toLocaleString("en-US") + "–" + (this.first + this.shown).toLocaleString("en-US") +
    " of " + all + " (scroll bar at the right or shift+wheel: more lanes)";
};

Timeline.prototype.drawMemory = function (context, width) { // allocated (filled) and reserved (line), MiB
  var memory = this.data.memory, top = AXIS + STEPS + this.shown * LANE + 4, high = 0;
  for (var i = 0; i < memory.reserved_mib.length; i++) high = Math.max(high, memory.reserved_mib[i], memory.allocated_mib[i]);
  if (!(high > 0)) return;
  var level = function (mib) { return top + MEMORY - 4 - (MEMORY - 8) * mib / high; };
  context.fillStyle = "#333";
  context.fillText("GPU " + memory.device + " · memory", 4, top + 10);
  context.fillText(significant(high) + " MiB", 4, top + 26);
  var self = this;
  function path(values) {
    context.beginPath();
    var started = false;
    for (var j = 0; j < memory.start.length; j++) {
      var x = Math.min(Math.max(self.x(memory.start[j], width), LABEL), width);
      var next = j + 1 < memory.start.length ? Math.min(Math.max(self.x(memory.start[j + 1], width), LABEL), width) : width;
      if (!started) { context.moveTo(x, level(values[j])); started = true; } else { context.lineTo(x, level(values[j])); }
      context.lineTo(next, level(values[j]));
    }
  }
  path(memory.allocated_mib);
  context.lineTo(width, top + MEMORY - 4);
  context.lineTo(LABEL, top + MEMORY - 4);
  context.closePath();
  context.globalAlpha = 0.6;
  context.fillStyle = this.data.marks["memory allocated"];
  context.fill();
  context.globalAlpha = 1;
  path(memory.reserved_mib);
  context.strokeStyle = this.data.marks["memory reserved"];
  context.stroke();
};

Timeline.prototype.x = function (ns, width) { return LABEL + (ns - this.view[0]) * (width - LABEL) / (this.view[1] - this.view[0]); };

Timeline.prototype.timeAt = function (x, width) { return this.view[0] + (x - LABEL) * (this.view[1] - this.view[0]) / (width - LABEL); };

Timeline.prototype.visible = function (table, range) { // [first, end) of a lane's rows overlapping the view
  var first = upperBound(table.start, range[0], range[1], this.view[0]) - 1;
  if (first < range[0] || table.start[first] + table.duration[first] < this.view[0]) first += 1;
  first = Math.max(first, range[0]);
  var end = upperBound(table.start, range[0], range[1], this.view[1]);
  return [first, Math.max(first, end)];
};

Timeline.prototype.visibleOps = function () {
  var total = 0;
  for (var lane = 0; lane < this.ops.runs.length; lane++) {
    var shown = this.visible(this.ops, this.ops.runs[lane]);
    total += shown[1] - shown[0];
  }
  return total;
};

Timeline.prototype.zoomTo = function (start, end) {
  this.view = [Math.max(this.extent[0], start), Math.min(this.extent[1], Math.max(end, start + 1))];
  this.draw();
};

Timeline.prototype.schedule = function () {
  var self = this;
  if (this.pending) return;
  this.pending = true;
  window.requestAnimationFrame(function () { self.pending = false; self.draw(); });
};

Timeline.prototype.drawLane = function (context, table, range, row, width, colours, alpha) {
  var shown = this.visible(table, range), y = AXIS + STEPS + row * LANE + 2;
  var pixels = width - LABEL, n = shown[1] - shown[0];
  if (n > pixels * 2) { // level of detail: busy fraction and main category per pixel column
    var busy = new Float64Array(pixels), best = new Int32Array(pixels).fill(-1), bestTime = new Float64Array(pixels);
    var scale = pixels / (this.view[1] - this.view[0]);
    for (var i = shown[0]; i < shown[1]; i++) {
      var from = (Math.max(table.start[i], this.view[0]) - this.view[0]) * scale;
      var to = (Math.min(table.start[i] + table.duration[i], this.view[1]) - this.view[0]) * scale;
      for (var p = Math.max(0, Math.floor(from)); p < Math.min(pixels, Math.ceil(to)); p++) {
        var covered = Math.min(to, p + 1) - Math.max(from, p);
        if (covered <= 0) continue;
        busy[p] += covered;
        if (covered > bestTime[p]) { bestTime[p] = covered; best[p] = table.category[i]; }
      }
      if (to - from < 1 && Math.floor(from) === Math.floor(to) && from >= 0 && from < pixels) { // a sliver
        var q = Math.floor(from);
        if (best[q] < 0) best[q] = table.category[i];
      }
    }
    for (var column = 0; column < pixels; column++) {
      if (best[column] < 0) continue;
      context.globalAlpha = alpha * Math.max(0.08, Math.min(1, busy[column]));
      context.fillStyle = colours[best[column]] || "#888";
      context.fillRect(LABEL + column, y, 1, LANE - 4);
    }
    context.globalAlpha = 1;
    return;
  }
  context.globalAlpha = alpha;
  for (var k = shown[0]; k < shown[1]; k++) {
    var x0 = this.x(Math.max(table.start[k], this.view[0]), width);
    var x1 = this.x(Math.min(table.start[k] + table.duration[k], this.view[1]), width);
    context.fillStyle = colours[table.category[k]] || "#888";
    context.fillRect(x0, y, Math.max(0.5, x1 - x0), LANE - 4);
  }
  context.globalAlpha = 1;
};

Timeline.prototype.draw = function () {
  var whole = Math.max(400, this.holder.clientWidth), height = this.height(), ratio = window.devicePixelRatio || 1;
  var width = whole - this.gutter; // the scroll bar's strip stays clear
  [this.canvas, this.overlay].forEach(function (canvas) {
    canvas.width = whole * ratio;
    canvas.height = height * ratio;
    canvas.style.height = height + "px";
  });
  this.help.textContent = this.lanesText() + " · " + this.hints;
  var context = this.canvas.getContext("2d");
  if (!context) { // never a blank canvas without a word
    this.help.textContent = "this browser gave no canvas to draw the timeline on (" + this.lanesText() + ")";
    return;
  }
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, whole, height);
  context.font = "11px system-ui, sans-serif";
  context.textBaseline = "middle";
  this.drawAxis(context, width);
  context.fillText("steps", 4, AXIS + STEPS / 2);
  for (var s = 0; s < this.steps.start.length; s++) {
    var left = this.x(Math.max(this.steps.start[s], this.view[0]), width);
    var right = this.x(Math.min(this.steps.start[s] + this.steps.duration[s], this.view[1]), width);
    if (right < LABEL || left > width) continue;
    context.fillStyle = this.data.marks[s % 2 ? "other step" : "step"];
    context.fillRect(Math.max(left, LABEL), AXIS + 2, Math.max(1, right - Math.max(left, LABEL)), STEPS - 4);
    if (right - left > 40) { context.fillStyle = "#08306b"; context.fillText("step #" + (s + 1), Math.max(left, LABEL) + 3, AXIS + STEPS / 2); }
  }
  for (var row = 0; row < this.shown; row++) {
    var lane = this.order[this.first + row], info = this.data.lanes[lane], y = AXIS + STEPS + row * LANE;
    context.fillStyle = "#333";
    context.fillText(fitText(context, this.laneLabel(lane), LABEL - 8), 4, y + LANE / 2);
    var rows = this.rowsOf(info.kind), folded = this.foldedDepths(lane);
    for (var depth = 0; depth < folded; depth++) {
      this.drawLane(context, rows.table, rows.table.runs[lane + depth], row, width, rows.colours, folded > 1 ? NESTED_ALPHA : 1);
    }
  }
  if (this.data.memory) this.drawMemory(context, width);
  context.fillStyle = "#ddd";
  context.fillRect(LABEL - 1, 0, 1, height);
  this.drawArrow();
};

Timeline.prototype.drawAxis = function (context, width) { // ticks and their labels, every label inside the view
  var axis = axisTicks(this.view), placed = [], end = -Infinity;
  context.fillStyle = "#666";
  if (axis.base) context.fillText(fitText(context, axis.base, LABEL - 8), 4, AXIS / 2);
  for (var t = 0; t < axis.ticks.length; t++) {
    var x = this.x(axis.ticks[t].at, width), text = axis.ticks[t].text, size = context.measureText(text).width;
    context.fillRect(x, AXIS - 6, 1, 6);
    var left = Math.max(LABEL + 2, Math.min(x + 2, width - size - 2)); // the last one ends at the edge
    if (left < end + 6) continue; // no label over another
    context.fillText(text, left, AXIS / 2);
    placed.push({ text: text, left: left, right: left + size });
    end = left + size;
  }
  this.axisLabels = { base: axis.base, ticks: placed }; // what the axis says, for a reader or a test
};

Timeline.prototype.rowsOf = function (kind) { // a lane kind's rows and colours
  if (kind === "gaps") return { table: this.gaps, colours: this.data.cause_colours };
  if (kind === "ranges") return { table: this.ranges, colours: this.data.phase_colours };
  if (kind === "host") return { table: this.host, colours: this.data.host_colours };
  return { table: this.ops, colours: this.data.colours };
};
