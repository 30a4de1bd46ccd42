// Renderers of ddpdemo.interactive: plain JavaScript, no library, no
// network. Each figure's HTML carries the "common" part and the part of
// its kind (the sections below are cut at the "//# name" lines); the data
// comes from the figure's own <script type="application/json"> blocks.
// Text reaches the page through textContent only, never innerHTML.

//# common
(function (root, draw) {
  if (!root || root.getAttribute("data-ready")) return;
  root.setAttribute("data-ready", "1");
  var block = root.querySelector("script[data-figure]");
  var timed = root.querySelector("script[data-timings]");
  var NS = "http://www.w3.org/2000/svg";
  var live = root.querySelector("[aria-live]");
  var f = {
    root: root,
    data: JSON.parse(block.textContent),
    times: timed ? JSON.parse(timed.textContent) : null,
    svg: root.querySelector("svg"),
    say: function (text) { live.textContent = text; },
    el: function (tag, attrs, parent, text) {
      var e = document.createElementNS(NS, tag);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      if (text !== undefined) e.textContent = text;
      (parent || f.svg).appendChild(e);
      return e;
    },
    // Hover and keyboard focus both describe the element, aloud too.
    describe: function (e, text) {
      e.setAttribute("tabindex", "0");
      e.setAttribute("aria-label", text);
      e.setAttribute("data-say", text);
      hook(e);
    },
    fmt: function (v) { return v.toFixed(v < 1 ? 3 : 2); }
  };
  function hook(e) {
    function on() {
      var old = root.querySelectorAll(".ddp-on");
      for (var i = 0; i < old.length; i++) old[i].classList.remove("ddp-on");
      e.classList.add("ddp-on");
      f.say(e.getAttribute("data-say"));
    }
    e.addEventListener("mouseenter", on);
    e.addEventListener("focus", on);
  }
  var said = root.querySelectorAll("[data-say]");   // drawn by Python
  for (var i = 0; i < said.length; i++) hook(said[i]);
  if (draw) draw(f);
})

//# ring
(function (f) {
  var d = f.data, n = d.n, cx = 280, cy = 185, R = 135, bw = 30, bh = 24;
  var slider = f.root.querySelector("input[type=range]");
  var play = f.root.querySelector("button");
  var step = f.root.querySelector(".ddp-step");
  var pos = [], boxes = [], arrows = [], timer = null;
  for (var r = 0; r < n; r++) {
    var a = -Math.PI / 2 + 2 * Math.PI * r / n;
    pos.push([cx + R * Math.cos(a), cy + R * Math.sin(a)]);
  }
  var marker = f.el("marker", {id: f.root.id + "-arrow", viewBox: "0 0 10 10",
    refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto"},
    f.el("defs", {}));
  f.el("path", {d: "M0,0L10,5L0,10z"}, marker);
  for (r = 0; r < n; r++) {                       // rank r -> rank r + 1
    var p = pos[r], q = pos[(r + 1) % n], dx = q[0] - p[0], dy = q[1] - p[1];
    var len = Math.sqrt(dx * dx + dy * dy), ux = dx / len, uy = dy / len;
    var cut = Math.min(70, len / 3);
    f.el("line", {x1: p[0] + ux * cut, y1: p[1] + uy * cut,
      x2: q[0] - ux * cut, y2: q[1] - uy * cut, stroke: "#555",
      "stroke-width": 1.5, "marker-end": "url(#" + f.root.id + "-arrow)"});
    var mx = (p[0] + q[0]) / 2, my = (p[1] + q[1]) / 2;
    var ox = mx - cx, oy = my - cy, ol = Math.sqrt(ox * ox + oy * oy) || 1;
    arrows.push(f.el("text", {x: mx + 22 * ox / ol, y: my + 22 * oy / ol,
      "text-anchor": "middle", "dominant-baseline": "middle",
      "font-size": 12}, null, ""));
  }
  for (r = 0; r < n; r++) {
    var x0 = pos[r][0] - n * bw / 2, y0 = pos[r][1] - bh / 2, row = [];
    f.el("text", {x: pos[r][0], y: y0 - 7, "text-anchor": "middle",
      fill: d.colors[r], "font-size": 13}, null, "rank " + r);
    for (var c = 0; c < n; c++) {
      var g = f.el("g", {});
      row.push([f.el("rect", {x: x0 + c * bw + 1, y: y0, width: bw - 2,
        height: bh, rx: 3}, g), f.el("text", {x: x0 + c * bw + bw / 2,
        y: y0 + bh / 2, "text-anchor": "middle", "dominant-baseline":
        "middle", "font-size": 10}, g, "")]);
    }
    boxes.push(row);
  }
  f.el("text", {x: cx, y: 362, "text-anchor": "middle", "font-size": 11,
    fill: "#444"}, null, "outlined: the chunk a rank sends; bold: the " +
    "chunk it just received; filled: holds the final sum");
  function show(s) {
    for (var r = 0; r < n; r++) {
      var sent = d.sent[s][r], got = d.received[s][r];
      arrows[r].textContent = sent === null ? "" : "chunk " + sent;
      for (var c = 0; c < n; c++) {
        var done = d.values[s][r][c] === d.final[c], b = boxes[r][c];
        b[0].setAttribute("fill", done ? d.colors[r] : "#fff");
        b[0].setAttribute("stroke", c === sent ? "#000" : d.colors[r]);
        b[0].setAttribute("stroke-width", c === sent ? 3 : 1);
        b[1].setAttribute("fill", done ? "#fff" : "#000");
        b[1].setAttribute("font-weight", c === got ? "bold" : "normal");
        b[1].textContent = d.text[s][r][c];
      }
    }
    slider.value = s;
    slider.setAttribute("aria-valuetext", d.labels[s]);
    step.textContent = d.labels[s];
    f.say(d.descriptions[s]);
  }
  function stop() {
    clearInterval(timer);
    timer = null;
    play.textContent = "Play";
    play.setAttribute("aria-pressed", "false");
  }
  slider.addEventListener("input", function () { show(+slider.value); });
  play.addEventListener("click", function () {
    if (timer !== null) return stop();
    if (+slider.value === d.labels.length - 1) show(0);
    play.textContent = "Pause";
    play.setAttribute("aria-pressed", "true");
    timer = setInterval(function () {
      var s = +slider.value + 1;
      if (s >= d.labels.length) return stop();
      show(s);
    }, 1000);
  });
  show(0);
})

//# timeline
(function (f) {
  var d = f.data, t = f.times, rows = d.rows, H = 34, left = 150, W = 640;
  var top = 26, span = Math.max.apply(null, t) || 1, scale = (W - left - 45) /
    span, y0 = top + rows.length * H;
  function x(v) { return left + v * scale; }
  var ticks = Math.pow(10, Math.floor(Math.log10(span))), k;
  if (span / ticks < 3) ticks /= 2;
  if (span / ticks > 6) ticks *= 2;
  for (k = 0; k * ticks <= span * 1.0001; k++) {
    f.el("line", {x1: x(k * ticks), x2: x(k * ticks), y1: top, y2: y0 + 4,
      stroke: "#ddd"});
    f.el("text", {x: x(k * ticks), y: y0 + 16, "text-anchor": "middle",
      "font-size": 11}, null, +(k * ticks).toPrecision(3) + "");
  }
  f.el("text", {x: left + (W - left) / 2, y: y0 + 34, "text-anchor":
    "middle", "font-size": 12}, null, d.axis);
  rows.forEach(function (row, i) {
    f.el("text", {x: left - 8, y: top + i * H + H / 2, "text-anchor": "end",
      "dominant-baseline": "middle", "font-size": 12, fill: row[1]}, null,
      row[0]);
  });
  var j = 0;
  d.spans.forEach(function (s) {        // row, sub-row, of, style, text
    var a = t[j++], b = t[j++], h = (H - 10) / s[2];
    var e = f.el("rect", {x: x(a), y: top + s[0] * H + 5 + s[1] * h,
      width: Math.max(x(b) - x(a), 3), height: h - 1, fill: rows[s[0]][1],
      "fill-opacity": s[3] ? 0.35 : 0.85, stroke: "#000",
      "stroke-width": 0.5, "stroke-dasharray": s[3] ? "3 2" : "none"});
    f.describe(e, s[4] + ": from " + f.fmt(a) + " to " + f.fmt(b) + " " +
      d.unit + " (took " + f.fmt(b - a) + " " + d.unit + ")");
  });
  var used = {};                        // row -> right end of each level
  d.marks.forEach(function (m) {        // row, text, label drawn
    var at = t[j++], y = top + m[0] * H;
    f.el("line", {x1: x(at), x2: x(at), y1: y + 3, y2: y + H - 3,
      stroke: "#000", "stroke-width": 1.5, "pointer-events": "none"});
    if (m[2]) f.el("text", {x: x(at) + 3, y: y + 9, "font-size": 10,
      "pointer-events": "none"}, null, m[2]);
    // In the row's top strip, over the mark's label, clear of the bars'
    // middle: a short bar next to the mark stays reachable by the mouse.
    // Marks closer than their width (a weight's and a bias's gradient
    // ready at once) take the second of two levels.
    var w = 8 + 6 * m[2].length, ends = used[m[0]] = used[m[0]] || [];
    var level = ends[0] > x(at) - 4 ? 1 : 0;
    ends[level] = x(at) - 4 + w;
    var hit = f.el("rect", {x: x(at) - 4, y: y - 3 + 8 * level, width: w,
      height: 8, fill: "transparent", stroke: "none"});
    f.describe(hit, m[1] + " at " + f.fmt(at) + " " + d.unit);
  });
  var lx = left;                        // legend: what each fill means
  (d.legend || []).forEach(function (label, i) {
    f.el("rect", {x: lx, y: y0 + 44, width: 14, height: 10, fill: "#999",
      "fill-opacity": i ? 0.35 : 0.85, stroke: "#000", "stroke-width": 0.5,
      "stroke-dasharray": i ? "3 2" : "none"});
    var e = f.el("text", {x: lx + 18, y: y0 + 53, "font-size": 11}, null,
      label);
    lx += 40 + e.getComputedTextLength();
  });
  f.svg.setAttribute("viewBox", "0 0 " + W + " " + (y0 + (d.legend ?
    60 : 42)));
})
