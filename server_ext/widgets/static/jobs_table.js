// JobsTable view (anywidget ES module). Protocol: ../protocol.md, "JobsTable".
// Plain ES2020, no dependencies (clusters are air-gapped), text only (job data never becomes HTML).
// Uses common.js's names (h, badge, formatSeconds, injectStyle, patch, run, FINAL), which
// views.JobsTable serves before this file as one module.
//
// DOM hooks (stable; browser tests rely on them):
//   .mlp-jobs                               the widget root
//   .mlp-status                             the `status` trait's problem line (hidden when "")
//   .mlp-loading                            shown while the `loading` trait is true
//   select.mlp-state-filter                 state filter; option values: "" (all), "active",
//                                           "final", or one state name ("RUNNING", …)
//   input.mlp-label-filter                  label filter, "key" or "key=value" (Enter/blur saves)
//   button.mlp-refresh                      asks Python to poll now
//   .mlp-count                              "N of M jobs" (shown / held)
//   table.mlp-jobs-table                    the table; th[data-sort="<column>"] sorts
//   tr.mlp-row[data-job-id="<id>"][data-state="<STATE>"]   one job; `hidden` when filtered out;
//                                           .mlp-selected on the `selected` job; click/Enter selects
//   td.mlp-job-id, .mlp-error, .mlp-waiting, .mlp-kind, .mlp-labels (.mlp-label chips), .mlp-accelerator,
//   .mlp-machine, .mlp-age, .mlp-duration, .mlp-trial-count (sweeps: "3/10")   the cells
//   .mlp-state.mlp-state-<STATE>            the state badge (also in JobDetail and SweepMonitor)
//   .mlp-row-progress                       beside a job's badge until it ends: its last reported
//                                           progressPercentage ("42%"), when the job's JSON has one
//   .mlp-empty                              shown when no row is visible

const STATES = ["QUEUED", "PREPARING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED"];
const GROUPS = { active: ["QUEUED", "PREPARING", "RUNNING", "CANCELLING"], final: FINAL };
const COLUMNS = [
  ["jobId", "Job"], ["state", "State"], ["kind", "Kind"], ["labels", "Labels"],
  ["accelerator", "Accelerator"], ["machine", "Machine"], ["age", "Age"],
  ["duration", "Duration"], ["trials", "Trials"],
];

const CSS = `
.mlp-jobs [hidden] { display: none !important; }
.mlp-jobs { font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: var(--jp-ui-font-size1, 13px); color: var(--jp-ui-font-color1, #212121); }
.mlp-jobs .mlp-toolbar { display: flex; gap: 8px; align-items: center; margin: 4px 0; flex-wrap: wrap; }
.mlp-jobs select, .mlp-jobs input, .mlp-jobs button { font: inherit; color: inherit;
  background: var(--jp-layout-color1, #fff); border: 1px solid var(--jp-border-color1, #bdbdbd);
  border-radius: 3px; padding: 2px 6px; }
.mlp-jobs button { cursor: pointer; }
.mlp-jobs .mlp-count { color: var(--jp-ui-font-color2, #616161); }
.mlp-jobs .mlp-status { color: var(--jp-error-color1, #d32f2f); margin: 4px 0; }
.mlp-jobs .mlp-loading, .mlp-jobs .mlp-empty { color: var(--jp-ui-font-color2, #616161); padding: 4px; }
.mlp-jobs .mlp-jobs-table { border-collapse: collapse; width: 100%; }
.mlp-jobs .mlp-jobs-table th { text-align: left; cursor: pointer; user-select: none; white-space: nowrap;
  border-bottom: 1px solid var(--jp-border-color1, #bdbdbd); padding: 3px 8px; }
.mlp-jobs .mlp-jobs-table th[aria-sort="ascending"]::after { content: " \\25B2"; }
.mlp-jobs .mlp-jobs-table th[aria-sort="descending"]::after { content: " \\25BC"; }
.mlp-jobs .mlp-jobs-table td { padding: 3px 8px; border-bottom: 1px solid var(--jp-border-color2, #e0e0e0);
  white-space: nowrap; vertical-align: top; }
.mlp-jobs .mlp-jobs-table tr.mlp-row { cursor: pointer; }
.mlp-jobs .mlp-jobs-table tr.mlp-row:hover { background: var(--jp-layout-color2, #eeeeee); }
.mlp-jobs .mlp-jobs-table tr.mlp-selected { background: var(--jp-brand-color3, #bbdefb); }
.mlp-jobs .mlp-error { color: var(--jp-error-color1, #d32f2f); font-size: 0.9em; white-space: normal;
  max-width: 40em; }
.mlp-jobs .mlp-waiting { color: var(--jp-ui-font-color2, #616161); font-size: 0.9em; white-space: normal;
  max-width: 40em; }
.mlp-jobs .mlp-label { display: inline-block; margin-right: 4px; padding: 0 4px; border-radius: 3px;
  background: var(--jp-layout-color2, #eeeeee); }
`;

/** The states a `state_filter` trait value selects, as the select's option value. */
function filterOption(states) {
  if (!states || states.length === 0) return "";
  const same = (a, b) => a.length === b.length && a.every((x) => b.includes(x));
  for (const [name, group] of Object.entries(GROUPS)) if (same(states, group)) return name;
  if (states.length === 1 && STATES.includes(states[0])) return states[0];
  return "custom";
}

/** Python's `state.visible` filter: `label` is "", "key" or "key=value". */
export function matches(row, states, label) {
  if (states && states.length && !states.includes(row.state)) return false;
  if (!label) return true;
  const i = label.indexOf("=");
  const key = i < 0 ? label : label.slice(0, i);
  if (!key) return true;
  const labels = row.labels || {};
  if (!Object.prototype.hasOwnProperty.call(labels, key)) return false;
  return i < 0 || labels[key] === label.slice(i + 1);
}

function render({ model, el }) {
  injectStyle("mlp-jobs-table-style", CSS);
  let skew = 0; // kernel clock − browser clock, seconds
  const now = () => Date.now() / 1000 + skew;
  let rev = null; // last rev applied; null: no snapshot yet (ignore deltas)
  let waiting = true; // a `ready` is out: ignore deltas until the snapshot
  let sort = { key: "age", dir: "asc" }; // newest first (= smallest age)
  const held = new Map(); // jobId -> {row, tr, cells}

  const root = h("div", "mlp-jobs");
  const status = h("div", "mlp-status");
  const toolbar = h("div", "mlp-toolbar");
  const stateSelect = h("select", "mlp-state-filter");
  stateSelect.setAttribute("aria-label", "Filter by state");
  for (const [value, text] of [["", "All states"], ["active", "Active"], ["final", "Finished"],
    ...STATES.map((s) => [s, s]), ["custom", "Custom"]]) {
    const opt = h("option", null, text);
    opt.value = value;
    stateSelect.appendChild(opt);
  }
  const labelInput = h("input", "mlp-label-filter");
  labelInput.type = "text";
  labelInput.placeholder = "label: key or key=value";
  labelInput.setAttribute("aria-label", "Filter by label");
  const refresh = h("button", "mlp-refresh", "Refresh");
  refresh.type = "button";
  const count = h("span", "mlp-count");
  toolbar.append(stateSelect, labelInput, refresh, count);
  const loading = h("div", "mlp-loading", "Loading jobs…");
  const table = h("table", "mlp-jobs-table");
  const headRow = h("tr");
  const heads = {};
  for (const [key, text] of COLUMNS) {
    const th = h("th", null, text);
    th.setAttribute("data-sort", key);
    th.addEventListener("click", () => {
      sort = { key, dir: sort.key === key && sort.dir === "asc" ? "desc" : "asc" };
      reorder();
    });
    heads[key] = th;
    headRow.appendChild(th);
  }
  const thead = h("thead");
  thead.appendChild(headRow);
  const tbody = h("tbody");
  table.append(thead, tbody);
  const empty = h("div", "mlp-empty", "No jobs.");
  root.append(status, toolbar, loading, table, empty);
  el.appendChild(root);

  // ---- sorting (rows are moved, never rebuilt)
  function sortValue(row, key) {
    if (key === "age") return row.createTime === null || row.createTime === undefined ? -Infinity : -row.createTime;
    if (key === "duration") {
      if (row.startTime === null || row.startTime === undefined) return null;
      return (row.endTime ?? now()) - row.startTime;
    }
    if (key === "labels") return Object.entries(row.labels || {}).map(([k, v]) => k + "=" + v).sort().join(",");
    const v = row[key];
    return v === undefined ? null : v;
  }
  function compare(a, b) {
    const x = sortValue(a, sort.key);
    const y = sortValue(b, sort.key);
    let c = 0;
    if (x === null && y !== null) return 1; // unknown values last, whatever the direction
    if (y === null && x !== null) return -1;
    if (x !== null && y !== null) c = x < y ? -1 : x > y ? 1 : 0;
    if (sort.dir === "desc") c = -c;
    if (c === 0) c = (b.createTime || 0) - (a.createTime || 0);
    if (c === 0) c = a.jobId < b.jobId ? 1 : a.jobId > b.jobId ? -1 : 0;
    return c;
  }
  function reorder() {
    for (const [key, th] of Object.entries(heads)) {
      if (key === sort.key) th.setAttribute("aria-sort", sort.dir === "asc" ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    }
    const entries = [...held.values()].sort((a, b) => compare(a.row, b.row));
    entries.forEach((e, i) => {
      if (tbody.childNodes[i] !== e.tr) tbody.insertBefore(e.tr, tbody.childNodes[i] || null);
    });
  }

  // ---- rows
  function fill(entry, fields) {
    const { row, tr, cells } = entry;
    const all = fields === null;
    const has = (f) => all || Object.prototype.hasOwnProperty.call(fields, f);
    if (has("state") || has("progress")) {
      tr.setAttribute("data-state", row.state || "");
      const p = row.progress && typeof row.progress.progressPercentage === "number" && !FINAL.includes(row.state)
        ? row.progress.progressPercentage : null;
      cells.state.replaceChildren(badge(row.state), ...(p === null ? [] : [h("span", "mlp-row-progress", " " + p + "%")]));
    }
    if (has("error")) {
      cells.error.textContent = row.error || "";
      cells.error.hidden = !row.error;
      tr.title = row.error || "";
    }
    if (has("waiting")) {
      cells.waiting.textContent = row.waiting || "";
      cells.waiting.hidden = !row.waiting;
    }
    if (has("kind")) cells.kind.textContent = row.kind || "";
    if (has("labels")) {
      cells.labels.replaceChildren(...Object.entries(row.labels || {}).sort()
        .map(([k, v]) => h("span", "mlp-label", k + "=" + v)));
    }
    if (has("accelerator")) cells.accelerator.textContent = row.accelerator || "CPU";
    if (has("machine")) cells.machine.textContent = row.machine || "";
    if (has("trials")) cells.trials.textContent = row.trials || "";
    if (has("createTime")) {
      cells.age.title = row.createTime ? new Date(row.createTime * 1000).toLocaleString() : "";
    }
    tick(entry);
  }
  function tick(entry) {
    const { row, cells } = entry;
    const t = now();
    cells.age.textContent = row.createTime === null || row.createTime === undefined
      ? "" : formatSeconds(t - row.createTime);
    cells.duration.textContent = row.startTime === null || row.startTime === undefined
      ? "" : formatSeconds((row.endTime ?? t) - row.startTime);
  }
  function create(row) {
    const tr = h("tr", "mlp-row");
    tr.setAttribute("data-job-id", row.jobId);
    tr.tabIndex = 0;
    const cells = {};
    const idCell = h("td", "mlp-job-id");
    idCell.appendChild(h("span", "mlp-job-name", row.jobId));
    cells.error = h("div", "mlp-error");
    idCell.appendChild(cells.error);
    cells.waiting = h("div", "mlp-waiting");
    idCell.appendChild(cells.waiting);
    tr.appendChild(idCell);
    for (const [key] of COLUMNS.slice(1)) {
      const cls = { state: "mlp-state-cell", trials: "mlp-trial-count" }[key] || "mlp-" + key;
      cells[key] = h("td", cls);
      tr.appendChild(cells[key]);
    }
    const select = () => {
      model.set("selected", row.jobId);
      model.save_changes();
      markSelected();
    };
    tr.addEventListener("click", select);
    tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") select(); });
    const entry = { row, tr, cells };
    fill(entry, null);
    return entry;
  }
  function applyDelta(added, changed, removed) {
    for (const id of removed || []) {
      const e = held.get(id);
      if (e) { e.tr.remove(); held.delete(id); }
    }
    for (const [id, fields] of Object.entries(changed || {})) {
      const e = held.get(id);
      if (!e) continue;
      patch(e.row, fields);
      fill(e, fields);
    }
    for (const [id, row] of Object.entries(added || {})) {
      const old = held.get(id);
      if (old) old.tr.remove();
      const e = create({ ...row, jobId: row.jobId || id });
      held.set(id, e);
    }
    reorder(); // moves only the rows out of place
    applyFilter();
    markSelected();
  }
  function applySnapshot(rows) {
    // As a delta against what is held: rows that did not change keep their nodes.
    const added = {};
    const changed = {};
    const removed = [...held.keys()].filter((id) => !(id in rows));
    for (const [id, row] of Object.entries(rows)) {
      const e = held.get(id);
      if (!e) { added[id] = row; continue; }
      const fields = {};
      for (const f of new Set([...Object.keys(row), ...Object.keys(e.row)])) {
        if (JSON.stringify(row[f] ?? null) !== JSON.stringify(e.row[f] ?? null)) fields[f] = row[f] ?? null;
      }
      if (Object.keys(fields).length) changed[id] = fields;
    }
    applyDelta(added, changed, removed);
  }

  // ---- filters (done here, on the rows held)
  function applyFilter() {
    const states = model.get("state_filter") || [];
    const label = labelInput.value;
    let shown = 0;
    for (const e of held.values()) {
      const visible = matches(e.row, states, label);
      if (visible && e.tr.hidden) tick(e);
      e.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    count.textContent = shown + " of " + held.size + " job" + (held.size === 1 ? "" : "s");
    empty.hidden = shown > 0 || model.get("loading");
    empty.textContent = held.size ? "No job matches the filters." : "No jobs.";
  }
  function syncFilterControls() {
    const option = filterOption(model.get("state_filter") || []);
    stateSelect.value = option;
    stateSelect.lastChild.hidden = option !== "custom";
    if (typeof document === "undefined" || document.activeElement !== labelInput) {
      labelInput.value = model.get("label_filter") || "";
    }
    applyFilter();
  }
  stateSelect.addEventListener("change", () => {
    const v = stateSelect.value;
    if (v === "custom") return;
    model.set("state_filter", v === "" ? [] : GROUPS[v] ? [...GROUPS[v]] : [v]);
    model.save_changes();
    applyFilter();
  });
  let labelTimer = null;
  const saveLabel = () => {
    clearTimeout(labelTimer);
    if (labelInput.value !== (model.get("label_filter") || "")) {
      model.set("label_filter", labelInput.value);
      model.save_changes();
    }
  };
  labelInput.addEventListener("input", () => {
    applyFilter();
    clearTimeout(labelTimer);
    labelTimer = setTimeout(saveLabel, 400);
  });
  labelInput.addEventListener("change", saveLabel);
  labelInput.addEventListener("keydown", (ev) => { if (ev.key === "Enter") saveLabel(); });
  refresh.addEventListener("click", () => model.send({ type: "refresh" }));

  function markSelected() {
    const selected = model.get("selected") || "";
    for (const [id, e] of held) {
      e.tr.classList.toggle("mlp-selected", id === selected);
      e.tr.setAttribute("aria-selected", id === selected ? "true" : "false");
    }
  }
  function showStatus() {
    const text = model.get("status") || "";
    status.textContent = text;
    status.hidden = !text;
    loading.hidden = !model.get("loading");
    applyFilter();
  }

  // ---- messages
  function onMessage(msg) {
    if (!msg || typeof msg !== "object") return;
    if (typeof msg.now === "number") skew = msg.now - Date.now() / 1000;
    if (msg.type === "snapshot") {
      rev = msg.rev;
      waiting = false;
      applySnapshot(msg.rows || {});
    } else if (msg.type === "delta") {
      if (waiting || rev === null) return;
      if (msg.rev !== rev + 1) {
        waiting = true; // missed one: ask again, ignore deltas until the snapshot
        model.send({ type: "ready" });
        return;
      }
      rev = msg.rev;
      applyDelta(msg.added, msg.changed, msg.removed);
    }
  }

  const listeners = [
    ["msg:custom", onMessage], ["change:state_filter", syncFilterControls],
    ["change:label_filter", syncFilterControls], ["change:selected", markSelected],
    ["change:status", showStatus], ["change:loading", showStatus],
  ];
  syncFilterControls();
  showStatus();
  reorder();
  return run(model, root, listeners, () => { for (const e of held.values()) if (!e.tr.hidden) tick(e); },
    () => clearTimeout(labelTimer));
}

export default { render };
