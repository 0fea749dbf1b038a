// A small SVG plotting kit for the sweep monitor (plain ES2020, no dependencies: clusters are
// air-gapped). Not a module of its own: views.SweepMonitor serves it after common.js and before
// sweep.js as one ES module (anywidget takes one), so sweep.js uses these names as its own.
//
// - frame(svg, xs, ys, xLabel, yLabel, integerX, opt): axes, grid and labels covering the data
//   (kept off the edges), returning the x() and y() that place values in the viewBox;
// - placement(axis): where a hyperparameter axis (`hp_axes`' shape: linear, log or categories)
//   puts a value, the range it must cover (the searched space) and its tick labels;
// - ticks(lo, hi, n): about n round values covering [lo, hi];
// - formatNumber(v), formatParam(s): a number, and a hyperparameter value string, as the views show them.

const SVG = "http://www.w3.org/2000/svg";
const PLOT_W = 420;
const PLOT_H = 240;
const PAD = { left: 56, right: 12, top: 12, bottom: 36 };

function s(tag, attrs, cls) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (cls) node.setAttribute("class", cls);
  return node;
}

function formatNumber(v) {
  if (v === null || v === undefined || !isFinite(v)) return "";
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}

/** A trial's hyperparameter value (the server's string): a number as `formatNumber` shows it, else as it is
 * (a learning rate of 0.012345678901234567 reads 0.012346). */
function formatParam(v) {
  if (v === null || v === undefined) return "";
  const n = Number(v);
  return String(v).trim() !== "" && isFinite(n) ? formatNumber(n) : String(v);
}

/** About `count` round tick values covering [lo, hi]. */
export function ticks(lo, hi, count = 5) {
  if (!isFinite(lo) || !isFinite(hi)) return [];
  if (lo === hi) return [lo];
  const raw = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((m) => m >= raw) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** A frame (axes, grid, labels) for data ranges; returns {x(), y()}. `opt`: `w`, `h` (the
 * viewBox, default W × H) and `xTicks(x0, x1)` → [[value, label], …] in place of numeric ticks. */
function frame(svg, xs, ys, xLabel, yLabel, integerX, opt = {}) {
  const W = opt.w || PLOT_W;
  const H = opt.h || PLOT_H;
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const yPad = (y1 - y0) * 0.06;
  const xPad = (x1 - x0) * 0.04;
  y0 -= yPad; y1 += yPad; x0 -= xPad; x1 += xPad; // points stay off the frame's edges
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const x = (v) => PAD.left + ((v - x0) / (x1 - x0)) * iw;
  const y = (v) => PAD.top + ih - ((v - y0) / (y1 - y0)) * ih;
  for (const t of ticks(y0, y1, 5)) {
    svg.appendChild(s("line", { x1: PAD.left, x2: W - PAD.right, y1: y(t), y2: y(t) }, "mlp-grid"));
    const label = s("text", { x: PAD.left - 4, y: y(t) + 3, "text-anchor": "end" });
    label.textContent = formatNumber(t);
    svg.appendChild(label);
  }
  const xTicks = opt.xTicks ? opt.xTicks(x0, x1)
    : ticks(x0, x1, 6).filter((t) => !integerX || Number.isInteger(t)).map((t) => [t, formatNumber(t)]);
  for (const [t, text] of xTicks) {
    const label = s("text", { x: x(t), y: H - PAD.bottom + 14, "text-anchor": "middle" });
    label.textContent = text;
    svg.appendChild(label);
  }
  svg.appendChild(s("line", { x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: H - PAD.bottom }, "mlp-axis"));
  svg.appendChild(s("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom }, "mlp-axis"));
  const xl = s("text", { x: PAD.left + iw / 2, y: H - 6, "text-anchor": "middle" });
  xl.textContent = xLabel;
  const yl = s("text", { x: 12, y: PAD.top + ih / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${PAD.top + ih / 2})` });
  yl.textContent = yLabel;
  svg.append(xl, yl);
  return { x, y };
}

/** Where an axis (`hp_axes`' shape) puts a value: `pos(v)` (null: not on this axis), `range` (the
 * positions the axis must cover: the searched space) and `ticks(x0, x1)` (null: numeric ticks). */
export function placement(axis) {
  if (axis.scale === "category") {
    const cats = (axis.categories || []).map(String);
    return { pos: (v) => { const i = cats.indexOf(String(v)); return i < 0 ? null : i; },
      range: [-0.5, cats.length - 0.5],
      ticks: () => cats.map((c, i) => [i, c.length > 12 ? c.slice(0, 11) + "…" : c]) };
  }
  const log = axis.scale === "log";
  const pos = (v) => {
    const n = Number(v);
    if (v === undefined || v === null || v === "" || !isFinite(n)) return null;
    return log ? (n > 0 ? Math.log10(n) : null) : n;
  };
  const range = [pos(axis.min), pos(axis.max)].filter((x) => x !== null);
  const logTicks = (x0, x1) => {
    let t = ticks(x0, x1, 5);
    const whole = t.filter((v) => Number.isInteger(v));
    if (whole.length >= 2) t = whole; // decades where the range spans them
    const decade = (v) => (Number.isInteger(v) && (v < -3 || v > 4) ? "1e" + v : formatNumber(Math.pow(10, v)));
    return t.map((v) => [v, decade(v)]);
  };
  return { pos, range, ticks: log ? logTicks : null };
}

function emptyPlot(svg, text, w = PLOT_W, h = PLOT_H) {
  const t = s("text", { x: w / 2, y: h / 2, "text-anchor": "middle" }, "mlp-plot-empty");
  t.textContent = text;
  svg.appendChild(t);
}
