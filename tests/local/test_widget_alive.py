"""The views' liveness (`protocol.md`, "Liveness"), in each of the three ES modules driven by a fake
anywidget model over the minimal DOM of `test_widget_js` (Node, no browser): a shown view sends
``{"type": "alive"}`` every ``ALIVE_MS`` while its page is visible and nothing while it is hidden;
a page shown again says so at once; the view's cleanup stops the timer and the listener.

Runs Node (a process), hence the `local` tier; skipped without `node`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.local.test_widget_js import MODULES, NODE, SHIM, as_mjs, needs_node

pytestmark = pytest.mark.local

RUN = r'''import assert from "node:assert/strict";
import { mount } from "./shim.mjs";

// timers under the test's control: setInterval records, `fire(ms)` runs those of that period
const timers = new Map();
let next = 1;
globalThis.setInterval = (fn, ms) => { const id = next++; timers.set(id, { fn, ms }); return id; };
globalThis.clearInterval = (id) => { timers.delete(id); };
const fire = (ms) => { for (const t of [...timers.values()]) if (t.ms === ms) t.fn(); };
const alivePeriods = () => [...timers.values()].filter((t) => t.ms >= 5000).map((t) => t.ms);

// a page that can be hidden and shown
const listeners = {};
document.visibilityState = "visible";
document.addEventListener = (type, fn) => { (listeners[type] ||= []).push(fn); };
document.removeEventListener = (type, fn) => { listeners[type] = (listeners[type] || []).filter((f) => f !== fn); };
const show = (state) => { document.visibilityState = state; for (const fn of listeners.visibilitychange || []) fn(); };

const STATIC = process.argv[2];
const TRAITS = {
  "jobs_table": { project: "p", state_filter: [], label_filter: "", selected: "", status: "", loading: false },
  "job_detail": { project: "p", job_id: "j", job: {}, timeline: [], task: "master-replica-0", follow: true,
                  log_cap: 100, log_url: "", status: "" },
  "sweep": { project: "p", job_id: "sw", job: {}, metric_tag: "m", goal: "MAXIMIZE", best_trial: "", status: "" },
};
for (const name of JSON.parse(process.env.MODULES)) {
  const module = await import(STATIC + "/" + name.replace(".js", ".mjs"));
  const { model, cleanup } = mount(module, TRAITS[name.replace(".js", "")]);
  const alive = () => model.sent.filter((m) => m.type === "alive").length;
  assert.deepEqual(model.sent, [{ type: "ready" }], name + ": only `ready` at first");
  const periods = alivePeriods();
  assert.equal(periods.length, 1, name + ": one alive timer");
  const ms = periods[0];
  assert.ok(ms >= 5000 && ms <= 15000, name + ": period " + ms);
  fire(ms); fire(ms);
  assert.equal(alive(), 2, name + ": alive per period while visible");
  show("hidden");
  assert.equal(alive(), 2, name + ": hiding says nothing");
  fire(ms); fire(ms);
  assert.equal(alive(), 2, name + ": nothing while hidden");
  show("visible");
  assert.equal(alive(), 3, name + ": shown again: alive at once");
  assert.deepEqual(model.sent.filter((m) => m.type !== "alive"), [{ type: "ready" }], name);
  cleanup();
  assert.deepEqual(alivePeriods(), [], name + ": cleanup stops the timer");
  assert.equal((listeners.visibilitychange || []).length, 0, name + ": cleanup removes the listener");
  show("hidden"); show("visible"); fire(ms);
  assert.equal(alive(), 3, name + ": nothing after cleanup");
  timers.clear();
}
console.log("alive js: ok");
process.exit(0);
'''


@needs_node
def test_views_say_they_are_alive_while_shown_and_visible(tmp_path):
    static = as_mjs(tmp_path)
    (tmp_path / "shim.mjs").write_text(SHIM)
    (tmp_path / "run.mjs").write_text(RUN)
    done = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(static)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MODULES": json.dumps(list(MODULES))})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "alive js: ok" in done.stdout
