// What the three widget views share (plain ES2020, no dependencies: clusters are air-gapped). Not a
// module of its own: views.py serves it before each view's file (and plot.js) as one ES module
// (anywidget takes one), so the views use these names as their own.
//
// - FINAL: the states a job does not leave;
// - injectStyle(id, css): the view's CSS and BADGE_CSS (the .mlp-state badge), once per page; every
//   rule is scoped to a view's root (.mlp-jobs, .mlp-job-detail, .mlp-sweep), so nothing leaks into
//   the page around it (the JupyterLab panel uses some of the same class names);
// - h(tag, cls, text), button(cls, text): elements, text only (job data never becomes HTML);
// - patch(row, fields): a delta's changed fields applied to a row;
// - badge(state): span.mlp-state.mlp-state-<STATE> (the state badge of all three views);
// - formatSeconds(s): "45s", "3m 12s", "2h 05m", "3d 4h"; "" for null;
// - keepAlive(model): the views' liveness messages (protocol.md, "Liveness");
// - run(model, root, listeners, tick, stop): a drawn view's life (events, ticks, `ready`, liveness).

const FINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];

const BADGE_CSS = `
:is(.mlp-jobs, .mlp-job-detail, .mlp-sweep) .mlp-state {
  display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 0.85em;
  font-weight: 600; color: #fff; background: #757575; }
:is(.mlp-jobs, .mlp-job-detail, .mlp-sweep) .mlp-state-RUNNING { background: var(--jp-brand-color1, #1976d2); }
:is(.mlp-jobs, .mlp-job-detail, .mlp-sweep) .mlp-state-SUCCEEDED { background: var(--jp-success-color1, #388e3c); }
:is(.mlp-jobs, .mlp-job-detail, .mlp-sweep) .mlp-state-FAILED { background: var(--jp-error-color1, #d32f2f); }
:is(.mlp-jobs, .mlp-job-detail, .mlp-sweep) .mlp-state-CANCELLING,
:is(.mlp-jobs, .mlp-job-detail, .mlp-sweep) .mlp-state-CANCELLED { background: var(--jp-warn-color1, #f57c00); }
`;

/** Adds a view's `css` (element id `id`) and the badge CSS to the page, each once. */
function injectStyle(id, css) {
  if (typeof document === "undefined") return;
  for (const [key, text] of [["mlp-badge-style", BADGE_CSS], [id, css]]) {
    if (document.getElementById(key)) continue;
    const style = document.createElement("style");
    style.id = key;
    style.textContent = text;
    document.head.appendChild(style);
  }
}

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

/** A delta's `changed` fields applied to a row (protocol.md: null for a field the row lacks is no change). */
function patch(row, fields) {
  for (const [f, v] of Object.entries(fields)) {
    if (v === null && !(f in row)) continue;
    row[f] = v;
  }
}

function button(cls, text) {
  const b = h("button", cls, text);
  b.type = "button";
  return b;
}

function badge(state) {
  return h("span", "mlp-state mlp-state-" + (state || "UNKNOWN"), state || "?");
}

/** "45s", "3m 12s", "2h 05m", "3d 4h"; "" for null. */
export function formatSeconds(s) {
  if (s === null || s === undefined || !isFinite(s)) return "";
  s = Math.max(0, Math.floor(s));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
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

/**
 * A view's life once drawn: `listeners` ([[event, fn], …]) on the model, `tick` every second, a
 * `ready` to Python, the liveness messages. Returns anywidget's cleanup: all of it undone, then
 * `stop()` (the view's own timers), then `root` removed.
 */
function run(model, root, listeners, tick, stop = () => {}) {
  for (const [name, fn] of listeners) model.on(name, fn);
  const timer = setInterval(tick, 1000);
  model.send({ type: "ready" });
  const stopAlive = keepAlive(model);
  return () => {
    stopAlive();
    clearInterval(timer);
    stop();
    for (const [name, fn] of listeners) model.off(name, fn);
    root.remove();
  };
}
