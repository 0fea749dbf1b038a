"""``hyperparameterMetricTag`` as AI Platform takes it (a free string: ``Taxi Model Accuracy``) on
Katib: the tag is mapped to a name both of Katib's collectors read (`katib_trial.metric_name`), the
Experiment stays valid against Katib's reference schemas, the trial program feeds Katib the mapped
name from what the trainer reports under the user's tag (cloudml-hypertune's file or
``<tag>=<number>`` on stdout), and every answer (``trainingOutput``, trial metrics) shows the
user's tag. The configs are written in the shape of Google's sample ``hptuning_config.yaml``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from server_ext.jobs.kube import katib, katib_trial, metric_reports, sweep_status
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import plan_job
from tests.unit.test_job_kubeflow import PLAN_SETTINGS, SETTINGS, kubernetes_expand
from tests.unit.test_katib import _main_containers, check_experiment

pytestmark = pytest.mark.unit

KATIB_STDOUT_NAME = re.compile(r"[\w|-]+", re.ASCII)  # the name group of Katib's default StdOut filter

# Tags people give AI Platform, each in a config shaped like Google's samples
TAGS = [
    "Taxi Model Accuracy",
    "training/hptuning/metric",  # AI Platform's default tag
    "accuracy",
    "val/loss",
    "mean_absolute_error",
    "RMSE (test set)",
    "top-1 accuracy %",
    "eval/Loss: cross entropy",
    "précision moyenne",
    "精度",
    "metric=value;other",  # Katib's "-m" list separator and StdOut's "=" inside the tag
    'model\'s "best" $HOME `id`',  # quotes and shell text reach no shell
    " accuracy ",
    "a" * 256,
]

CONFIG = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-8
  masterConfig:
    imageUri: gcr.io/my-project/taxi-trainer:latest
    containerCommand: [{python}, {trainer}]
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: {tag}
    maxTrials: 4
    maxParallelTrials: 2
    enableTrialEarlyStopping: True
    params:
    - parameterName: first-layer-size
      type: INTEGER
      minValue: 50
      maxValue: 500
      scaleType: UNIT_LINEAR_SCALE
    - parameterName: learning_rate
      type: DOUBLE
      minValue: 0.0001
      maxValue: 0.1
      scaleType: UNIT_LOG_SCALE
"""

# reports through cloudml-hypertune's file (its JSON shape, the user's tag as the key) and prints the tag
TRAINER = """\
import json, os, sys, time
tag = os.environ["MY_TAG"]
path = os.environ["CLOUD_ML_HP_METRIC_FILE"]
kept = []
for step, value in ((10, 0.5), (20, 0.75)):
    kept.append({"timestamp": 1700000000.0 + step, "trial": "1", tag: str(value), "global_step": str(step)})
    with open(path, "w") as f:
        for m in kept:
            f.write(json.dumps(m, sort_keys=True) + "\\n")
    time.sleep(0.3)
print(f"final {tag}=0.875", flush=True)
"""


def sweep_plan(tag: str, tmp_path):
    trainer = tmp_path / "train.py"
    trainer.write_text(TRAINER)
    config = yaml.safe_load(CONFIG.format(tag=json.dumps(tag), python=json.dumps(sys.executable),
                                          trainer=json.dumps(str(trainer))))
    doc = {"jobId": "taxi_tuning", "trainingInput": {**config["trainingInput"], "region": "us-central1"}}
    return plan_job(parse_job(doc), PLAN_SETTINGS, project="taxi", owner="alice@example.com")


def run_trial(container: dict, tag: str, tmp_path) -> subprocess.CompletedProcess:
    """The trial container's command as the kubelet runs it after Katib's substitution, with
    Katib's metrics directory (``/var/log/katib``) under `tmp_path`."""
    env = {e["name"]: e["value"] for e in container["env"]}
    env = {k: json.loads(json.dumps(v).replace("${trialParameters.first-layer-size}", "64")
                         .replace("${trialParameters.learning_rate}", "0.01")) for k, v in env.items()}
    env = {k: kubernetes_expand(v, {}).replace("/var/log/katib", str(tmp_path / "katib")) for k, v in env.items()}
    env.update(PATH=os.environ["PATH"], MY_TAG=tag)
    argv = [kubernetes_expand(w, env) for w in container["command"]]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("tag, name", [
    ("accuracy", "accuracy"), ("val_loss", "val_loss"), ("top-5", "top-5"), ("a" * 64, "a" * 64), ("--x--", "--x--"),
    ("Taxi Model Accuracy", "taxi-model-accuracy-#"), ("training/hptuning/metric", "training-hptuning-metric-#"),
    ("précision moyenne", "precision-moyenne-#"), ("精度", "metric-#"), ("a" * 65, "a" * 40 + "-#"), ("(x)", "x-#"),
])
def test_the_katib_name_of_a_tag(tag, name):
    """Kept when Katib can collect it as it is; else a slug and 12 hex digits of the tag's sha256 (#)."""
    got = katib_trial.metric_name(tag)
    assert re.fullmatch(re.escape(name).replace("\\#", "[0-9a-f]{12}"), got), got
    assert katib_trial.METRIC_NAME.fullmatch(got) and KATIB_STDOUT_NAME.fullmatch(got)
    assert katib_trial.metric_name(tag) == got  # deterministic


def test_different_tags_never_share_a_katib_name():
    tags = TAGS + ["taxi model accuracy", "Taxi  Model Accuracy", "Taxi-Model-Accuracy", "taxi_model_accuracy",
                   "TAXI MODEL ACCURACY", "val loss", "val-loss", "val.loss", "a" * 255, "a" * 65]
    names = [katib_trial.metric_name(t) for t in tags]
    assert len(set(names)) == len(tags)


@pytest.mark.parametrize("tag", TAGS)
def test_a_google_shaped_config_with_the_tag_runs_on_katib(tag, tmp_path):
    plan = sweep_plan(tag, tmp_path)
    assert plan.sweep.metric == tag
    manifest = katib.experiment_manifest(plan, SETTINGS)
    check_experiment(manifest)  # the Experiments CRD, Katib's swagger, the trial job's schema
    name = katib_trial.metric_name(tag)
    assert manifest["spec"]["objective"]["objectiveMetricName"] == name
    assert manifest["spec"]["objective"]["metricStrategies"] == [{"name": name, "value": "latest"}]
    assert manifest["spec"]["metricsCollectorSpec"]["source"]["fileSystemPath"]["path"] == katib_trial.METRICS_FILE

    (main,) = _main_containers(manifest)
    done = run_trial(main, tag, tmp_path)
    assert done.returncode == 0, done.stderr
    collected = [json.loads(x) for x in (tmp_path / "katib" / "metrics.json").read_text().splitlines()]
    # what Katib's File collector reads: the mapped name only, the hypertune reports then the printed one
    assert [m[name] for m in collected] == ["0.5", "0.75", "0.875"]
    # RFC 3339 times, in order (Katib v0.19 misreads a number's fraction of a second: kubeflow/katib#2672)
    stamps = [m["timestamp"] for m in collected]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", t) for t in stamps) and stamps == sorted(stamps)
    if name != tag:
        assert all(tag not in m for m in collected)
    # the pod log has the user's tag, as the trainer reported it: the trial's metric series
    series = metric_reports.series(done.stdout, tag)
    assert [(p["trainingStep"], p["objectiveValue"]) for p in series] == [("10", 0.5), ("20", 0.75)]

    # the job as the API answers it: the user's tag, the objective Katib observed under its name
    experiment = {**manifest, "metadata": {**manifest["metadata"], "creationTimestamp": "2026-01-01T00:00:00Z"}}
    trial = {"metadata": {"name": "taxi-tuning-abc", "creationTimestamp": "2026-01-01T00:00:01Z"},
             "spec": {"parameterAssignments": [{"name": "first-layer-size", "value": "64"},
                                               {"name": "learning_rate", "value": "0.01"}]},
             "status": {"conditions": [{"type": "Succeeded", "status": "True"}],
                        "observation": {"metrics": [{"name": name, "latest": "0.875", "min": "0.5",
                                                     "max": "0.875"}]}}}
    job = sweep_status.sweep_json(experiment, [trial])
    assert job["trainingOutput"]["hyperparameterMetricTag"] == tag
    assert job["trainingOutput"]["trials"][0]["finalMetric"] == {"objectiveValue": 0.875}
    assert job["trainingInput"]["hyperparameters"]["hyperparameterMetricTag"] == tag


def test_a_mapped_tag_needs_python_in_the_image_and_says_so(tmp_path):
    plan = sweep_plan("Taxi Model Accuracy", tmp_path)
    (main,) = _main_containers(katib.experiment_manifest(plan, SETTINGS))
    program = main["command"][2]
    assert "translating it needs python in the trainer image" in program
    env = {e["name"]: e["value"] for e in main["env"]}
    assert env["CLOUD_ML_HP_METRIC_FILE"] == katib_trial.HYPERTUNE_FILE
    assert env[katib_trial.KATIB_FILE_ENV] == katib_trial.METRICS_FILE
    assert env[katib_trial.METRIC_TAG_ENV] == "Taxi Model Accuracy"
    assert env[katib_trial.METRIC_NAME_ENV] == katib_trial.metric_name("Taxi Model Accuracy")
    plain = {e["name"]: e["value"] for e in _main_containers(katib.experiment_manifest(
        sweep_plan("accuracy", tmp_path), SETTINGS))[0]["env"]}
    # a tag that is Katib's name goes the same way (Katib's file gets RFC 3339 times: kubeflow/katib#2672)
    assert plain["CLOUD_ML_HP_METRIC_FILE"] == katib_trial.HYPERTUNE_FILE and plain[katib_trial.METRIC_NAME_ENV] == "accuracy"
