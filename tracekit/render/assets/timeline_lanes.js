// -- host lanes, hover, launch arrows ------------------------------------------------------------------
function launchesOf(data, count) { // per op: its launching thread (-1: none recorded) and how long before it
  var launch = data.launch || { thread_runs: [count, -1], lead: [] }, thread = new Int32Array(count), row = 0;
  for (var r = 0; r + 1 < launch.thread_runs.length; r += 2) { // runs of [count, thread] in the ops' order
    thread.fill(launch.thread_runs[r + 1], row, row + launch.thread_runs[r]);
    row += launch.thread_runs[r];
  }
  return { thread: thread, lead: launch.lead.length ? Float64Array.from(launch.lead) : new Float64Array(count) };
}

Timeline.prototype.foldedDepths = function (lane) { // how many depth lanes a lane draws in its one row
  var info = this.data.lanes[lane];
  return info.kind === "host" && info.depth === 0 && !this.expanded[info.group] ? info.depths : 1;
};

Timeline.prototype.laneLabel = function (lane) {
  var info = this.data.lanes[lane];
  if (info.kind !== "host" || info.depths < 2 && info.depth === 0) return info.name;
  if (info.depth > 0) return info.calls ? "  CUDA API" : "  depth " + info.depth;
  return (this.expanded[info.group] ? "▾ " : "▸ ") + info.name;
};

Timeline.prototype.toggle = function (lane) { // a host thread's lane: fold its depths into it, or open them
  var info = this.data.lanes[lane];
  if (info.kind !== "host" || info.depths < 2) return false;
  this.expanded[info.group] = !this.expanded[info.group];
  this.arrange();
  this.schedule();
  return true;
};

Timeline.prototype.find = function (px, py) { // the op, gap or range under the pointer, or null
  var width = this.plotWidth(), row = Math.floor((py - AXIS - STEPS) / LANE);
  if (row < 0 || row >= this.shown || px < LABEL || px > width) return null;
  var lane = this.order[this.first + row], kind = this.data.lanes[lane].kind, table = this.rowsOf(kind).table;
  var time = this.timeAt(px, width), slack = (this.view[1] - this.view[0]) / (width - LABEL); // one pixel
  for (var depth = this.foldedDepths(lane) - 1; depth >= 0; depth--) { // the innermost range first
    var range = table.runs[lane + depth], i = upperBound(table.start, range[0], range[1], time + slack) - 1;
    if (i >= range[0] && table.start[i] + table.duration[i] >= time - slack) {
      return { lane: lane + depth, index: i, kind: kind, table: table, gaps: kind === "gaps", ranges: kind === "ranges" };
    }
  }
  return null;
};

Timeline.prototype.enclosing = function (lane, index) { // the names of the host ranges around a row, outermost first
  var info = this.data.lanes[lane], t = this.host, names = [], time = t.start[index];
  for (var depth = 0; depth < info.depth; depth++) {
    var range = t.runs[lane - info.depth + depth], i = upperBound(t.start, range[0], range[1], time) - 1;
    if (i >= range[0] && t.start[i] + t.duration[i] >= time) names.push(this.data.host_names[t.name[i]]);
  }
  return names;
};

Timeline.prototype.describe = function (hit) {
  var t = hit.table, i = hit.index, lane = this.data.lanes[hit.lane], when = formatTime(t.duration[i]) + " at " + formatTime(t.start[i]);
  if (hit.gaps) return "idle: " + this.data.causes[t.name[i]] + "\n" + when + "\n" + lane.name;
  if (hit.ranges) { // the phase, and the range that is it where its name differs ("forward pass")
    var phase = this.data.phases[t.category[i]], name = this.data.phase_names[t.name[i]];
    return phase + (name !== phase ? " (range " + name + ")" : "") + "\n" + when + "\n" + lane.name;
  }
  if (hit.kind === "host") {
    var inside = this.enclosing(hit.lane, i);
    return this.data.host_names[t.name[i]] + "\n" + when + "\n" + this.data.host_kinds[t.category[i]] + " · " +
      this.data.lanes[hit.lane - lane.depth].name + (lane.calls ? "" : " · depth " + lane.depth) +
      (inside.length ? "\ninside: " + inside.join(" › ") : "");
  }
  var range = this.opRange[i], launched = range >= 0 ? "\nlaunched in: " + this.data.range_names[range] : "";
  var thread = this.launches.thread[i], by = "";
  if (thread >= 0) {
    by = "\nlaunched " + formatTime(this.launches.lead[i]) + " before, by " + this.data.threads[thread].name;
  }
  return this.data.names[t.name[i]] + "\n" + when + "\n" + lane.name + " · " + this.data.categories[t.category[i]] + by + launched;
};

Timeline.prototype.shownRow = function (lane) { // where a lane is drawn: its own row, or its folded group's
  if (lane < 0) return -1;
  var info = this.data.lanes[lane];
  return this.rowOf[lane] >= 0 ? this.rowOf[lane] : this.rowOf[lane - info.depth];
};

Timeline.prototype.drawArrow = function () { // the hovered op's launch: from its call on the host to the op
  var context = this.overlay.getContext("2d"), hit = this.hovered, ratio = window.devicePixelRatio || 1;
  if (!context) return;
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, this.overlay.width, this.overlay.height);
  this.arrow = null;
  if (!hit || hit.kind !== "ops" || this.launches.thread[hit.index] < 0) return;
  var width = this.plotWidth(), top = AXIS + STEPS, bottom = top + this.shown * LANE;
  var thread = this.data.threads[this.launches.thread[hit.index]], start = this.ops.start[hit.index];
  var from = this.shownRow(thread.lane) - this.first, to = this.rowOf[hit.lane] - this.first;
  // a lane scrolled out of the canvas: the arrow starts at the edge it lies beyond
  var y0 = thread.lane < 0 ? top : from < 0 ? top : from >= this.shown ? bottom : top + from * LANE + LANE / 2;
  var y1 = top + to * LANE + LANE / 2;
  var x0 = Math.max(LABEL, Math.min(width, this.x(start - this.launches.lead[hit.index], width)));
  var x1 = Math.max(LABEL, Math.min(width, this.x(start, width)));
  context.strokeStyle = context.fillStyle = this.data.marks["launch arrow"];
  context.lineWidth = 1.5;
  context.beginPath();
  context.moveTo(x0, y0);
  context.lineTo(x1, y1);
  context.stroke();
  var angle = Math.atan2(y1 - y0, x1 - x0);
  context.beginPath();
  context.moveTo(x1, y1);
  context.lineTo(x1 - 8 * Math.cos(angle - 0.4), y1 - 8 * Math.sin(angle - 0.4));
  context.lineTo(x1 - 8 * Math.cos(angle + 0.4), y1 - 8 * Math.sin(angle + 0.4));
  context.fill();
  this.arrow = { from: [x0, y0], to: [x1, y1] };
};

Timeline.prototype.showTip = function (text, px, py) { // beside the pointer, always inside the view
  var tip = this.tip, room = this.holder.clientWidth, box = this.holder.getBoundingClientRect();
  tip.textContent = text;
  tip.style.display = "block";
  tip.style.maxWidth = Math.min(600, room - 8) + "px";
  var left = px + 12 > room - tip.offsetWidth - 4 ? px - 12 - tip.offsetWidth : px + 12;
  tip.style.left = Math.max(4 - box.left, Math.min(left, room - tip.offsetWidth - 4)) + "px";
  var below = py + 14, viewBottom = window.innerHeight - box.top; // the window's bottom, in the holder's pixels
  tip.style.top = (below + tip.offsetHeight > viewBottom ? Math.max(-box.top, py - 8 - tip.offsetHeight) : below) + "px";
};

Timeline.prototype.hover = function (px, py) {
  var hit = this.find(px, py), before = this.hovered;
  this.hovered = hit;
  if (hit || before) this.drawArrow();
  if (!hit) { this.tip.style.display = "none"; return; }
  this.showTip(this.describe(hit), px, py);
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
    self.hover(event.offsetX, event.offsetY);
  });
  this.canvas.addEventListener("mouseleave", function () { self.hovered = null; self.drawArrow(); self.tip.style.display = "none"; });
  this.canvas.addEventListener("dblclick", function () { self.zoomTo(self.extent[0], self.extent[1]); });
  this.canvas.addEventListener("click", function (event) {
    var row = Math.floor((event.offsetY - AXIS - STEPS) / LANE);
    if (event.offsetX < LABEL && row >= 0 && row < self.shown) { self.toggle(self.order[self.first + row]); return; }
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
