// SweepMonitor view (anywidget ES module). Protocol: ../protocol.md, "SweepMonitor".
// Plain ES2020, no dependencies (clusters are air-gapped): small hand-written SVG plots, drawn with
// plot.js's kit (frame, placement, ticks, s, formatNumber, formatParam) and common.js's helpers (h, badge,
// formatSeconds, injectStyle, patch, run), which views.SweepMonitor serves before this file as one module.
//
// DOM hooks (stable; browser tests rely on them): protocol.md's "DOM hooks" table, in short:
//   .mlp-sweep[data-job-id] root; .mlp-status; .mlp-header (.mlp-state badge, .mlp-progress,
//   .mlp-best-summary); svg.mlp-objective-plot circle.mlp-trial-point (x = trial); svg.mlp-curves-plot
//   path.mlp-trial-curve (x = step), circle.mlp-trial-dot (a trial with one point), .mlp-legend
//   .mlp-legend-item; .mlp-hp-plots svg.mlp-hp-plot[data-hp] circle.mlp-hp-point (the objective
//   against each hyperparameter, axes from `hp_axes`); table.mlp-trials (th[data-sort], tr.mlp-trial
//   with td.mlp-objective, .mlp-step, .mlp-duration, .mlp-hp). Every mark of a trial carries
//   data-trial-id, .mlp-best on the best; a click opens the trial's log (open_trial), .mlp-open on
//   the row last opened.

const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];
const W = PLOT_W; // plot.js (prepended to this module by views.SweepMonitor)
const H = PLOT_H;
const HP_W = 300; // the objective-by-hyperparameter plots (one per hyperparameter)
const HP_H = 210;

const CSS = `
.mlp-sweep [hidden] { display: none !important; }
.mlp-sweep { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, #212121); }
.mlp-sweep .mlp-header { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin: 4px 0; }
.mlp-sweep .mlp-sweep-title, .mlp-sweep .mlp-legend-item.mlp-best { font-weight: 600; }
.mlp-sweep .mlp-status { color: var(--jp-error-color1, #d32f2f); }
.mlp-sweep .mlp-plots, .mlp-sweep .mlp-hp-plots { display: flex; gap: 12px; flex-wrap: wrap; }
.mlp-sweep .mlp-plot { width: ${W}px; max-width: 100%; height: auto; background: var(--jp-layout-color1, #fff);
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.mlp-sweep .mlp-plot.mlp-hp-plot { width: ${HP_W}px; }
.mlp-sweep .mlp-plot text, .mlp-sweep .mlp-hp-title, .mlp-sweep .mlp-legend { fill: var(--jp-ui-font-color2, #616161);
  color: var(--jp-ui-font-color2, #616161); }
.mlp-sweep .mlp-plot text { font-size: 10px; }
.mlp-sweep .mlp-plot .mlp-axis { stroke: var(--jp-border-color1, #9e9e9e); }
.mlp-sweep .mlp-plot .mlp-grid { stroke: var(--jp-border-color3, #eeeeee); }
.mlp-sweep .mlp-plot circle { cursor: pointer; }
.mlp-sweep .mlp-plot .mlp-trial-point, .mlp-sweep .mlp-plot .mlp-hp-point { fill: var(--jp-brand-color1, #1976d2); fill-opacity: 0.7; }
.mlp-sweep .mlp-plot .mlp-trial-point.mlp-best, .mlp-sweep .mlp-plot .mlp-hp-point.mlp-best { fill: var(--jp-success-color1, #388e3c);
  fill-opacity: 1; stroke: var(--jp-ui-font-color1, #212121); stroke-width: 1.5; }
.mlp-sweep .mlp-plot path.mlp-trial-curve { fill: none; stroke-width: 1.2; stroke-opacity: 0.55; cursor: pointer; }
.mlp-sweep .mlp-plot path.mlp-trial-curve.mlp-best { stroke-width: 3; stroke-opacity: 1; }
.mlp-sweep .mlp-curves-box { display: flex; flex-direction: column; max-width: ${W}px; }
.mlp-sweep .mlp-legend { display: flex; flex-wrap: wrap; gap: 2px 10px; margin: 3px 0 0 4px; font-size: 0.9em; }
.mlp-sweep .mlp-legend-item { cursor: pointer; white-space: nowrap; }
.mlp-sweep .mlp-swatch { display: inline-block; width: 14px; height: 3px; margin-right: 4px; vertical-align: middle; }
.mlp-sweep .mlp-hp-title { margin: 8px 0 2px; }
.mlp-sweep .mlp-trials { border-collapse: collapse; margin-top: 6px; }
.mlp-sweep .mlp-trials th { text-align: left; cursor: pointer; user-select: none; white-space: nowrap;
  border-bottom: 1px solid var(--jp-border-color1, #bdbdbd); padding: 3px 8px; }
.mlp-sweep .mlp-trials th[aria-sort="ascending"]::after { content: " \\25B2"; }
.mlp-sweep .mlp-trials th[aria-sort="descending"]::after { content: " \\25BC"; }
.mlp-sweep .mlp-trials td { padding: 3px 8px; border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); white-space: nowrap; }
.mlp-sweep .mlp-trials tr.mlp-trial { cursor: pointer; }
.mlp-sweep .mlp-trials tr.mlp-trial:hover { background: var(--jp-layout-color2, #eeeeee); }
.mlp-sweep .mlp-trials tr.mlp-best { background: var(--jp-success-color3, #c8e6c9); font-weight: 600; }
.mlp-sweep .mlp-trials tr.mlp-open { outline: 2px solid var(--jp-brand-color1, #1976d2); }
`;

/** Trial ids in their natural order: numbers by value, others after, by text. */
function compareIds(a, b) {
  const x = /^\d+$/.test(a) ? Number(a) : Infinity;
  const y = /^\d+$/.test(b) ? Number(b) : Infinity;
  return x !== y ? x - y : a < b ? -1 : a > b ? 1 : 0;
}

function render({ model, el }) {
  injectStyle("mlp-sweep-style", CSS);
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
    for (const n of hpNames) cells.push(cell("mlp-hp", formatParam((row.hyperparameters || {})[n])));
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
  const tag = () => model.get("metric_tag") || "objective";
  const scored = () => [...trials.values()].map((e) => e.row) // the best one last: drawn on top
    .filter((r) => typeof r.objective === "number" && isFinite(r.objective))
    .sort((a, b) => (a.trialId === best()) - (b.trialId === best()) || compareIds(a.trialId, b.trialId));
  /** One point per trial, [row, x] (y = its objective); `opt` as frame's, plus `range` to cover. */
  function scatter(svg, points, xLabel, cls, describe, opt) {
    const { x, y } = frame(svg, [...points.map((p) => p[1]), ...(opt.range || [])], points.map(([r]) => r.objective),
      xLabel, tag(), !!opt.integerX, opt);
    for (const [r, v] of points) {
      const top = r.trialId === best();
      svg.appendChild(hook(s("circle", { cx: x(v).toFixed(1), cy: y(r.objective).toFixed(1), r: top ? 6 : 4 },
        cls + (top ? " mlp-best" : "")), r.trialId, describe(r)));
    }
  }
  /** `node` as trial `trial`'s mark: its id, a tooltip, a click opens the trial. */
  function hook(node, trial, text) {
    node.setAttribute("data-trial-id", trial);
    if (text) {
      const t = s("title");
      t.textContent = text;
      node.appendChild(t);
    }
    node.addEventListener("click", () => open(trial));
    return node;
  }
  function drawObjective() {
    objectivePlot.replaceChildren();
    const rows = scored();
    if (!rows.length) { emptyPlot(objectivePlot, "no trial has reported " + tag() + " yet"); return; }
    const ids = rows.map((r) => r.trialId).sort(compareIds);
    const numeric = ids.every((id) => /^\d+$/.test(id));
    scatter(objectivePlot, rows.map((r) => [r, numeric ? Number(r.trialId) : ids.indexOf(r.trialId) + 1]), "trial",
      "mlp-trial-point", (r) => "trial " + r.trialId + ": " + formatNumber(r.objective) + " (" + r.state + ")",
      { integerX: true });
  }
  function drawCurves() {
    curvesPlot.replaceChildren();
    const lines = [...series.entries()].filter(([id, pts]) => trials.has(id) && pts.length)
      .sort((a, b) => compareIds(a[0], b[0]));
    legend.replaceChildren();
    if (!lines.length) { emptyPlot(curvesPlot, "no intermediate " + tag() + " yet"); return; }
    const all = lines.flatMap(([, pts]) => pts);
    const { x, y } = frame(curvesPlot, all.map((p) => p[0]), all.map((p) => p[1]), "step", tag(), true);
    const id = best();
    lines.sort((a, b) => (a[0] === id) - (b[0] === id)); // the best one drawn last, on top
    for (const [trial, pts] of lines) {
      const sorted = [...pts].sort((a, b) => a[0] - b[0]);
      const d = sorted.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
      const text = "trial " + trial + " (" + sorted.length + " point" + (sorted.length === 1 ? "" : "s") + ")";
      const top = trial === id ? " mlp-best" : "";
      curvesPlot.appendChild(hook(s("path", { d, stroke: color(trial), "stroke-linecap": "round" },
        "mlp-trial-curve" + top), trial, text));
      if (sorted.length === 1) { // one report: a line of one point would not show, a dot does
        curvesPlot.appendChild(hook(s("circle", { cx: x(sorted[0][0]).toFixed(1), cy: y(sorted[0][1]).toFixed(1),
          r: top ? 5 : 3.5, fill: color(trial) }, "mlp-trial-dot" + top), trial, text));
      }
    }
    legend.replaceChildren(...lines.map(([trial]) => trial).sort(compareIds).map((trial) => {
      const swatch = h("span", "mlp-swatch");
      swatch.style.background = color(trial);
      const item = hook(h("span", "mlp-legend-item" + (trial === id ? " mlp-best" : "")), trial);
      item.append(swatch, "trial " + trial + (trial === id ? " (best)" : ""));
      return item;
    }));
  }
  function drawHp() {
    const axes = (model.get("hp_axes") || []).filter((a) => a && typeof a.name === "string");
    hpTitle.textContent = tag() + " by hyperparameter";
    hpTitle.hidden = hpBox.hidden = !axes.length;
    const rows = scored();
    hpBox.replaceChildren(...axes.map((axis) => {
      const svg = s("svg", { viewBox: `0 0 ${HP_W} ${HP_H}`, role: "img" }, "mlp-plot mlp-hp-plot");
      svg.setAttribute("data-hp", axis.name);
      const place = placement(axis);
      const of = (r) => (r.hyperparameters || {})[axis.name];
      const points = rows.map((r) => [r, place.pos(of(r))]).filter(([, v]) => v !== null);
      if (!points.length) emptyPlot(svg, axis.name + ": no " + tag() + " yet", HP_W, HP_H);
      else {
        scatter(svg, points, axis.name + (axis.scale === "log" ? " (log scale)" : ""), "mlp-hp-point",
          (r) => "trial " + r.trialId + ": " + axis.name + " " + formatParam(of(r)) + ", " + tag() + " " + formatNumber(r.objective),
          { w: HP_W, h: HP_H, xTicks: place.ticks, range: place.range });
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
      patch(e.row, fields);
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
  showJob();
  showStatus();
  redraw();
  return run(model, root, listeners, () => { for (const e of trials.values()) if (e.row.endTime == null) tick(e); });
}

export default { render };
