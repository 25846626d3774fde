// report.html's script, inlined in the page: sortable tables and one interactive timeline per trace.
// No library, no network. The timeline draws with level of detail: when a lane has more ops in view than
// pixels, each pixel column shows how much of its time the lane was busy (its opacity) in the colour of
// the category that took most of it, so a gap thinner than a pixel still lightens that pixel. However many
// lanes a trace has, the canvas holds at most SHOWN of them (a browser paints nothing on a canvas past its
// size limits): a scroll bar beside the lanes (or shift+wheel) moves through the rest, and the line under
// the timeline says which lanes are shown of how many.
(function () {
  "use strict";
  var tracekit = (window.tracekit = { timelines: [] });

  // -- tables ---------------------------------------------------------------------------------------
  function sortTable(table, column, header) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = header.getAttribute("data-order") !== "desc"; // first click: largest first
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
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      header.addEventListener("click", function () { sortTable(table, column, header); });
    });
  });

  // -- timelines ------------------------------------------------------------------------------------
  var LANE = 18, AXIS = 22, STEPS = 18, LABEL = 150, MEMORY = 48;
  var SHOWN = 40, GUTTER = 16, SCROLL_PX = 1000000; // lanes on the canvas; the scroll bar's width and its travel

  function upperBound(values, from, to, x) { // first index in [from, to) with values[i] > x
    while (from < to) {
      var middle = (from + to) >>> 1;
      if (values[middle] <= x) from = middle + 1; else to = middle;
    }
    return from;
  }

  function columns(data) { // rows by lane then start: lane sizes, and each start as a step from the last
    var count = data.start_step.length, lane = new Int32Array(count), start = new Float64Array(count), row = 0;
    for (var l = 0; l < data.lane_counts.length; l++) {
      for (var k = 0; k < data.lane_counts[l]; k++, row++) {
        lane[row] = l;
        start[row] = (k === 0 ? 0 : start[row - 1]) + data.start_step[row];
      }
    }
    return {
      lane: lane, start: start, duration: Float64Array.from(data.duration), name: Int32Array.from(data.name),
      category: Int32Array.from(data.category), count: count
    };
  }

  function laneRanges(table, lanes) { // ops are sorted by lane, then start: each lane is one run
    var first = new Int32Array(lanes + 1).fill(-1), last = new Int32Array(lanes + 1);
    for (var i = 0; i < table.count; i++) {
      var lane = table.lane[i];
      if (first[lane] < 0) first[lane] = i;
      last[lane] = i + 1;
    }
    var ranges = [];
    for (var l = 0; l < lanes; l++) ranges.push(first[l] < 0 ? [0, 0] : [first[l], last[l]]);
    return ranges;
  }

  var UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "us"], [1, "ns"]];

  function axisTime(view, step) { // the axis's labels: one unit (its largest time's), the decimals its step needs
    var largest = Math.max(Math.abs(view[0]), Math.abs(view[1]));
    var unit = UNITS.find(function (u) { return largest >= u[0]; }) || UNITS[UNITS.length - 1];
    var decimals = Math.max(0, Math.ceil(-Math.log10(step / unit[0]) - 1e-9)); // 0.5 s: 1; 0.005 s: 3; 20 us: 0
    return function (ns) { return (ns / unit[0]).toFixed(decimals) + " " + unit[1]; };
  }

  function formatTime(ns) { // a duration or a moment in a tooltip: to the ns of its unit
    var magnitude = Math.abs(ns);
    if (magnitude >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (magnitude >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (magnitude >= 1e3) return (ns / 1e3).toFixed(3) + " us";
    return ns.toFixed(0) + " ns";
  }

  function Timeline(holder, data) {
    this.holder = holder;
    this.data = data;
    this.ops = columns(data.ops);
    this.gaps = columns(data.gaps);
    this.ranges = columns(data.ranges); // the phases' ranges (forward, backward, optimizer) on the host
    this.opRange = Int32Array.from(data.op_range); // the innermost range the launching thread had open
    this.lanes = data.lanes.length;
    this.shown = Math.min(this.lanes, SHOWN);
    this.first = 0; // the first lane on the canvas
    this.gutter = this.lanes > this.shown ? GUTTER : 0;
    this.opRanges = laneRanges(this.ops, this.lanes);
    this.gapRanges = laneRanges(this.gaps, this.lanes);
    this.rangeRanges = laneRanges(this.ranges, this.lanes);
    this.steps = { start: Float64Array.from(data.steps.start), duration: Float64Array.from(data.steps.duration) };
    var begin = 0, end = 0; // the GPU ops, the phases and the steps, which may start before the first op
    for (var i = 0; i < this.ops.count; i++) end = Math.max(end, this.ops.start[i] + this.ops.duration[i]);
    for (var r = 0; r < this.ranges.count; r++) {
      begin = Math.min(begin, this.ranges.start[r]);
      end = Math.max(end, this.ranges.start[r] + this.ranges.duration[r]);
    }
    for (var j = 0; j < this.steps.start.length; j++) {
      begin = Math.min(begin, this.steps.start[j]);
      end = Math.max(end, this.steps.start[j] + this.steps.duration[j]);
    }
    this.extent = [begin, Math.max(end, begin + 1)];
    this.view = this.extent.slice();
    this.count = data.count;
    this.canvas = document.createElement("canvas");
    this.tip = document.createElement("div");
    this.tip.className = "tip";
    this.help = document.createElement("div");
    this.help.className = "help";
    var hints = ["wheel: zoom", "drag: pan", "double-click: whole trace"], hover = [];
    if (this.steps.start.length) hints.push("click a step: zoom to it");
    if (this.ranges.count) hover.push("a phase");
    if (this.ops.count) hover.push("an op", "a gap");
    if (hover.length) hints.push("hover: " + hover.join(", ").replace(/, ([^,]*)$/, " or $1"));
    this.hints = hints.join(" · "); // only what this trace has to zoom to or hover
    holder.appendChild(this.canvas);
    holder.appendChild(this.tip);
    if (this.gutter) { // a native scroll bar whose position picks the first lane shown
      this.scroller = document.createElement("div");
      this.scroller.className = "lanes-scroll";
      this.scroller.style.cssText = "top:" + (AXIS + STEPS) + "px;height:" + this.shown * LANE + "px;width:" + GUTTER + "px";
      var travel = document.createElement("div");
      travel.style.height = Math.min(SCROLL_PX, this.lanes * LANE) + "px";
      this.scroller.appendChild(travel);
      holder.appendChild(this.scroller);
    }
    holder.appendChild(this.help);
    this.pending = false;
    this.listen();
    this.draw();
  }

  Timeline.prototype.height = function () { return AXIS + STEPS + this.shown * LANE + (this.data.memory ? MEMORY : 0) + 4; };

  Timeline.prototype.plotWidth = function () { return this.canvas.clientWidth - this.gutter; };

  Timeline.prototype.scrolled = function () { // the scroll bar moved: the lanes it points at
    var room = this.scroller.scrollHeight - this.scroller.clientHeight;
    var first = room > 0 ? Math.round(this.scroller.scrollTop / room * (this.lanes - this.shown)) : 0;
    if (first !== this.first) { this.first = first; this.schedule(); }
  };

  Timeline.prototype.scrollToLane = function (lane) { // the scroll bar to the position that shows ``lane`` first
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
    context.fillText(high.toFixed(0) + " MiB", 4, top + 26);
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
    context.fillStyle = "rgba(218, 139, 195, 0.6)";
    context.fill();
    path(memory.reserved_mib);
    context.strokeStyle = "#555";
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
    for (var lane = 0; lane < this.lanes; lane++) {
      var shown = this.visible(this.ops, this.opRanges[lane]);
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

  Timeline.prototype.drawLane = function (context, table, range, lane, width, colours) {
    var shown = this.visible(table, range), y = AXIS + STEPS + (lane - this.first) * LANE + 2;
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
        context.globalAlpha = Math.max(0.08, Math.min(1, busy[column]));
        context.fillStyle = colours[best[column]] || "#888";
        context.fillRect(LABEL + column, y, 1, LANE - 4);
      }
      context.globalAlpha = 1;
      return;
    }
    for (var k = shown[0]; k < shown[1]; k++) {
      var x0 = this.x(Math.max(table.start[k], this.view[0]), width);
      var x1 = this.x(Math.min(table.start[k] + table.duration[k], this.view[1]), width);
      context.fillStyle = colours[table.category[k]] || "#888";
      context.fillRect(x0, y, Math.max(0.5, x1 - x0), LANE - 4);
    }
  };

  Timeline.prototype.draw = function () {
    var whole = Math.max(400, this.holder.clientWidth), height = this.height(), ratio = window.devicePixelRatio || 1;
    var width = whole - this.gutter; // the scroll bar's strip stays clear
    this.canvas.width = whole * ratio;
    this.canvas.height = height * ratio;
    this.canvas.style.height = height + "px";
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
    // axis: about eight ticks at round times
    var span = this.view[1] - this.view[0], step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
    context.fillStyle = "#666";
    var tickLabel = axisTime(this.view, step);
    for (var tick = Math.ceil(this.view[0] / step) * step; tick <= this.view[1]; tick += step) {
      var x = this.x(tick, width), label = tickLabel(tick);
      context.fillRect(x, AXIS - 6, 1, 6);
      // right of its tick; the last one, where that runs past the edge, ends at the edge instead
      context.fillText(label, Math.min(x + 2, width - context.measureText(label).width - 2), AXIS / 2);
    }
    // steps
    context.fillText("steps", 4, AXIS + STEPS / 2);
    for (var s = 0; s < this.steps.start.length; s++) {
      var left = this.x(Math.max(this.steps.start[s], this.view[0]), width);
      var right = this.x(Math.min(this.steps.start[s] + this.steps.duration[s], this.view[1]), width);
      if (right < LABEL || left > width) continue;
      context.fillStyle = s % 2 ? "#9ecae1" : "#6baed6";
      context.fillRect(Math.max(left, LABEL), AXIS + 2, Math.max(1, right - Math.max(left, LABEL)), STEPS - 4);
      if (right - left > 40) { context.fillStyle = "#08306b"; context.fillText("step #" + (s + 1), Math.max(left, LABEL) + 3, AXIS + STEPS / 2); }
    }
    for (var lane = this.first; lane < this.first + this.shown; lane++) {
      var info = this.data.lanes[lane], y = AXIS + STEPS + (lane - this.first) * LANE;
      context.fillStyle = "#333";
      context.fillText(info.name, 4, y + LANE / 2);
      var rows = this.rowsOf(info.kind);
      this.drawLane(context, rows.table, rows.lanes[lane], lane, width, rows.colours);
    }
    if (this.data.memory) this.drawMemory(context, width);
    context.fillStyle = "#ddd";
    context.fillRect(LABEL - 1, 0, 1, height);
  };

  Timeline.prototype.rowsOf = function (kind) { // a lane kind's rows, where each lane's run of them is, colours
    if (kind === "gaps") return { table: this.gaps, lanes: this.gapRanges, colours: this.data.cause_colours };
    if (kind === "ranges") return { table: this.ranges, lanes: this.rangeRanges, colours: this.data.phase_colours };
    return { table: this.ops, lanes: this.opRanges, colours: this.data.colours };
  };

  Timeline.prototype.find = function (px, py) { // the op, gap or phase under the pointer, or null
    var width = this.plotWidth(), row = Math.floor((py - AXIS - STEPS) / LANE), lane = this.first + row;
    if (row < 0 || row >= this.shown || px < LABEL || px > width) return null;
    var kind = this.data.lanes[lane].kind, rows = this.rowsOf(kind), gaps = kind === "gaps", table = rows.table;
    var range = rows.lanes[lane];
    var time = this.timeAt(px, width), slack = (this.view[1] - this.view[0]) / (width - LABEL); // one pixel
    var i = upperBound(table.start, range[0], range[1], time + slack) - 1;
    if (i < range[0] || table.start[i] + table.duration[i] < time - slack) return null;
    return { lane: lane, index: i, gaps: gaps, ranges: kind === "ranges", table: table };
  };

  Timeline.prototype.describe = function (hit) {
    var t = hit.table, i = hit.index, lane = this.data.lanes[hit.lane];
    if (hit.gaps) {
      return "idle: " + this.data.causes[t.name[i]] + "\n" + formatTime(t.duration[i]) + " at " + formatTime(t.start[i]) + "\n" + lane.name;
    }
    if (hit.ranges) { // the phase, and the range that is it where its name differs ("forward pass")
      var phase = this.data.phases[t.category[i]], name = this.data.phase_names[t.name[i]];
      return phase + (name !== phase ? " (range " + name + ")" : "") + "\n" + formatTime(t.duration[i]) + " at " +
        formatTime(t.start[i]) + "\n" + lane.name;
    }
    var range = this.opRange[i], launched = range >= 0 ? "\nlaunched in: " + this.data.range_names[range] : "";
    return this.data.names[t.name[i]] + "\n" + formatTime(t.duration[i]) + " at " + formatTime(t.start[i]) +
      "\n" + lane.name + " · " + this.data.categories[t.category[i]] + launched;
  };

  Timeline.prototype.listen = function () {
    var self = this, dragging = null;
    this.canvas.addEventListener("wheel", function (event) {
      event.preventDefault();
      if (event.shiftKey && self.scroller) { // shift+wheel: through the lanes
        self.scroller.scrollTop += (event.deltaY || event.deltaX) * self.scroller.scrollHeight / (self.lanes * LANE);
        return;
      }
      var width = self.plotWidth(), at = self.timeAt(Math.max(event.offsetX, LABEL), width);
      var factor = event.deltaY > 0 ? 1.25 : 0.8, span = (self.view[1] - self.view[0]) * factor;
      var share = (at - self.view[0]) / (self.view[1] - self.view[0]);
      var start = Math.max(self.extent[0], at - span * share);
      self.view = [start, Math.min(self.extent[1], Math.max(start + span, start + 1))];
      self.schedule();
    }, { passive: false });
    this.canvas.addEventListener("mousedown", function (event) { dragging = { x: event.clientX, view: self.view.slice() }; });
    window.addEventListener("mouseup", function () { dragging = null; });
    this.canvas.addEventListener("mousemove", function (event) {
      if (dragging) {
        var width = self.plotWidth(), span = dragging.view[1] - dragging.view[0];
        var shift = (dragging.x - event.clientX) * span / (width - LABEL);
        var start = Math.min(Math.max(self.extent[0], dragging.view[0] + shift), self.extent[1] - span);
        self.view = [start, start + span];
        self.schedule();
        return;
      }
      var hit = self.find(event.offsetX, event.offsetY);
      if (!hit) { self.tip.style.display = "none"; return; }
      self.tip.textContent = self.describe(hit);
      self.tip.style.display = "block";
      self.tip.style.left = Math.min(event.offsetX + 12, self.canvas.clientWidth - 300) + "px";
      self.tip.style.top = (event.offsetY + 14) + "px";
    });
    this.canvas.addEventListener("mouseleave", function () { self.tip.style.display = "none"; });
    this.canvas.addEventListener("dblclick", function () { self.zoomTo(self.extent[0], self.extent[1]); });
    this.canvas.addEventListener("click", function (event) {
      if (event.offsetY < AXIS || event.offsetY > AXIS + STEPS) return;
      var time = self.timeAt(event.offsetX, self.plotWidth());
      for (var s = 0; s < self.steps.start.length; s++) {
        if (time >= self.steps.start[s] && time <= self.steps.start[s] + self.steps.duration[s]) {
          self.zoomTo(self.steps.start[s], self.steps.start[s] + self.steps.duration[s]);
          return;
        }
      }
    });
    window.addEventListener("resize", function () { self.schedule(); });
    if (this.scroller) this.scroller.addEventListener("scroll", function () { self.scrolled(); });
  };

  Array.prototype.forEach.call(document.querySelectorAll("script.tracekit-timeline"), function (node) {
    var holder = document.getElementById(node.getAttribute("data-target"));
    tracekit.timelines.push(new Timeline(holder, JSON.parse(node.textContent)));
  });
  tracekit.ready = true;
})();
