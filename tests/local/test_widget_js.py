"""The widgets' ES modules (`server_ext/widgets/static/*.js`, `protocol.md`): each parses as an ES
module, and each behaves as the protocol says when driven by a fake anywidget model over a minimal
DOM (no browser): snapshots and deltas (rows keep their nodes), `rev` gaps answered with `ready`,
filters (the label filter is `state.visible`'s), the bounded log view, the inline cancel
confirmation, the log download (Server-Sent Events parsing), the sweep's best trial and plots.

Runs Node (a process), hence the `local` tier; skipped without `node`."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from server_ext.widgets import state

pytestmark = pytest.mark.local

WIDGETS = pathlib.Path(__file__).resolve().parents[2] / "server_ext" / "widgets"
STATIC = WIDGETS / "static"
MODULES = ("jobs_table.js", "job_detail.js", "sweep.js")
PARTS = {"jobs_table.js": ("common.js", "jobs_table.js"), "job_detail.js": ("common.js", "job_detail.js"),
         "sweep.js": ("common.js", "plot.js", "sweep.js")}  # each view's files, joined (views: `_esm`)
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="needs Node.js")


def as_mjs(tmp_path: pathlib.Path) -> pathlib.Path:
    """The modules as ``.mjs`` (the repository's package.json does not say "module"), each as the
    view serves it (`PARTS`: its files joined)."""
    out = tmp_path / "static"
    out.mkdir()
    for name in MODULES:
        text = "\n".join((STATIC / part).read_text() for part in PARTS.get(name, (name,)))
        (out / (name[:-3] + ".mjs")).write_text(text)
    return out


def test_views_name_these_modules():
    text = (WIDGETS / "views.py").read_text() + (WIDGETS / "widget_base.py").read_text()  # COMMON: widget_base
    parts = sorted({part for name in MODULES for part in PARTS.get(name, (name,))})
    assert sorted(re.findall(r'STATIC / "([\w.]+)"', text)) == parts
    from server_ext.widgets.views import JobDetail, JobsTable, SweepMonitor

    for view, name in ((JobsTable, "jobs_table.js"), (JobDetail, "job_detail.js"), (SweepMonitor, "sweep.js")):
        assert view._esm == "\n".join((STATIC / part).read_text() for part in PARTS[name])
    for name in parts:
        source = (STATIC / name).read_text()
        assert ("export default { render }" in source) == (name in MODULES)
        assert "Placeholder" not in source
        assert not re.search(r"https?://(?!www\.w3\.org/)", source), "no URL may be fetched (air-gapped)"
        assert not re.search(r"^\s*import\b|\bimport\(", source, re.M), "no imports: nothing to vendor"


@needs_node
@pytest.mark.parametrize("name", MODULES)
def test_module_parses(tmp_path, name):
    path = as_mjs(tmp_path) / (name[:-3] + ".mjs")
    done = subprocess.run([NODE, "--check", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


LABELS = [{}, {"team": "vision"}, {"team": "nlp", "prio": ""}, {"a=b": "c"}]
FILTERS = ["", "team", "team=vision", "team=", "prio", "prio=", "=x", "team=vision=2", "missing", "a"]


@needs_node
def test_modules_behave(tmp_path):
    static = as_mjs(tmp_path)
    (tmp_path / "shim.mjs").write_text(SHIM)
    (tmp_path / "run.mjs").write_text(RUN)
    cases = [{"labels": labels, "filter": f,
              "expected": bool(state.visible({"x": {"jobId": "x", "state": "RUNNING", "labels": labels}}, (), f))}
             for labels in LABELS for f in FILTERS]
    done = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(static)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LABEL_CASES": json.dumps(cases)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "widget js: ok" in done.stdout


# A minimal DOM (only what the modules use), a tiny selector engine for the documented DOM hooks, and
# a fake anywidget model (get/set/save_changes/on/off/send; `receive` plays a message from Python).
SHIM = r'''// A minimal DOM (only what the widget modules use) and a fake anywidget model.
class Node {
  constructor(nodeType) { this.nodeType = nodeType; this.parentNode = null; this.childNodes = []; }
  get firstChild() { return this.childNodes[0] || null; }
  get lastChild() { return this.childNodes[this.childNodes.length - 1] || null; }
  get nextSibling() {
    if (!this.parentNode) return null;
    const s = this.parentNode.childNodes;
    return s[s.indexOf(this) + 1] || null;
  }
  get children() { return this.childNodes.filter((n) => n.nodeType === 1); }
  insertBefore(node, ref) {
    if (node.nodeType === 11) { for (const c of [...node.childNodes]) this.insertBefore(c, ref); return node; }
    if (node.parentNode) node.parentNode.removeChild(node);
    const i = ref ? this.childNodes.indexOf(ref) : -1;
    if (ref && i < 0) throw new Error("insertBefore: not a child");
    if (i < 0) this.childNodes.push(node); else this.childNodes.splice(i, 0, node);
    node.parentNode = this;
    return node;
  }
  appendChild(node) { return this.insertBefore(node, null); }
  append(...nodes) { for (const n of nodes) this.appendChild(typeof n === "string" ? new Text(n) : n); }
  removeChild(node) {
    const i = this.childNodes.indexOf(node);
    if (i < 0) throw new Error("removeChild: not a child");
    this.childNodes.splice(i, 1);
    node.parentNode = null;
    return node;
  }
  remove() { if (this.parentNode) this.parentNode.removeChild(this); }
  replaceChildren(...nodes) { for (const c of [...this.childNodes]) this.removeChild(c); this.append(...nodes); }
  get textContent() { return this.childNodes.map((c) => c.textContent).join(""); }
  set textContent(v) { this.replaceChildren(); if (v !== "") this.appendChild(new Text(String(v))); }
}
class Text extends Node {
  constructor(data) { super(3); this.data = data; }
  get textContent() { return this.data; }
  set textContent(v) { this.data = String(v); }
}
class Fragment extends Node { constructor() { super(11); } }
const REFLECT = ["id", "title", "type", "placeholder", "href", "download"];
class Element extends Node {
  constructor(tag, ns) {
    super(1);
    this.tagName = tag.toUpperCase();
    this.localName = tag;
    this.namespaceURI = ns || "http://www.w3.org/1999/xhtml";
    this.attributes = new Map();
    this.listeners = {};
    this.style = {};
    this.value = "";
    this.checked = false;
    this.disabled = false;
    this.tabIndex = -1;
    this.scrollTop = 0;
  }
  get scrollHeight() { return this.childNodes.length * 10; }
  setAttribute(k, v) { this.attributes.set(k, String(v)); }
  getAttribute(k) { return this.attributes.has(k) ? this.attributes.get(k) : null; }
  hasAttribute(k) { return this.attributes.has(k); }
  removeAttribute(k) { this.attributes.delete(k); }
  get className() { return this.getAttribute("class") || ""; }
  set className(v) { this.setAttribute("class", v); }
  get classList() {
    const el = this;
    const list = () => el.className.split(/\s+/).filter(Boolean);
    const put = (l) => el.setAttribute("class", l.join(" "));
    return {
      contains: (c) => list().includes(c),
      add: (...cs) => put([...new Set([...list(), ...cs])]),
      remove: (...cs) => put(list().filter((x) => !cs.includes(x))),
      toggle: (c, force) => {
        const on = force === undefined ? !list().includes(c) : !!force;
        if (on) put([...new Set([...list(), c])]); else put(list().filter((x) => x !== c));
        return on;
      },
    };
  }
  get hidden() { return this.hasAttribute("hidden"); }
  set hidden(v) { if (v) this.setAttribute("hidden", ""); else this.removeAttribute("hidden"); }
  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); }
  removeEventListener(type, fn) { this.listeners[type] = (this.listeners[type] || []).filter((f) => f !== fn); }
  dispatchEvent(ev) { for (const fn of [...(this.listeners[ev.type] || [])]) fn(ev); return true; }
  fire(type, extra = {}) { return this.dispatchEvent({ type, target: this, preventDefault() {}, ...extra }); }
  click() { if (!this.disabled) { document.clicked.push(this); this.fire("click"); } }
  focus() { document.activeElement = this; }
}
for (const k of REFLECT) {
  Object.defineProperty(Element.prototype, k, {
    get() { return this.getAttribute(k) || ""; }, set(v) { this.setAttribute(k, v); },
  });
}

// Selectors: compound parts (tag, .class, [attr], [attr="v"]) joined by descendant spaces.
function parse(part) {
  const tag = (part.match(/^[a-zA-Z][\w-]*/) || [null])[0];
  const classes = [...part.matchAll(/\.([\w-]+)/g)].map((m) => m[1]);
  const attrs = [...part.matchAll(/\[([\w-]+)(?:="([^"]*)")?\]/g)].map((m) => [m[1], m[2]]);
  return (el) => el.nodeType === 1 && (!tag || el.localName.toLowerCase() === tag.toLowerCase())
    && classes.every((c) => el.classList.contains(c))
    && attrs.every(([k, v]) => (v === undefined ? el.hasAttribute(k) : el.getAttribute(k) === v));
}
function descendants(node, out = []) {
  for (const c of node.childNodes) { if (c.nodeType === 1) out.push(c); descendants(c, out); }
  return out;
}
export function $$(root, selector) {
  const parts = selector.trim().split(/\s+(?![^[]*\])/).map(parse);
  let found = [root];
  for (const match of parts) {
    const next = new Set();
    for (const base of found) for (const d of descendants(base)) if (match(d)) next.add(d);
    found = [...next];
  }
  return found;
}
export function $(root, selector) {
  const all = $$(root, selector);
  if (all.length !== 1) throw new Error(`${selector}: ${all.length} matches, wanted 1`);
  return all[0];
}
export function visible(el) {
  for (let n = el; n; n = n.parentNode) if (n.nodeType === 1 && n.hidden) return false;
  return true;
}

const documentElement = new Element("html");
const head = new Element("head");
const body = new Element("body");
documentElement.append(head, body);
globalThis.document = {
  head, body, documentElement, activeElement: null, clicked: [],
  createElement: (t) => new Element(t),
  createElementNS: (ns, t) => new Element(t, ns),
  createTextNode: (d) => new Text(d),
  createDocumentFragment: () => new Fragment(),
  getElementById: (id) => descendants(documentElement).find((e) => e.getAttribute("id") === id) || null,
};

export class FakeModel {
  constructor(traits) {
    this.traits = { ...traits };
    this.handlers = {};
    this.sent = [];
    this.saves = 0;
  }
  get(k) { return this.traits[k]; }
  set(k, v) {
    const old = this.traits[k];
    this.traits[k] = v;
    if (JSON.stringify(old) !== JSON.stringify(v)) this.emit("change:" + k, v);
  }
  save_changes() { this.saves += 1; }
  on(name, fn) { (this.handlers[name] ||= []).push(fn); }
  off(name, fn) { this.handlers[name] = (this.handlers[name] || []).filter((f) => f !== fn); }
  emit(name, ...args) { for (const fn of [...(this.handlers[name] || [])]) fn(...args); }
  send(msg) { this.sent.push(JSON.parse(JSON.stringify(msg))); }
  receive(msg) { this.emit("msg:custom", JSON.parse(JSON.stringify(msg)), []); }
  python(k, v) { this.set(k, v); } // a trait written by Python
  listeners() { return Object.values(this.handlers).reduce((n, l) => n + l.length, 0); }
}

export function mount(module, traits) {
  const model = new FakeModel(traits);
  const el = new Element("div");
  body.appendChild(el);
  const cleanup = module.default.render({ model, el });
  return { model, el, cleanup };
}
'''

# The scenarios, one block per module.
RUN = r'''import assert from "node:assert/strict";
import { $, $$, visible, mount } from "./shim.mjs";

const STATIC = process.argv[2];
const jobsTable = await import(STATIC + "/jobs_table.mjs");
const jobDetail = await import(STATIC + "/job_detail.mjs");
const sweep = await import(STATIC + "/sweep.mjs");
const T0 = Date.now() / 1000;
const cleanups = [];

function row(id, state, createTime, extra = {}) {
  return { jobId: id, state, kind: "job", labels: {}, createTime, startTime: null, endTime: null,
    accelerator: "", machine: "BASIC", trials: null, error: "", ...extra };
}

// ---------------------------------------------------------------- JobsTable
{
  const { model, el, cleanup } = mount(jobsTable, { project: "p", state_filter: [], label_filter: "", selected: "",
    status: "", loading: true });
  cleanups.push(cleanup);
  assert.deepEqual(model.sent, [{ type: "ready" }]);
  model.receive({ type: "delta", rev: 1, now: T0, added: { z: row("z", "QUEUED", T0) }, changed: {}, removed: [] });
  assert.equal($$(el, ".mlp-jobs-table tr.mlp-row").length, 0, "deltas before the snapshot are ignored");

  model.receive({ type: "snapshot", rev: 4, now: T0, rows: {
    a: row("a", "RUNNING", T0 - 300, { startTime: T0 - 65, accelerator: "NVIDIA_TESLA_A100 x1", labels: { team: "vision" } }),
    b: row("b", "SUCCEEDED", T0 - 100, { startTime: T0 - 90, endTime: T0 - 30 }),
    c: row("c", "QUEUED", T0 - 200, { labels: { team: "nlp" }, kind: "sweep", trials: "3/10" }),
  } });
  assert.equal($(el, 'tr[data-job-id="c"] .mlp-trial-count').textContent, "3/10");
  model.python("loading", false);
  const ids = () => $$(el, ".mlp-jobs-table tr.mlp-row").map((tr) => tr.getAttribute("data-job-id"));
  assert.deepEqual(ids(), ["b", "c", "a"], "newest first");
  const badge = $(el, '.mlp-jobs-table tr[data-job-id="a"] .mlp-state');
  assert.ok(badge.classList.contains("mlp-state-RUNNING"));
  assert.equal(badge.textContent, "RUNNING");
  assert.equal($(el, 'tr[data-job-id="a"] .mlp-duration').textContent, "1m 5s");
  assert.equal($(el, 'tr[data-job-id="b"] .mlp-duration').textContent, "1m 0s");
  assert.equal($(el, 'tr[data-job-id="a"] .mlp-age').textContent, "5m 0s");
  assert.equal($(el, 'tr[data-job-id="a"] .mlp-accelerator').textContent, "NVIDIA_TESLA_A100 x1");
  assert.equal($(el, 'tr[data-job-id="c"] .mlp-accelerator').textContent, "CPU");

  const trA = $(el, 'tr[data-job-id="a"]');
  const trB = $(el, 'tr[data-job-id="b"]');
  model.receive({ type: "delta", rev: 5, now: T0, added: { d: row("d", "PREPARING", T0 - 10) },
    changed: { a: { state: "FAILED", endTime: T0, error: "OOM" } }, removed: ["c"] });
  assert.deepEqual(ids(), ["d", "b", "a"]);
  assert.equal($(el, 'tr[data-job-id="a"]'), trA, "a changed row keeps its node");
  assert.equal($(el, 'tr[data-job-id="b"]'), trB, "an unchanged row keeps its node");
  assert.ok($(el, 'tr[data-job-id="a"] .mlp-state').classList.contains("mlp-state-FAILED"));
  assert.equal(trA.getAttribute("data-state"), "FAILED");
  assert.equal($(el, 'tr[data-job-id="a"] .mlp-error').textContent, "OOM");

  // a snapshot again keeps the nodes of the rows that did not change
  model.receive({ type: "snapshot", rev: 5, now: T0, rows: {
    a: { ...row("a", "FAILED", T0 - 300, { startTime: T0 - 65, endTime: T0, error: "OOM",
      accelerator: "NVIDIA_TESLA_A100 x1", labels: { team: "vision" } }) },
    b: row("b", "SUCCEEDED", T0 - 100, { startTime: T0 - 90, endTime: T0 - 30 }),
    d: row("d", "PREPARING", T0 - 10),
  } });
  assert.equal($(el, 'tr[data-job-id="b"]'), trB);
  assert.deepEqual(ids(), ["d", "b", "a"]);

  // missed message: ask again, ignore deltas until the snapshot
  model.sent.length = 0;
  model.receive({ type: "delta", rev: 7, now: T0, added: { x: row("x", "QUEUED", T0) }, changed: {}, removed: [] });
  assert.deepEqual(model.sent, [{ type: "ready" }]);
  model.receive({ type: "delta", rev: 8, now: T0, added: { y: row("y", "QUEUED", T0) }, changed: {}, removed: [] });
  assert.deepEqual(ids(), ["d", "b", "a"]);
  model.receive({ type: "snapshot", rev: 8, now: T0, rows: { y: row("y", "QUEUED", T0) } });
  assert.deepEqual(ids(), ["y"]);
  model.receive({ type: "delta", rev: 9, now: T0, added: {
    a: row("a", "RUNNING", T0 - 300, { labels: { team: "vision" } }),
    c: row("c", "CANCELLED", T0 - 200, { labels: { team: "nlp", prio: "" } }),
  }, changed: {}, removed: [] });
  assert.deepEqual(ids(), ["y", "c", "a"]);

  // filters
  const shown = () => $$(el, ".mlp-jobs-table tr.mlp-row").filter(visible).map((tr) => tr.getAttribute("data-job-id"));
  const select = $(el, "select.mlp-state-filter");
  select.value = "RUNNING";
  select.fire("change");
  assert.deepEqual(model.get("state_filter"), ["RUNNING"]);
  assert.deepEqual(shown(), ["a"]);
  select.value = "final";
  select.fire("change");
  assert.deepEqual(model.get("state_filter"), ["SUCCEEDED", "FAILED", "CANCELLED"]);
  assert.deepEqual(shown(), ["c"]);
  model.python("state_filter", []);
  assert.equal(select.value, "");
  assert.deepEqual(shown(), ["y", "c", "a"]);
  const input = $(el, "input.mlp-label-filter");
  input.value = "team=vision";
  input.fire("input");
  assert.deepEqual(shown(), ["a"]);
  input.fire("change");
  assert.equal(model.get("label_filter"), "team=vision");
  model.python("label_filter", "prio");
  assert.equal(input.value, "prio");
  assert.deepEqual(shown(), ["c"]);
  assert.equal($(el, ".mlp-count").textContent, "1 of 3 jobs");
  model.python("label_filter", "");

  // click → the `selected` trait
  const saves = model.saves;
  $(el, 'tr[data-job-id="c"]').click();
  assert.equal(model.get("selected"), "c");
  assert.ok(model.saves > saves);
  assert.ok($(el, 'tr[data-job-id="c"]').classList.contains("mlp-selected"));
  assert.ok(!$(el, 'tr[data-job-id="a"]').classList.contains("mlp-selected"));

  // status line
  model.python("status", "cannot reach the notebook server: boom");
  assert.ok(visible($(el, ".mlp-status")));
  model.python("status", "");
  assert.ok(!visible($(el, ".mlp-status")));

  // sorting by a header
  $(el, 'th[data-sort="jobId"]').click();
  assert.deepEqual(ids(), ["a", "c", "y"]);
  $(el, 'th[data-sort="jobId"]').click();
  assert.deepEqual(ids(), ["y", "c", "a"]);

  // the label filter is Python's `state.visible`
  const cases = JSON.parse(process.env.LABEL_CASES || "[]");
  for (const { labels, filter, expected } of cases) {
    assert.equal(jobsTable.matches({ state: "RUNNING", labels }, [], filter), expected,
      `labels ${JSON.stringify(labels)} filter ${JSON.stringify(filter)}`);
  }

  const before = model.listeners();
  cleanup();
  cleanups.pop();
  assert.equal(model.listeners(), 0, "cleanup removes every listener (had " + before + ")");
  assert.equal(el.childNodes.length, 0);
}

// ---------------------------------------------------------------- JobDetail
{
  const script = document.createElement("script");
  script.id = "jupyter-config-data";
  script.textContent = JSON.stringify({ baseUrl: "/user/alice/" });
  document.head.appendChild(script);
  const { model, el, cleanup } = mount(jobDetail, {
    project: "alice", job_id: "train_1", status: "", task: "master-replica-0", follow: true, log_cap: 5,
    log_url: "ml/v1/projects/alice/jobs/train_1/logs?task=master-replica-0&follow=false",
    job: { ...row("train_1", "RUNNING", T0 - 100, { startTime: T0 - 50 }), module: "trainer.task", args: [],
      tasks: ["master-replica-0", "worker-replica-0"] },
    timeline: [{ state: "QUEUED", time: T0 - 100 }, { state: "RUNNING", time: T0 - 50 }],
  });
  cleanups.push(cleanup);
  assert.deepEqual(model.sent, [{ type: "ready" }]);
  assert.equal(el.firstChild.getAttribute("data-job-id"), "train_1");
  assert.deepEqual($$(el, ".mlp-timeline li.mlp-timeline-entry").map((li) => li.getAttribute("data-state")),
    ["QUEUED", "RUNNING"]);
  assert.ok($(el, '.mlp-timeline-entry[data-state="RUNNING"] .mlp-state').classList.contains("mlp-state-RUNNING"));
  model.python("timeline", [...model.get("timeline"), { state: "SUCCEEDED", time: T0 }]);
  assert.equal($$(el, ".mlp-timeline-entry").length, 3);
  assert.equal($$(el, "select.mlp-task option").length, 2);

  const lines = () => $$(el, ".mlp-log .mlp-log-line");
  const seqs = () => lines().map((l) => Number(l.getAttribute("data-seq")));
  model.receive({ type: "log_append", task: "master-replica-0", seq: 1, lines: ["x"], total: 1 });
  assert.equal(lines().length, 0, "appends before the first reset are ignored");
  model.receive({ type: "log_reset", task: "master-replica-0", seq: 1, lines: ["a", "b", "c"], total: 3, truncated: 0 });
  assert.deepEqual(lines().map((l) => l.textContent), ["a", "b", "c"]);
  assert.ok(!visible($(el, ".mlp-log-earlier")));
  model.receive({ type: "log_append", task: "master-replica-0", seq: 4, lines: ["d"], total: 4 });
  assert.deepEqual(seqs(), [1, 2, 3, 4]);
  const log = $(el, ".mlp-log");
  assert.equal(log.scrollTop, log.scrollHeight, "follow keeps the view at the bottom");
  model.receive({ type: "log_append", task: "master-replica-0", seq: 5, lines: ["e", "f", "g"], total: 7 });
  assert.deepEqual(seqs(), [3, 4, 5, 6, 7], "at most log_cap lines, the newest");
  assert.ok(visible($(el, ".mlp-log-earlier")));
  assert.match($(el, ".mlp-log-earlier").textContent, /^2 earlier lines/);
  model.receive({ type: "log_append", task: "master-replica-0", seq: 8, lines: ["1", "2", "3", "4", "5", "6", "7"], total: 14 });
  assert.deepEqual(seqs(), [10, 11, 12, 13, 14]);
  assert.deepEqual(lines().map((l) => l.textContent), ["3", "4", "5", "6", "7"]);

  // a gap: ask again (once), ignore appends until the reset
  model.sent.length = 0;
  model.receive({ type: "log_append", task: "master-replica-0", seq: 20, lines: ["z"], total: 20 });
  model.receive({ type: "log_append", task: "master-replica-0", seq: 21, lines: ["z"], total: 21 });
  assert.deepEqual(model.sent, [{ type: "ready" }]);
  assert.deepEqual(seqs(), [10, 11, 12, 13, 14]);
  model.receive({ type: "log_reset", task: "master-replica-0", seq: 1200, lines: ["r1", "r2"], total: 1201, truncated: 0 });
  assert.deepEqual(seqs(), [1200, 1201]);
  assert.match($(el, ".mlp-log-earlier").textContent, /^1199 earlier lines/);
  model.receive({ type: "log_end", task: "master-replica-0", state: "SUCCEEDED" });
  assert.ok(visible($(el, ".mlp-log-end")));
  assert.match($(el, ".mlp-log-end").textContent, /SUCCEEDED/);

  // follow toggle
  const follow = $(el, "input.mlp-follow");
  assert.equal(follow.checked, true);
  follow.checked = false;
  follow.fire("change");
  assert.equal(model.get("follow"), false);
  model.python("follow", true);
  assert.equal(follow.checked, true);

  // task switch: the view clears, a reset for the old task is ignored
  const task = $(el, "select.mlp-task");
  task.value = "worker-replica-0";
  task.fire("change");
  assert.equal(model.get("task"), "worker-replica-0");
  assert.equal(lines().length, 0);
  model.receive({ type: "log_reset", task: "master-replica-0", seq: 1, lines: ["old"], total: 1, truncated: 0 });
  assert.equal(lines().length, 0);
  model.receive({ type: "log_reset", task: "worker-replica-0", seq: 1, lines: ["w"], total: 1, truncated: 0 });
  assert.deepEqual(lines().map((l) => l.textContent), ["w"]);

  // cancel, confirmed in the widget
  model.sent.length = 0;
  const box = $(el, ".mlp-cancel-box");
  assert.ok(!visible(box));
  $(el, "button.mlp-cancel").click();
  assert.deepEqual(model.sent, [{ type: "cancel" }]);
  model.receive({ type: "confirm_cancel", token: "t0k", message: "Cancel job train_1 (RUNNING)? Its replicas are stopped." });
  assert.ok(visible(box));
  assert.match($(el, ".mlp-cancel-message").textContent, /Cancel job train_1/);
  $(el, "button.mlp-cancel-dismiss").click();
  assert.ok(!visible(box));
  $(el, "button.mlp-cancel").click();
  model.receive({ type: "confirm_cancel", token: "t1k", message: "Cancel?" });
  $(el, "button.mlp-cancel-confirm").click();
  assert.deepEqual(model.sent, [{ type: "cancel" }, { type: "cancel" }, { type: "cancel_confirmed", token: "t1k" }]);
  assert.ok(!visible(box));
  model.receive({ type: "cancel_result", ok: false, message: "job train_1 already finished (SUCCEEDED)" });
  assert.equal($(el, ".mlp-cancel-result").getAttribute("data-ok"), "false");
  assert.match($(el, ".mlp-cancel-result").textContent, /already finished/);
  model.python("job", { ...model.get("job"), state: "SUCCEEDED", endTime: T0 });
  assert.equal($(el, "button.mlp-cancel").disabled, true);

  // the Server-Sent Events reader, fed in awkward chunks
  const sse = 'id: 1\ndata: {"seq": 1, "task": "t", "text": "one"}\n\n: keepalive\n\n'
    + 'id: 2\r\ndata: {"seq": 2, "task": "t", "text": "two: \\u00e9"}\r\n\r\nevent: end\ndata: {"state": "SUCCEEDED"}\n\n'
    + 'data: {"seq": 3, "task": "t", "text": "after end"}\n\n';
  const bytes = new TextEncoder().encode(sse);
  const chunks = [];
  for (let i = 0; i < bytes.length; i += 7) chunks.push(bytes.slice(i, i + 7));
  const response = () => ({
    ok: true, status: 200,
    body: { getReader() { let i = 0; return { read: async () => (i < chunks.length ? { done: false, value: chunks[i++] } : { done: true }), cancel: async () => {} }; } },
  });
  assert.deepEqual(await jobDetail.readLogEvents(response()), ["one", "two: é"]);

  // download: fetched from the server's base URL, saved as <jobId>-<task>.log
  const fetched = [];
  globalThis.fetch = async (url, opts) => { fetched.push([url, opts.credentials]); return response(); };
  const blobs = [];
  URL.createObjectURL = (blob) => { blobs.push(blob); return "blob:x"; };
  URL.revokeObjectURL = () => {};
  model.python("log_url", "ml/v1/projects/alice/jobs/train_1/logs?task=worker-replica-0&follow=false");
  document.clicked.length = 0;
  $(el, "button.mlp-download").click();
  for (let i = 0; i < 50 && !/saved/.test($(el, ".mlp-download-status").textContent); i++) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(fetched, [["/user/alice/ml/v1/projects/alice/jobs/train_1/logs?task=worker-replica-0&follow=false", "same-origin"]]);
  const anchor = document.clicked.find((n) => n.localName === "a");
  assert.equal(anchor.download, "train_1-worker-replica-0.log");
  assert.equal(await blobs[0].text(), "one\ntwo: é\n");
  assert.match($(el, ".mlp-download-status").textContent, /^2 lines saved/);

  cleanup();
  cleanups.pop();
  assert.equal(model.listeners(), 0);
}

// ---------------------------------------------------------------- SweepMonitor
{
  const trial = (id, state, objective, extra = {}) => ({ trialId: id, state, hyperparameters: { learning_rate: "0.0" + id },
    objective, step: objective === null ? null : 10, startTime: T0 - 60, endTime: state === "RUNNING" ? null : T0,
    stoppedEarly: false, best: false, ...extra });
  const { model, el, cleanup } = mount(sweep, { project: "p", job_id: "sw", status: "", metric_tag: "accuracy",
    goal: "MAXIMIZE", best_trial: "", job: row("sw", "RUNNING", T0 - 100, { kind: "sweep", trials: "2/4" }) });
  cleanups.push(cleanup);
  assert.deepEqual(model.sent, [{ type: "ready" }]);
  model.python("best_trial", "2");
  model.receive({ type: "snapshot", rev: 3, now: T0, trials: {
    1: trial("1", "SUCCEEDED", 0.8, { hyperparameters: { learning_rate: "0.012345678901234567" } }),
    2: trial("2", "SUCCEEDED", 0.9, { best: true }), 3: trial("3", "RUNNING", null),
  }, series: { 1: [[1, 0.5], [2, 0.8]], 2: [[1, 0.6], [2, 0.9]], 3: [[1, 0.4]] } });
  const order = () => $$(el, ".mlp-trials tr.mlp-trial").map((tr) => tr.getAttribute("data-trial-id"));
  assert.deepEqual(order(), ["2", "1", "3"], "best objective first, none last");
  assert.equal($$(el, ".mlp-plot circle.mlp-trial-point").length, 2);
  assert.equal($(el, ".mlp-plot circle.mlp-trial-point.mlp-best").getAttribute("data-trial-id"), "2");
  assert.equal($(el, ".mlp-trials tr.mlp-best").getAttribute("data-trial-id"), "2");
  assert.equal($$(el, ".mlp-curves-plot path.mlp-trial-curve").length, 3);
  assert.equal($(el, "path.mlp-trial-curve.mlp-best").getAttribute("data-trial-id"), "2");
  assert.match($(el, ".mlp-best-summary").textContent, /trial 2, accuracy 0.9/);
  assert.equal($(el, 'th[data-sort="objective"]').textContent, "accuracy");
  assert.equal($(el, 'th[data-sort="objective"]').getAttribute("aria-sort"), "descending");
  assert.equal($$(el, 'th[data-sort="hp:learning_rate"]').length, 1);
  assert.equal($(el, 'tr[data-trial-id="1"] .mlp-hp').textContent, "0.012346", "five significant digits, not 17");

  $(el, 'th[data-sort="objective"]').click();
  assert.deepEqual(order(), ["1", "2", "3"], "ascending; still none last");
  assert.equal($(el, 'th[data-sort="objective"]').getAttribute("aria-sort"), "ascending");
  $(el, 'th[data-sort="objective"]').click();
  assert.deepEqual(order(), ["2", "1", "3"]);

  // live: trial 3 finishes best, a new trial starts, new curve points are appended
  const tr1 = $(el, 'tr[data-trial-id="1"]');
  model.receive({ type: "delta", rev: 4, now: T0, added: { 4: trial("4", "RUNNING", null) },
    changed: { 2: { best: false }, 3: { state: "SUCCEEDED", objective: 0.95, step: 10, endTime: T0, best: true } },
    removed: [], series: { 3: [[2, 0.95]], 4: [[1, 0.3]] } });
  model.python("best_trial", "3");
  assert.deepEqual(order(), ["3", "2", "1", "4"]);
  assert.equal($(el, 'tr[data-trial-id="1"]'), tr1, "rows are kept, not rebuilt");
  assert.equal($(el, ".mlp-trials tr.mlp-best").getAttribute("data-trial-id"), "3");
  assert.equal($(el, ".mlp-plot circle.mlp-trial-point.mlp-best").getAttribute("data-trial-id"), "3");
  assert.equal($$(el, ".mlp-plot circle.mlp-trial-point").length, 3);
  assert.equal($$(el, "path.mlp-trial-curve").length, 4);
  assert.equal($(el, 'path.mlp-trial-curve[data-trial-id="3"]').getAttribute("d").split("L").length, 2, "two points");

  // missed delta → ready
  model.sent.length = 0;
  model.receive({ type: "delta", rev: 6, now: T0, added: {}, changed: {}, removed: ["1"], series: {} });
  assert.deepEqual(model.sent, [{ type: "ready" }]);
  assert.equal(order().length, 4);

  // a row click opens the trial's log
  model.sent.length = 0;
  $(el, 'tr[data-trial-id="2"]').click();
  assert.deepEqual(model.sent, [{ type: "open_trial", trialId: "2" }]);
  assert.ok($(el, 'tr[data-trial-id="2"]').classList.contains("mlp-open"));

  model.python("goal", "MINIMIZE");
  model.receive({ type: "snapshot", rev: 6, now: T0, trials: { 1: trial("1", "SUCCEEDED", 0.8, { best: true }),
    2: trial("2", "SUCCEEDED", 0.9) }, series: {} });
  model.python("best_trial", "1");
  assert.deepEqual(order(), ["2", "1"], "the user's sort (objective, descending) stays");
  assert.equal($(el, ".mlp-trials tr.mlp-best").getAttribute("data-trial-id"), "1");
  assert.equal($$(el, "path.mlp-trial-curve").length, 0);
  assert.equal($$(el, ".mlp-curves-plot text.mlp-plot-empty").length, 1);

  cleanup();
  cleanups.pop();
  assert.equal(model.listeners(), 0);
}

// a MINIMIZE sweep: smallest objective first by default
{
  const { model, el, cleanup } = mount(sweep, { project: "p", job_id: "sw", status: "", metric_tag: "loss",
    goal: "MINIMIZE", best_trial: "2", job: {} });
  const t = (id, objective) => ({ trialId: id, state: "SUCCEEDED", hyperparameters: {}, objective, step: 1,
    startTime: T0 - 9, endTime: T0, stoppedEarly: false, best: id === "2" });
  model.receive({ type: "snapshot", rev: 0, now: T0, trials: { 1: t("1", 0.5), 2: t("2", 0.1), 3: t("3", null),
    10: t("10", 0.5) }, series: {} });
  assert.deepEqual($$(el, ".mlp-trials tr.mlp-trial").map((tr) => tr.getAttribute("data-trial-id")), ["2", "1", "10", "3"]);
  assert.equal($(el, 'th[data-sort="objective"]').getAttribute("aria-sort"), "ascending");
  cleanup();
}

for (const c of cleanups) c();
console.log("widget js: ok");
process.exit(0); // the download's revoke timer would keep Node alive 10 s
'''
