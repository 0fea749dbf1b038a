"""The sweep monitor as a newcomer reads it (issue 20, item 6): a plot of the objective against each
hyperparameter (Katib's main view; the spec's axes from `state.hp_axes`: log scale, categories, the
searched range), a legend on the step curves, and a trial with one report shown as a dot. Drives
the real ES module (`static/sweep.js`) over `test_widget_js`'s minimal DOM and fake anywidget
model, with the axes Python computes for a sweep spec in AI Platform's shape.

Runs Node (a process), hence the `local` tier; skipped without `node`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from server_ext.widgets import state
from tests.local.test_widget_js import NODE, SHIM, as_mjs, needs_node

pytestmark = pytest.mark.local

SPEC = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "Taxi Model Accuracy", "maxTrials": 6, "params": [
    {"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1,
     "scaleType": "UNIT_LOG_SCALE"},
    {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["sgd", "adam", "ftrl"]},
    {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 5, "scaleType": "UNIT_LINEAR_SCALE"},
    {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [16, 64, 32]},
]}

RUN = r'''import assert from "node:assert/strict";
import { $, $$, visible, mount } from "./shim.mjs";

const sweep = await import(process.argv[2] + "/sweep.mjs");
const AXES = JSON.parse(process.env.HP_AXES);
const T0 = Date.now() / 1000;
const trial = (id, objective, hp, extra = {}) => ({ trialId: id, state: objective === null ? "RUNNING" : "SUCCEEDED",
  hyperparameters: hp, objective, step: objective === null ? null : 10, startTime: T0 - 60,
  endTime: objective === null ? null : T0, stoppedEarly: false, best: false, ...extra });
const { model, el, cleanup } = mount(sweep, { project: "p", job_id: "sw", status: "", metric_tag: "Taxi Model Accuracy",
  goal: "MAXIMIZE", best_trial: "2", hp_axes: AXES, job: {} });
model.receive({ type: "snapshot", rev: 1, now: T0, trials: {
  1: trial("1", 0.7, { learning_rate: "0.001", optimizer: "sgd", layers: "2", batch: "16" }),
  2: trial("2", 0.9, { learning_rate: "0.01", optimizer: "adam", layers: "4", batch: "64" }, { best: true }),
  3: trial("3", null, { learning_rate: "0.05", optimizer: "ftrl", layers: "5", batch: "32" }),
}, series: { 1: [[1, 0.5], [2, 0.7]], 2: [[1, 0.6], [2, 0.9]], 3: [[1, 0.4]] } });

// 1. the objective against each hyperparameter, in the spec's order
const plots = $$(el, ".mlp-hp-plots svg.mlp-hp-plot");
assert.deepEqual(plots.map((p) => p.getAttribute("data-hp")), ["learning_rate", "optimizer", "layers", "batch"]);
assert.ok(visible($(el, ".mlp-hp-plots")));
assert.equal($(el, ".mlp-hp-title").textContent, "Taxi Model Accuracy by hyperparameter");
for (const p of plots) {
  assert.equal($$(p, "circle.mlp-hp-point").length, 2, "one point per trial with an objective");
  assert.equal($(p, "circle.mlp-hp-point.mlp-best").getAttribute("data-trial-id"), "2");
}
const cx = (hp, id) => Number($(el, `svg.mlp-hp-plot[data-hp="${hp}"] circle.mlp-hp-point[data-trial-id="${id}"]`).getAttribute("cx"));
const cy = (hp, id) => Number($(el, `svg.mlp-hp-plot[data-hp="${hp}"] circle.mlp-hp-point[data-trial-id="${id}"]`).getAttribute("cy"));
// log scale over the searched range 1e-4..1e-1: 1e-3 and 1e-2 split it in thirds
const axisText = (hp) => $$(el, `svg.mlp-hp-plot[data-hp="${hp}"] text`).map((t) => t.textContent);
assert.ok(axisText("learning_rate").includes("learning_rate (log scale)"));
assert.ok(["1e-4", "0.001", "0.01", "0.1"].every((t) => axisText("learning_rate").includes(t)), axisText("learning_rate"));
const [a, b] = [cx("learning_rate", "1"), cx("learning_rate", "2")];
assert.ok(b > a, "larger learning rate to the right");
assert.ok(cy("learning_rate", "2") < cy("learning_rate", "1"), "a better objective is higher");
// categories in the spec's order, each labelled
assert.ok(["sgd", "adam", "ftrl"].every((c) => axisText("optimizer").includes(c)));
assert.ok(cx("optimizer", "1") < cx("optimizer", "2"), "sgd before adam, as the spec lists them");
// a click on a point opens the trial
model.sent.length = 0;
$(el, 'svg.mlp-hp-plot[data-hp="layers"] circle.mlp-hp-point[data-trial-id="1"]').click();
assert.deepEqual(model.sent, [{ type: "open_trial", trialId: "1" }]);

// 2. the curves' legend: one entry per trial with points, its colour, the best marked
const items = $$(el, ".mlp-legend .mlp-legend-item");
assert.deepEqual(items.map((i) => i.getAttribute("data-trial-id")), ["1", "2", "3"]);
assert.equal($(el, ".mlp-legend .mlp-legend-item.mlp-best").textContent, "trial 2 (best)");
for (const item of items) {
  const id = item.getAttribute("data-trial-id");
  const stroke = $(el, `path.mlp-trial-curve[data-trial-id="${id}"]`).getAttribute("stroke");
  assert.equal($(item, ".mlp-swatch").style.background, stroke, "the legend's colour is the curve's");
}
assert.equal(new Set(items.map((i) => $(i, ".mlp-swatch").style.background)).size, 3);

// 3. a trial with one report is a dot, big enough to see
const dot = $(el, "svg.mlp-curves-plot circle.mlp-trial-dot");
assert.equal(dot.getAttribute("data-trial-id"), "3");
assert.ok(Number(dot.getAttribute("r")) >= 3);
assert.equal(dot.getAttribute("fill"), $(el, 'path.mlp-trial-curve[data-trial-id="3"]').getAttribute("stroke"));
// …until it reports again: then a line, no dot
model.receive({ type: "delta", rev: 2, now: T0, added: {}, changed: {}, removed: [], series: { 3: [[2, 0.45]] } });
assert.equal($$(el, "circle.mlp-trial-dot").length, 0);

// 4. an axis Python inferred for a hyperparameter the spec lacks (state.hp_axes with trials)
model.receive({ type: "delta", rev: 3, now: T0, added: { 4: trial("4", 0.8, { learning_rate: "0.002", optimizer: "sgd",
  layers: "1", batch: "16", seed: "7" }) }, changed: {}, removed: [], series: {} });
model.python("hp_axes", [...AXES, { name: "seed", scale: "linear", min: 7, max: 7 }]);
assert.deepEqual($$(el, "svg.mlp-hp-plot").map((p) => p.getAttribute("data-hp")),
  ["learning_rate", "optimizer", "layers", "batch", "seed"]);
assert.equal($$(el, 'svg.mlp-hp-plot[data-hp="seed"] circle.mlp-hp-point').length, 1);

// 5. no objective yet: each plot says so; no hyperparameters at all: no section
model.receive({ type: "snapshot", rev: 4, now: T0, trials: { 1: trial("1", null, { learning_rate: "0.01" }) }, series: {} });
assert.equal($$(el, "circle.mlp-hp-point").length, 0);
assert.match($(el, 'svg.mlp-hp-plot[data-hp="learning_rate"] text.mlp-plot-empty').textContent, /no Taxi Model Accuracy yet/);
model.python("hp_axes", []);
model.receive({ type: "snapshot", rev: 5, now: T0, trials: { 1: trial("1", 0.5, {}) }, series: {} });
assert.ok(!visible($(el, ".mlp-hp-plots")));
cleanup();
assert.equal(model.listeners(), 0);
console.log("sweep ux: ok");
process.exit(0);
'''


def test_hp_axes_follow_the_spec():
    job = {"trainingInput": {"hyperparameters": SPEC}}
    assert state.hp_axes(job) == [
        {"name": "learning_rate", "scale": "log", "min": 0.0001, "max": 0.1},
        {"name": "optimizer", "scale": "category", "categories": ["sgd", "adam", "ftrl"]},
        {"name": "layers", "scale": "linear", "min": 1.0, "max": 5.0},
        {"name": "batch", "scale": "linear", "min": 16.0, "max": 64.0}]
    broken = {"trainingInput": {"hyperparameters": {"params": [
        {"parameterName": "a", "type": "DOUBLE", "minValue": 0, "maxValue": 1, "scaleType": "UNIT_LOG_SCALE"},
        {"parameterName": "b", "type": "DOUBLE", "minValue": "x"}, {"type": "INTEGER"}, "junk",
        {"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": []}, {"parameterName": "a", "type": "DISCRETE"}]}}}
    assert state.hp_axes(broken) == [{"name": "a", "scale": "linear", "min": 0.0, "max": 1.0}]  # log of 0: linear
    assert state.hp_axes({"trainingInput": {}}) == [] and state.hp_axes({}) == []
    # a hyperparameter the trials have and the spec lacks (a native Katib Experiment's): inferred
    trials = {"1": {"hyperparameters": {"learning_rate": "0.01", "seed": "7", "opt": "adam"}},
              "2": {"hyperparameters": {"learning_rate": "0.02", "seed": "3.5", "opt": "sgd"}},
              "3": {"hyperparameters": {"seed": "", "opt": None}}}
    assert state.hp_axes(job, trials)[4:] == [
        {"name": "opt", "scale": "category", "categories": ["adam", "sgd"]},
        {"name": "seed", "scale": "linear", "min": 3.5, "max": 7.0}]
    assert state.hp_axes({}, trials)[0]["name"] == "learning_rate"


@needs_node
def test_the_sweep_monitor_plots_objective_by_hyperparameter_with_a_legend_and_dots(tmp_path):
    static = as_mjs(tmp_path)
    (tmp_path / "shim.mjs").write_text(SHIM)
    (tmp_path / "run.mjs").write_text(RUN)
    axes = state.hp_axes({"trainingInput": {"hyperparameters": SPEC}})
    done = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(static)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HP_AXES": json.dumps(axes)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sweep ux: ok" in done.stdout
