// Times as the timeline writes them: one unit per axis, picked for the zoom, at most four significant digits
// a label; where the view lies so far from the trace's start that a tick would need more digits, the ticks
// count from the view's first tick (``+2 us``) and the axis says where that is once, at its left.
var UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "us"], [1, "ns"]];
var DIGITS = 4; // significant digits of a time in a tick or a tooltip

function unitOf(ns) { // the largest unit that keeps |ns| at 1 or more
  var magnitude = Math.abs(ns);
  return UNITS.find(function (u) { return magnitude >= u[0]; }) || UNITS[UNITS.length - 1];
}

function significant(value) { // at most DIGITS significant digits, no trailing zeros: 646, 1.235, 0.5
  if (value === 0 || !isFinite(value)) return "0";
  var text = value.toPrecision(DIGITS);
  if (text.indexOf("e") >= 0) text = String(Number(text)); // 12,340 s is "12340", not "1.234e+4"
  return text.indexOf(".") >= 0 && text.indexOf("e") < 0 ? text.replace(/\.?0+$/, "") : text;
}

function formatTime(ns) { // a duration or a moment in a tooltip: "646 us", "1.235 ms", "500 ms"
  var unit = unitOf(ns);
  return significant(ns / unit[0]) + " " + unit[1];
}

function axisTicks(view) { // about eight ticks at round times: [{at, text}], and the base they count from
  var span = view[1] - view[0], step = Math.pow(10, Math.floor(Math.log10(span / 8)));
  if (span / step > 16) step *= 5; else if (span / step > 8) step *= 2;
  var lastDigit = Math.pow(10, Math.floor(Math.log10(step) + 1e-9)); // the place of a tick's last digit
  var largest = Math.max(Math.abs(view[0]), Math.abs(view[1]));
  var relative = largest / lastDigit >= Math.pow(10, DIGITS); // 10 us at 270 ms: "+2 us" from "270.123 ms"
  var unit = unitOf(relative ? span : largest), first = Math.ceil(view[0] / step) * step, ticks = [];
  var decimals = Math.max(0, Math.ceil(-Math.log10(step / unit[0]) - 1e-9)); // 0.5 s: 1; 0.005 s: 3; 20 us: 0
  var base = relative ? first : 0;
  for (var at = first; at <= view[1] + step * 1e-9; at += step) {
    var value = (at - base) / unit[0];
    ticks.push({ at: at, text: (relative && at > base ? "+" : "") + value.toFixed(decimals) + " " + unit[1] });
  }
  var baseText = null;
  if (relative) { // where "+0" is: in its own unit, to the step's last digit
    var own = unitOf(base), places = Math.max(0, Math.ceil(Math.log10(own[0] / lastDigit) - 1e-9));
    baseText = "from " + (base / own[0]).toFixed(places) + " " + own[1];
  }
  return { ticks: ticks, base: baseText };
}
