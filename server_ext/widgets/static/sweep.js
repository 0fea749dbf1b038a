// SweepMonitor view (anywidget ES module). Protocol: ../protocol.md, "SweepMonitor".
// Plain ES2020, no dependencies (clusters are air-gapped): a small hand-written SVG plot.
//
// DOM hooks (stable; browser tests rely on them):
//   .mlp-sweep[data-job-id="<id>"]          the widget root
//   .mlp-status                             the `status` trait's problem line (hidden when "")
//   .mlp-header .mlp-state.mlp-state-<S>    the sweep's state badge; .mlp-progress "3/10";
//                                           .mlp-best-summary "best: trial 3, accuracy 0.913"
//   svg.mlp-plot.mlp-objective-plot         objective per trial (x = trial, y = objective):
//     circle.mlp-trial-point[data-trial-id="<id>"]   one per trial with an objective;
//                                           .mlp-best on the best one
//   svg.mlp-plot.mlp-curves-plot            intermediate metric per trial (x = step):
//     path.mlp-trial-curve[data-trial-id="<id>"]     one per trial with points; .mlp-best on the best
//     circle.mlp-trial-dot[data-trial-id="<id>"]     a trial with one point only: a dot (a line of
//                                           one point would not show)
//   .mlp-legend .mlp-legend-item[data-trial-id="<id>"]  the curves' legend: the trial's colour and
//                                           "trial N" (.mlp-best on the best); click opens the trial
//   .mlp-hp-plots svg.mlp-plot.mlp-hp-plot[data-hp="<name>"]   the objective against each
//                                           hyperparameter (`hp_axes`: linear, log or categories):
//     circle.mlp-hp-point[data-trial-id="<id>"]      one per trial with an objective; .mlp-best on the best
//   table.mlp-trials                        the trials; th[data-sort="<column>"] sorts (click again:
//                                           reverse), aria-sort on the sorted one; columns trialId,
//                                           state, objective, step, duration, hp:<name> per hyperparameter
//   tr.mlp-trial[data-trial-id="<id>"]      one trial; .mlp-best on the best; click/Enter opens its
//                                           log (sends open_trial); .mlp-open on the last opened
//   td.mlp-objective, .mlp-step, .mlp-duration, .mlp-hp   cells; .mlp-state badge in each row

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];
const W = 420;
const H = 240;
const DEFAULT_W = W;
const DEFAULT_H = H;
const PAD = { left: 56, right: 12, top: 12, bottom: 36 };
const HP_W = 300; // the objective-by-hyperparameter plots (one per hyperparameter)
const HP_H = 210;

const CSS = `
.mlp-sweep [hidden] { display: none !important; }
.mlp-sweep { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, #212121); }
.mlp-sweep .mlp-header { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin: 4px 0; }
.mlp-sweep .mlp-sweep-title { font-weight: 600; }
.mlp-sweep .mlp-status { color: var(--jp-error-color1, #d32f2f); }
.mlp-sweep .mlp-plots { display: flex; gap: 12px; flex-wrap: wrap; }
.mlp-plot { width: ${W}px; max-width: 100%; height: auto; background: var(--jp-layout-color1, #fff);
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.mlp-plot text { fill: var(--jp-ui-font-color2, #616161); font-size: 10px; }
.mlp-plot .mlp-axis { stroke: var(--jp-border-color1, #9e9e9e); }
.mlp-plot .mlp-grid { stroke: var(--jp-border-color3, #eeeeee); }
.mlp-plot circle.mlp-trial-point { fill: var(--jp-brand-color1, #1976d2); fill-opacity: 0.7; cursor: pointer; }
.mlp-plot circle.mlp-trial-point.mlp-best { fill: var(--jp-success-color1, #388e3c); fill-opacity: 1;
  stroke: var(--jp-ui-font-color1, #212121); stroke-width: 1.5; }
.mlp-plot path.mlp-trial-curve { fill: none; stroke-width: 1.2; stroke-opacity: 0.55; cursor: pointer; }
.mlp-plot path.mlp-trial-curve.mlp-best { stroke-width: 3; stroke-opacity: 1; }
.mlp-plot circle.mlp-trial-dot { cursor: pointer; fill-opacity: 0.8; }
.mlp-plot circle.mlp-hp-point { fill: var(--jp-brand-color1, #1976d2); fill-opacity: 0.6; cursor: pointer; }
.mlp-plot circle.mlp-hp-point.mlp-best { fill: var(--jp-success-color1, #388e3c); fill-opacity: 1;
  stroke: var(--jp-ui-font-color1, #212121); stroke-width: 1.5; }
.mlp-plot.mlp-hp-plot { width: ${HP_W}px; }
.mlp-sweep .mlp-curves-box { display: flex; flex-direction: column; max-width: ${W}px; }
.mlp-sweep .mlp-legend { display: flex; flex-wrap: wrap; gap: 2px 10px; margin: 3px 0 0 4px; font-size: 0.9em; }
.mlp-sweep .mlp-legend-item { cursor: pointer; white-space: nowrap; color: var(--jp-ui-font-color2, #616161); }
.mlp-sweep .mlp-legend-item.mlp-best { font-weight: 600; color: var(--jp-ui-font-color1, #212121); }
.mlp-sweep .mlp-swatch { display: inline-block; width: 14px; height: 3px; margin-right: 4px; vertical-align: middle; }
.mlp-sweep .mlp-hp-title { margin: 8px 0 2px; color: var(--jp-ui-font-color2, #616161); }
.mlp-sweep .mlp-hp-plots { display: flex; gap: 8px; flex-wrap: wrap; }
.mlp-trials { border-collapse: collapse; margin-top: 6px; }
.mlp-trials th { text-align: left; cursor: pointer; user-select: none; white-space: nowrap;
  border-bottom: 1px solid var(--jp-border-color1, #bdbdbd); padding: 3px 8px; }
.mlp-trials th[aria-sort="ascending"]::after { content: " \\25B2"; }
.mlp-trials th[aria-sort="descending"]::after { content: " \\25BC"; }
.mlp-trials td { padding: 3px 8px; border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); white-space: nowrap; }
.mlp-trials tr.mlp-trial { cursor: pointer; }
.mlp-trials tr.mlp-trial:hover { background: var(--jp-layout-color2, #eeeeee); }
.mlp-trials tr.mlp-best { background: var(--jp-success-color3, #c8e6c9); font-weight: 600; }
.mlp-trials tr.mlp-open { outline: 2px solid var(--jp-brand-color1, #1976d2); }
.mlp-state { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 0.85em;
  font-weight: 600; color: #fff; background: #757575; }
.mlp-state-RUNNING { background: var(--jp-brand-color1, #1976d2); }
.mlp-state-SUCCEEDED { background: var(--jp-success-color1, #388e3c); }
.mlp-state-FAILED { background: var(--jp-error-color1, #d32f2f); }
.mlp-state-CANCELLING, .mlp-state-CANCELLED { background: var(--jp-warn-color1, #f57c00); }
`;

function injectStyle() {
  if (typeof document === "undefined" || document.getElementById("mlp-sweep-style")) return;
  const style = document.createElement("style");
  style.id = "mlp-sweep-style";
  style.textContent = CSS;
  document.head.appendChild(style);
}

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function s(tag, attrs, cls) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (cls) node.setAttribute("class", cls);
  return node;
}

function badge(state) {
  return h("span", "mlp-state mlp-state-" + (state || "UNKNOWN"), state || "?");
}

function formatSeconds(t) {
  if (t === null || t === undefined || !isFinite(t)) return "";
  t = Math.max(0, Math.floor(t));
  if (t < 60) return t + "s";
  if (t < 3600) return Math.floor(t / 60) + "m " + (t % 60) + "s";
  return Math.floor(t / 3600) + "h " + String(Math.floor((t % 3600) / 60)).padStart(2, "0") + "m";
}

function formatNumber(v) {
  if (v === null || v === undefined || !isFinite(v)) return "";
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : String(Number(v.toPrecision(5)));
}

/** Trial ids in their natural order: numbers by value, others after, by text. */
function compareIds(a, b) {
  const x = /^\d+$/.test(a) ? Number(a) : Infinity;
  const y = /^\d+$/.test(b) ? Number(b) : Infinity;
  return x !== y ? x - y : a < b ? -1 : a > b ? 1 : 0;
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
  const W = opt.w || DEFAULT_W;
  const H = opt.h || DEFAULT_H;
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

/** An axis of a hyperparameter seen only in the trials (no `hp_axes` entry): numbers on a linear
 * scale over the values seen, anything else as categories in sorted order. */
export function inferAxis(name, values) {
  const seen = values.filter((v) => v !== undefined && v !== null && v !== "");
  if (seen.length && seen.every((v) => isFinite(Number(v)))) {
    const nums = seen.map(Number);
    return { name, scale: "linear", min: Math.min(...nums), max: Math.max(...nums) };
  }
  return { name, scale: "category", categories: [...new Set(seen.map(String))].sort() };
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

function emptyPlot(svg, text, w = W, h = H) {
  const t = s("text", { x: w / 2, y: h / 2, "text-anchor": "middle" }, "mlp-plot-empty");
  t.textContent = text;
  svg.appendChild(t);
}

// Liveness (protocol.md, "Liveness"): while this view exists and its page is visible, it tells the
// kernel every ALIVE_MS; a kernel that has heard from no view for a while goes quiet (sends nothing,
// polls nothing), so an abandoned notebook does not look busy to an idle culler. A page shown
// again says so at once (the kernel resumes where it stopped). Returns the stop function.
const ALIVE_MS = 10000;
function keepAlive(model) {
  const doc = typeof document === "undefined" ? null : document;
  const shown = () => !doc || doc.visibilityState !== "hidden";
  const say = () => { if (shown()) model.send({ type: "alive" }); };
  const timer = setInterval(say, ALIVE_MS);
  const onVisibility = () => { if (shown()) say(); };
  if (doc && doc.addEventListener) doc.addEventListener("visibilitychange", onVisibility);
  return () => {
    clearInterval(timer);
    if (doc && doc.removeEventListener) doc.removeEventListener("visibilitychange", onVisibility);
  };
}

function render({ model, el }) {
  injectStyle();
  let skew = 0;
  const now = () => Date.now() / 1000 + skew;
  let rev = null;
  let waiting = true;
  const trials = new Map(); // trialId -> {row, tr}
  const series = new Map(); // trialId -> [[step, value], …]
  let hpNames = [];
  let sort = null; // null: the protocol's default order (best objective first per goal)
  let opened = "";

  const root = h("div", "mlp-sweep");
  const status = h("div", "mlp-status");
  const header = h("div", "mlp-header");
  const title = h("span", "mlp-sweep-title");
  const stateSlot = h("span", "mlp-state-slot");
  const progress = h("span", "mlp-progress");
  const bestSummary = h("span", "mlp-best-summary");
  header.append(title, stateSlot, progress, bestSummary);
  const plots = h("div", "mlp-plots");
  const objectivePlot = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" }, "mlp-plot mlp-objective-plot");
  const curvesPlot = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" }, "mlp-plot mlp-curves-plot");
  const legend = h("div", "mlp-legend");
  const curvesBox = h("div", "mlp-curves-box");
  curvesBox.append(curvesPlot, legend);
  plots.append(objectivePlot, curvesBox);
  const hpTitle = h("div", "mlp-hp-title");
  const hpBox = h("div", "mlp-hp-plots");
  const table = h("table", "mlp-trials");
  const thead = h("thead");
  const tbody = h("tbody");
  table.append(thead, tbody);
  root.append(status, header, plots, hpTitle, hpBox, table);
  el.appendChild(root);

  const best = () => model.get("best_trial") || ([...trials.values()].find((t) => t.row.best) || {}).row?.trialId || "";
  const color = (id) => {
    const ids = [...trials.keys()].sort(compareIds);
    return PALETTE[Math.max(ids.indexOf(id), 0) % PALETTE.length];
  };

  // ---- table
  function columns() {
    return [["trialId", "Trial"], ["state", "State"], ["objective", model.get("metric_tag") || "objective"],
      ["step", "Step"], ["duration", "Duration"], ...hpNames.map((n) => ["hp:" + n, n])];
  }
  function defaultSort() {
    return { key: "objective", dir: model.get("goal") === "MINIMIZE" ? "asc" : "desc" };
  }
  function value(row, key) {
    if (key.startsWith("hp:")) {
      const v = (row.hyperparameters || {})[key.slice(3)];
      if (v === undefined || v === null) return null;
      const n = Number(v);
      return v !== "" && isFinite(n) ? n : String(v);
    }
    if (key === "duration") return row.startTime == null ? null : (row.endTime ?? now()) - row.startTime;
    const v = row[key];
    return v === undefined ? null : v;
  }
  function compare(a, b) {
    const { key, dir } = sort || defaultSort();
    let c = 0;
    if (key === "trialId") c = compareIds(a.trialId, b.trialId);
    else {
      const x = value(a, key);
      const y = value(b, key);
      if (x === null && y !== null) return 1; // missing values last, whatever the direction
      if (y === null && x !== null) return -1;
      if (x !== null && y !== null) {
        c = typeof x === typeof y ? (x < y ? -1 : x > y ? 1 : 0) : typeof x === "number" ? -1 : 1;
      }
    }
    if (dir === "desc") c = -c;
    return c || compareIds(a.trialId, b.trialId);
  }
  function renderHead() {
    const tr = h("tr");
    const current = sort || defaultSort();
    for (const [key, text] of columns()) {
      const th = h("th", null, text);
      th.setAttribute("data-sort", key);
      if (key === current.key) th.setAttribute("aria-sort", current.dir === "asc" ? "ascending" : "descending");
      th.addEventListener("click", () => {
        const was = sort || defaultSort();
        const first = key === "objective" ? defaultSort().dir : "asc"; // objective: best first
        sort = { key, dir: was.key === key ? (was.dir === "asc" ? "desc" : "asc") : first };
        renderHead();
        reorder();
      });
      tr.appendChild(th);
    }
    thead.replaceChildren(tr);
  }
  function fillRow(entry) {
    const { row, tr } = entry;
    const cell = (cls, text) => h("td", cls, text);
    const stateCell = cell("mlp-state-cell");
    stateCell.appendChild(badge(row.state));
    if (row.stoppedEarly) stateCell.appendChild(h("span", "mlp-stopped-early", " stopped early"));
    const cells = [cell("mlp-trial-id", row.trialId), stateCell, cell("mlp-objective", formatNumber(row.objective)),
      cell("mlp-step", row.step ?? ""), cell("mlp-duration")];
    for (const n of hpNames) cells.push(cell("mlp-hp", (row.hyperparameters || {})[n] ?? ""));
    tr.replaceChildren(...cells);
    tr.setAttribute("data-state", row.state || "");
    tick(entry);
  }
  function tick(entry) {
    const cell = entry.tr.childNodes[4];
    if (cell) cell.textContent = formatSeconds(value(entry.row, "duration"));
  }
  function reorder() {
    const entries = [...trials.values()].sort((a, b) => compare(a.row, b.row));
    entries.forEach((e, i) => {
      if (tbody.childNodes[i] !== e.tr) tbody.insertBefore(e.tr, tbody.childNodes[i] || null);
    });
  }
  function markBest() {
    const id = best();
    for (const [key, e] of trials) {
      e.tr.classList.toggle("mlp-best", key === id);
      e.tr.classList.toggle("mlp-open", key === opened);
    }
    const b = trials.get(id);
    bestSummary.textContent = b && b.row.objective !== null && b.row.objective !== undefined
      ? "best: trial " + id + ", " + (model.get("metric_tag") || "objective") + " " + formatNumber(b.row.objective)
      : "";
  }
  function open(id) {
    opened = id;
    model.send({ type: "open_trial", trialId: id });
    markBest();
  }
  function create(row) {
    const tr = h("tr", "mlp-trial");
    tr.setAttribute("data-trial-id", row.trialId);
    tr.tabIndex = 0;
    tr.addEventListener("click", () => open(row.trialId));
    tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") open(row.trialId); });
    const entry = { row, tr };
    fillRow(entry);
    return entry;
  }

  // ---- plots (small: redrawn whole after each message)
  function drawObjective() {
    objectivePlot.replaceChildren();
    const points = [...trials.values()].map((e) => e.row)
      .filter((r) => typeof r.objective === "number" && isFinite(r.objective))
      .sort((a, b) => compareIds(a.trialId, b.trialId));
    const tag = model.get("metric_tag") || "objective";
    if (!points.length) { emptyPlot(objectivePlot, "no trial has reported " + tag + " yet"); return; }
    const numeric = points.every((r) => /^\d+$/.test(r.trialId));
    const xOf = (r, i) => (numeric ? Number(r.trialId) : i + 1);
    const { x, y } = frame(objectivePlot, points.map(xOf), points.map((r) => r.objective), "trial", tag, true);
    const id = best();
    points.forEach((r, i) => {
      const c = s("circle", { cx: x(xOf(r, i)), cy: y(r.objective), r: r.trialId === id ? 6 : 4 },
        "mlp-trial-point" + (r.trialId === id ? " mlp-best" : ""));
      c.setAttribute("data-trial-id", r.trialId);
      const t = s("title");
      t.textContent = "trial " + r.trialId + ": " + formatNumber(r.objective) + " (" + r.state + ")";
      c.appendChild(t);
      c.addEventListener("click", () => open(r.trialId));
      objectivePlot.appendChild(c);
    });
  }
  function drawCurves() {
    curvesPlot.replaceChildren();
    const lines = [...series.entries()].filter(([id, pts]) => trials.has(id) && pts.length)
      .sort((a, b) => compareIds(a[0], b[0]));
    const tag = model.get("metric_tag") || "objective";
    legend.replaceChildren();
    if (!lines.length) { emptyPlot(curvesPlot, "no intermediate " + tag + " yet"); return; }
    const all = lines.flatMap(([, pts]) => pts);
    const { x, y } = frame(curvesPlot, all.map((p) => p[0]), all.map((p) => p[1]), "step", tag, true);
    const id = best();
    lines.sort((a, b) => (a[0] === id) - (b[0] === id)); // the best one drawn last, on top
    for (const [trial, pts] of lines) {
      const sorted = [...pts].sort((a, b) => a[0] - b[0]);
      let d = sorted.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
      if (sorted.length === 1) d += " h 0.01"; // a dot still shows with round caps
      const path = s("path", { d, stroke: color(trial), "stroke-linecap": "round" },
        "mlp-trial-curve" + (trial === id ? " mlp-best" : ""));
      path.setAttribute("data-trial-id", trial);
      const t = s("title");
      t.textContent = "trial " + trial + " (" + sorted.length + " point" + (sorted.length === 1 ? "" : "s") + ")";
      path.appendChild(t);
      path.addEventListener("click", () => open(trial));
      curvesPlot.appendChild(path);
      if (sorted.length === 1) { // one report: a line of one point would not show
        const dot = s("circle", { cx: x(sorted[0][0]).toFixed(1), cy: y(sorted[0][1]).toFixed(1),
          r: trial === id ? 5 : 3.5, fill: color(trial) }, "mlp-trial-dot" + (trial === id ? " mlp-best" : ""));
        dot.setAttribute("data-trial-id", trial);
        const dt = s("title");
        dt.textContent = t.textContent;
        dot.appendChild(dt);
        dot.addEventListener("click", () => open(trial));
        curvesPlot.appendChild(dot);
      }
    }
    legend.replaceChildren(...lines.map(([trial]) => trial).sort(compareIds).map((trial) => {
      const item = h("span", "mlp-legend-item" + (trial === id ? " mlp-best" : ""));
      item.setAttribute("data-trial-id", trial);
      const swatch = h("span", "mlp-swatch");
      swatch.style.background = color(trial);
      item.append(swatch, "trial " + trial + (trial === id ? " (best)" : ""));
      item.addEventListener("click", () => open(trial));
      return item;
    }));
  }
  function hpAxes() {
    const given = (model.get("hp_axes") || []).filter((a) => a && typeof a.name === "string");
    const named = new Set(given.map((a) => a.name));
    const values = (n) => [...trials.values()].map((e) => (e.row.hyperparameters || {})[n]);
    return [...given, ...hpNames.filter((n) => !named.has(n)).map((n) => inferAxis(n, values(n)))];
  }
  function drawHp() {
    const axes = hpAxes();
    const tag = model.get("metric_tag") || "objective";
    hpTitle.textContent = tag + " by hyperparameter";
    hpTitle.hidden = !axes.length;
    hpBox.hidden = !axes.length;
    const id = best();
    const scored = [...trials.values()].map((e) => e.row)
      .filter((r) => typeof r.objective === "number" && isFinite(r.objective))
      .sort((a, b) => (a.trialId === id) - (b.trialId === id) || compareIds(a.trialId, b.trialId)); // best on top
    hpBox.replaceChildren(...axes.map((axis) => {
      const svg = s("svg", { viewBox: `0 0 ${HP_W} ${HP_H}`, role: "img" }, "mlp-plot mlp-hp-plot");
      svg.setAttribute("data-hp", axis.name);
      const place = placement(axis);
      const points = scored.map((r) => [r, place.pos((r.hyperparameters || {})[axis.name])]).filter(([, v]) => v !== null);
      if (!points.length) { emptyPlot(svg, axis.name + ": no " + tag + " yet", HP_W, HP_H); return svg; }
      const label = axis.name + (axis.scale === "log" ? " (log scale)" : "");
      const { x, y } = frame(svg, [...points.map(([, v]) => v), ...place.range], points.map(([r]) => r.objective),
        label, tag, false, { w: HP_W, h: HP_H, xTicks: place.ticks });
      for (const [r, v] of points) {
        const c = s("circle", { cx: x(v).toFixed(1), cy: y(r.objective).toFixed(1), r: r.trialId === id ? 6 : 4 },
          "mlp-hp-point" + (r.trialId === id ? " mlp-best" : ""));
        c.setAttribute("data-trial-id", r.trialId);
        const t = s("title");
        t.textContent = "trial " + r.trialId + ": " + axis.name + " " + (r.hyperparameters || {})[axis.name] + ", "
          + tag + " " + formatNumber(r.objective);
        c.appendChild(t);
        c.addEventListener("click", () => open(r.trialId));
        svg.appendChild(c);
      }
      return svg;
    }));
  }

  // ---- state
  function apply(added, changed, removed, newSeries, replaceSeries) {
    for (const id of removed || []) {
      const e = trials.get(id);
      if (e) { e.tr.remove(); trials.delete(id); }
      series.delete(id);
    }
    for (const [id, fields] of Object.entries(changed || {})) {
      const e = trials.get(id);
      if (!e) continue;
      for (const [f, v] of Object.entries(fields)) {
        if (v === null && !(f in e.row)) continue;
        e.row[f] = v;
      }
      fillRow(e);
    }
    for (const [id, row] of Object.entries(added || {})) {
      const old = trials.get(id);
      if (old) old.tr.remove();
      trials.set(id, create({ ...row, trialId: row.trialId || id }));
    }
    if (replaceSeries) series.clear();
    for (const [id, pts] of Object.entries(newSeries || {})) {
      series.set(id, [...(series.get(id) || []), ...(pts || [])]);
    }
    const names = [...new Set([...trials.values()].flatMap((e) => Object.keys(e.row.hyperparameters || {})))].sort();
    if (names.join("\n") !== hpNames.join("\n")) {
      hpNames = names;
      if (sort && sort.key.startsWith("hp:") && !names.includes(sort.key.slice(3))) sort = null;
      for (const e of trials.values()) fillRow(e);
    }
    redraw();
  }
  function redraw() {
    renderHead();
    reorder();
    markBest();
    drawObjective();
    drawCurves();
    drawHp();
  }
  function showJob() {
    const job = model.get("job") || {};
    const id = job.jobId || model.get("job_id") || "";
    root.setAttribute("data-job-id", id);
    title.textContent = id;
    stateSlot.replaceChildren(badge(job.state));
    const goal = model.get("goal") === "MINIMIZE" ? "minimize" : "maximize";
    const tag = model.get("metric_tag") || "objective";
    progress.textContent = (job.trials ? job.trials + " trials · " : "") + goal + " " + tag;
  }
  function showStatus() {
    const text = model.get("status") || "";
    status.textContent = text;
    status.hidden = !text;
  }

  function onMessage(msg) {
    if (!msg || typeof msg !== "object") return;
    if (typeof msg.now === "number") skew = msg.now - Date.now() / 1000;
    if (msg.type === "snapshot") {
      rev = msg.rev;
      waiting = false;
      const rows = msg.trials || {};
      const removed = [...trials.keys()];
      for (const e of trials.values()) e.tr.remove();
      trials.clear();
      apply(rows, {}, removed.filter((id) => !(id in rows)), msg.series, true);
    } else if (msg.type === "delta") {
      if (waiting || rev === null) return;
      if (msg.rev !== rev + 1) {
        waiting = true;
        model.send({ type: "ready" });
        return;
      }
      rev = msg.rev;
      apply(msg.added, msg.changed, msg.removed, msg.series, false);
    }
  }

  const listeners = [
    ["msg:custom", onMessage], ["change:job", showJob], ["change:job_id", showJob], ["change:status", showStatus],
    ["change:goal", () => { showJob(); redraw(); }], ["change:metric_tag", () => { showJob(); redraw(); }],
    ["change:best_trial", () => { markBest(); drawObjective(); drawCurves(); drawHp(); }],
    ["change:hp_axes", drawHp],
  ];
  for (const [name, fn] of listeners) model.on(name, fn);
  const timer = setInterval(() => { for (const e of trials.values()) if (e.row.endTime == null) tick(e); }, 1000);
  showJob();
  showStatus();
  redraw();
  model.send({ type: "ready" });
  const stopAlive = keepAlive(model);

  return () => {
    stopAlive();
    clearInterval(timer);
    for (const [name, fn] of listeners) model.off(name, fn);
    root.remove();
  };
}

export default { render };
