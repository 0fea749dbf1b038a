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
const PAD = { left: 56, right: 12, top: 12, bottom: 36 };

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

/** A frame (axes, grid, labels) for data ranges; returns {svg-group, x(), y()}. */
function frame(svg, xs, ys, xLabel, yLabel, integerX) {
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
  for (const t of ticks(x0, x1, 6)) {
    if (integerX && !Number.isInteger(t)) continue;
    const label = s("text", { x: x(t), y: H - PAD.bottom + 14, "text-anchor": "middle" });
    label.textContent = formatNumber(t);
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

function emptyPlot(svg, text) {
  const t = s("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "mlp-plot-empty");
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
  plots.append(objectivePlot, curvesPlot);
  const table = h("table", "mlp-trials");
  const thead = h("thead");
  const tbody = h("tbody");
  table.append(thead, tbody);
  root.append(status, header, plots, table);
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
    }
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
    ["change:best_trial", () => { markBest(); drawObjective(); drawCurves(); }],
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
