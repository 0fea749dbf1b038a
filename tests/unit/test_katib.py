"""A sweep plan as a Katib v1beta1 Experiment: whole manifests against golden YAML, every Experiment
against the experiments CRD and against Katib's swagger definitions (``v1beta1.Experiment``), the
trial's job against the Training Operator CRDs / kubernetes-validate, and the trial program run
for real in a shell (as Kubernetes and Katib's webhook would hand it over). Regenerate the golden
files with ``UPDATE_GOLDEN=1``."""

import copy
import dataclasses
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from hub_ext.core.errors import UserInputError
from server_ext.jobs.hptuning import parse_spec
from server_ext.jobs.kube import katib, katib_params, katib_trial, metric_reports
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import plan_job
from tests.cluster.crd_schema import prune, validate
from tests.unit.golden import assert_golden
from tests.unit.test_job_kubeflow import GCP, MODULE, PLAN_SETTINGS, SETTINGS, check_kubernetes, kubernetes_expand

pytestmark = pytest.mark.unit

GOLDEN = pathlib.Path(__file__).parent / "golden" / "sweeps"
CRDS = pathlib.Path(__file__).resolve().parents[1] / "cluster" / "crds"

SWEEPS = {
    # Bayesian optimisation (algorithm unspecified), DOUBLE + INTEGER, on a PyTorchJob (master + worker)
    "bayesian-pytorchjob": ({"jobId": "resnet_sweep", "trainingInput": {
        **MODULE, "scaleTier": "CUSTOM", "runtimeVersion": "pytorch-2.5", "masterType": "n1-standard-8",
        "workerType": "n1-standard-8", "workerCount": 1, "args": ["--epochs=3"],
        "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": 8,
                            "maxParallelTrials": 2, "params": [
                                {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1},
                                {"parameterName": "layers", "type": "INTEGER", "minValue": 2, "maxValue": 8}]}}},
        {"credentials": (GCP,)}),
    # grid with DISCRETE + CATEGORICAL on a batch Job (one plain replica, a custom container)
    "grid-batch-job": ({"jobId": "census_grid", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "args": ["--data", "s3://b/census"],
        "masterConfig": {"imageUri": "ghcr.io/example/census:1", "containerCommand": ["python", "/app/train.py"]},
        "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": 6,
                            "maxParallelTrials": 3, "maxFailedTrials": 2, "algorithm": "GRID_SEARCH", "params": [
                                {"parameterName": "batch_size", "type": "DISCRETE", "discreteValues": [32, 64, 128]},
                                {"parameterName": "optimizer", "type": "CATEGORICAL",
                                 "categoricalValues": ["adam", "sgd"]}]}}},
        {}),
    # random search, log and reverse-log scales, early stopping, on a TFJob (chief, worker, ps)
    "random-log-tfjob": ({"jobId": "wide_deep_random", "trainingInput": {
        **MODULE, "scaleTier": "CUSTOM", "runtimeVersion": "2.11", "masterType": "complex_model_m",
        "workerType": "complex_model_m", "workerCount": 1, "parameterServerType": "large_model",
        "parameterServerCount": 1, "jobDir": "gs://b/out",
        "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "maxTrials": 20,
                            "maxParallelTrials": 4, "algorithm": "RANDOM_SEARCH", "enableTrialEarlyStopping": True,
                            "params": [
                                {"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 1e-05,
                                 "maxValue": 0.1, "scaleType": "UNIT_LOG_SCALE"},
                                {"parameterName": "momentum", "type": "DOUBLE", "minValue": 0.5, "maxValue": 0.999,
                                 "scaleType": "UNIT_REVERSE_LOG_SCALE"},
                                {"parameterName": "hidden", "type": "INTEGER", "minValue": 16, "maxValue": 1024,
                                 "scaleType": "UNIT_REVERSE_LOG_SCALE"}]}}},
        {}),
}


def make_plan(name: str, training: dict | None = None):
    doc, mounts = SWEEPS[name]
    if training:
        doc = {**doc, "trainingInput": {**doc["trainingInput"], **training}}
    return plan_job(parse_job(doc), PLAN_SETTINGS, project="vision", owner="alice@example.com", **mounts)


# ---------------------------------------------------------------- schemas

def swagger_schema(root: str) -> dict:
    """Katib's swagger 2.0 definitions as a JSON Schema for `root`: ``$ref`` resolved through
    ``definitions``, objects with properties closed (a misspelt field is an error, as Katib's Go
    types would drop it), int32/int64 as integers; definitions the file only names (``v1.ObjectMeta``,
    ``v1.unstructured.Unstructured``, …) are open objects."""
    swagger = json.loads((CRDS / "katib-v1beta1-swagger.json").read_text())
    known = swagger["definitions"]
    defs: dict[str, dict] = {}

    def conv(s: dict) -> dict:
        if "$ref" in s:
            name = s["$ref"].rpartition("/")[2]
            if name not in known:
                return {"type": "object"} if name != "v1.Time" else {"type": "string"}
            if name not in defs:
                defs[name] = {}
                defs[name] = conv(known[name])
            return {"$ref": f"#/definitions/{name}"}
        t = s.get("type")
        out: dict = {}
        if t == "object" and "properties" in s:
            out = {"type": "object", "additionalProperties": False,
                   "properties": {k: conv(v) for k, v in s["properties"].items()}}
            if s.get("required"):
                out["required"] = list(s["required"])
        elif t == "object":
            out = {"type": "object"}
            if isinstance(s.get("additionalProperties"), dict):
                out["additionalProperties"] = conv(s["additionalProperties"])
        elif t == "array":
            out = {"type": "array", "items": conv(s.get("items") or {})}
        elif t in ("string", "boolean", "integer", "number"):
            out = {"type": t}
        return out

    return {**conv({"$ref": f"#/definitions/{root}"}), "definitions": defs}


EXPERIMENT_SCHEMA = jsonschema.Draft7Validator(swagger_schema("v1beta1.Experiment"))
TRIAL_SCHEMA = jsonschema.Draft7Validator(swagger_schema(".v1beta1.Trial"))
CRD = yaml.safe_load((CRDS / "katib-experiments.yaml").read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def check_experiment(manifest: dict) -> None:
    pruned = copy.deepcopy(manifest)
    assert prune(pruned, CRD) == [] and pruned == manifest
    assert validate(manifest, CRD) == []
    errors = sorted(EXPERIMENT_SCHEMA.iter_errors(manifest), key=lambda e: list(e.path))
    assert not errors, [(list(e.path), e.message) for e in errors]
    trial_job = copy.deepcopy(manifest["spec"]["trialTemplate"]["trialSpec"])
    trial_job["metadata"] = {"name": f"{manifest['metadata']['name']}-abcdefgh"}
    if trial_job["kind"] != "TrainJob":  # no TrainJob schema here: the real API server checks it in tests/kube
        check_kubernetes(trial_job)


def test_the_swagger_schema_is_strict():
    ok = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "x"},
          "spec": {"maxTrialCount": 3, "parameters": [{"name": "a", "parameterType": "int",
                                                      "feasibleSpace": {"min": "1", "max": "2"}}]}}
    assert EXPERIMENT_SCHEMA.is_valid(ok)
    for bad in ({"maxTrialCount": "3"}, {"parameters": [{"name": "a", "feasibleSpace": {"min": 1}}]},
                {"maxTrials": 3}, {"objective": {"goal": "max"}}):
        assert not EXPERIMENT_SCHEMA.is_valid({**ok, "spec": bad}), bad


# ---------------------------------------------------------------- manifests

@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_experiments_match_the_golden_files(name):
    assert_golden(GOLDEN / f"{name}.yaml", katib.experiment_manifest(make_plan(name), SETTINGS),
                  pathlib.Path(__file__).name)


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_experiments_validate(name):
    check_experiment(katib.experiment_manifest(make_plan(name), SETTINGS))


def test_a_sweep_on_trainer_v2_runs_trainjob_trials():
    """Issue 31.3: the same sweep with its job on Trainer v2: Katib's TrainJob trials (its defaults
    for a TrainJob, written out), the trial program as the trainer's command, the TrainJob as
    `trainjob_manifest` makes it otherwise."""
    plan = dataclasses.replace(make_plan("bayesian-pytorchjob"), trainer_v2=True)
    experiment = katib.experiment_manifest(plan, SETTINGS)
    assert_golden(GOLDEN / "bayesian-trainjob.yaml", experiment, pathlib.Path(__file__).name)
    check_experiment(experiment)
    template = experiment["spec"]["trialTemplate"]
    assert template["trialSpec"]["kind"] == "TrainJob" and "metadata" not in template["trialSpec"]
    assert template["primaryContainerName"] == "node"
    assert template["primaryPodLabels"] == {"jobset.sigs.k8s.io/replicatedjob-name": "node",
                                            "batch.kubernetes.io/job-completion-index": "0"}
    assert template["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    trainer = template["trialSpec"]["spec"]["trainer"]
    assert trainer["command"][:2] == ["sh", "-c"] and "args" not in trainer
    assert trainer["numNodes"] == plan.total_replicas
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert [env[f"MLPLATFORM_HP_{i}"] for i in range(len(plan.sweep.params))] == [
        f"${{trialParameters.{p.name}}}" for p in plan.sweep.params]
    assert env["MLPLATFORM_KATIB_METRICS_FILE"] == katib_trial.METRICS_FILE


@pytest.mark.parametrize("name, kind, container, labels, success", [
    ("bayesian-pytorchjob", "PyTorchJob", "pytorch", katib.MASTER_POD_LABELS, "Succeeded"),
    ("grid-batch-job", "Job", "trainer", None, "Complete"),
    ("random-log-tfjob", "TFJob", "tensorflow", katib.MASTER_POD_LABELS, "Succeeded"),
])
def test_the_trial_template_is_the_jobs_kind(name, kind, container, labels, success):
    plan = make_plan(name)
    spec = katib.experiment_manifest(plan, SETTINGS)["spec"]
    template = spec["trialTemplate"]
    assert template["trialSpec"]["kind"] == kind == plan.kind
    assert "metadata" not in template["trialSpec"]
    assert template["primaryContainerName"] == container
    assert template.get("primaryPodLabels") == labels
    assert template["successCondition"] == f'status.conditions.#(type=="{success}")#|#(status=="True")#'
    assert template["failureCondition"] == 'status.conditions.#(type=="Failed")#|#(status=="True")#'
    assert [(p["name"], p["reference"]) for p in template["trialParameters"]] == [
        (p.name, katib_params.search_name(plan.sweep, p)) for p in plan.sweep.params]
    assert spec["metricsCollectorSpec"] == {"collector": {"kind": "File"}, "source": {"fileSystemPath": {
        "kind": "File", "path": katib_trial.METRICS_FILE, "format": "JSON"}}}


def test_metadata_is_the_jobs():
    plan = make_plan("bayesian-pytorchjob")
    meta = katib.experiment_manifest(plan, SETTINGS)["metadata"]
    from server_ext.jobs.kube.kubeflow import job_manifest
    job_meta = job_manifest(plan, SETTINGS)["metadata"]
    assert meta == job_meta
    assert katib.spec_of({"metadata": meta}) == plan.sweep


@pytest.mark.parametrize("hyper, expected", [
    ({}, {"algorithm": {"algorithmName": "bayesianoptimization"}, "maxTrialCount": 1, "parallelTrialCount": 1,
          "maxFailedTrialCount": 1}),
    ({"maxTrials": 10, "maxParallelTrials": 3}, {"maxTrialCount": 10, "parallelTrialCount": 3,
                                                "maxFailedTrialCount": 3}),
    ({"maxTrials": 2, "maxParallelTrials": 5}, {"maxTrialCount": 2, "parallelTrialCount": 2,
                                               "maxFailedTrialCount": 2}),
    ({"maxTrials": 10, "maxFailedTrials": 7}, {"maxFailedTrialCount": 7}),
    ({"algorithm": "RANDOM_SEARCH"}, {"algorithm": {"algorithmName": "random"}}),
    ({"algorithm": "GRID_SEARCH", "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1,
                                              "maxValue": 4, "scaleType": "UNIT_REVERSE_LOG_SCALE"}]},
     {"algorithm": {"algorithmName": "grid"},
      "parameters": [{"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "4"}}]}),
    ({"enableTrialEarlyStopping": True}, {"earlyStopping": {"algorithmName": "medianstop"}}),
    ({"goal": "MINIMIZE", "hyperparameterMetricTag": "val/loss"},
     {"objective": {"type": "minimize", "objectiveMetricName": katib_trial.metric_name("val/loss"),
                    "metricStrategies": [{"name": katib_trial.metric_name("val/loss"), "value": "latest"}]}}),
    ({"algorithm": "RANDOM_SEARCH", "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 1,
                                                "maxValue": 2.5, "scaleType": "UNIT_LOG_SCALE"}]},
     # searched as ln(lr), uniformly (some suggestion services ignore logUniform: goptuna)
     {"parameters": [{"name": "lr-log", "parameterType": "double",
                      "feasibleSpace": {"min": "0.0", "max": "0.9162907318741551"}}]}),
    ({"algorithm": "RANDOM_SEARCH", "params": [{"parameterName": "m", "type": "DOUBLE", "minValue": 0.5,
                                                "maxValue": 0.99, "scaleType": "UNIT_REVERSE_LOG_SCALE"}]},
     # searched as ln(y), uniformly, y = min + max - m (goptuna ignores logUniform)
     {"parameters": [{"name": "m-reversed-log", "parameterType": "double",
                      "feasibleSpace": {"min": repr(math.log(0.5)), "max": repr(math.log(0.99))}}]}),
    # Bayesian optimisation (skopt samples every double log-uniformly): w in [1, e], whatever the scale;
    # an INTEGER on a linear scale stays an int (skopt's Integer is uniform)
    ({"params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.3,
                  "scaleType": "UNIT_LOG_SCALE"},
                 {"parameterName": "m", "type": "DOUBLE", "minValue": -1, "maxValue": 1},
                 {"parameterName": "k", "type": "INTEGER", "minValue": 1, "maxValue": 64,
                  "scaleType": "UNIT_LOG_SCALE"},
                 {"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 4}]},
     {"parameters": [{"name": name, "parameterType": "double", "feasibleSpace": {"min": "1.0", "max": repr(math.e)}}
                     for name in ("lr-unit", "m-unit", "k-unit")] +
                    [{"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "4"}}]}),
    ({"params": [{"parameterName": "d", "type": "DISCRETE", "discreteValues": [0.5, 1, 2.25]}]},
     {"parameters": [{"name": "d", "parameterType": "discrete", "feasibleSpace": {"list": ["0.5", "1", "2.25"]}}]}),
])
def test_the_mapping(hyper, expected):
    base = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "acc",
            "params": [{"parameterName": "x", "type": "INTEGER", "minValue": 1, "maxValue": 3}]}
    plan = make_plan("grid-batch-job", {"hyperparameters": {**base, **hyper}})
    spec = katib.experiment_manifest(plan, SETTINGS)["spec"]
    check_experiment(katib.experiment_manifest(plan, SETTINGS))
    assert {k: spec[k] for k in expected} == expected
    if "earlyStopping" not in expected:
        assert "earlyStopping" not in spec


@pytest.mark.parametrize("training, field, message", [
    ({"hyperparameters": {**SWEEPS["grid-batch-job"][0]["trainingInput"]["hyperparameters"],
                          "resumePreviousJobId": "census_v1"}},
     "trainingInput.hyperparameters.resumePreviousJobId", "Katib resumes an Experiment in place"),
    ({"hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "a", "params": [
        {"parameterName": "o", "type": "CATEGORICAL", "categoricalValues": ["ok", "$(HOME)"]}]}},
     "trainingInput.hyperparameters.params[0].categoricalValues[1]", "Katib cannot pass"),
    ({"hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "a", "params": [
        {"parameterName": "o", "type": "CATEGORICAL", "categoricalValues": ['say "hi"']}]}},
     "trainingInput.hyperparameters.params[0].categoricalValues[0]", "Katib cannot pass"),
    ({"hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "a", "algorithm": "RANDOM_SEARCH", "params": [
        {"parameterName": "m", "type": "DOUBLE", "minValue": 1, "maxValue": 2, "scaleType": "UNIT_REVERSE_LOG_SCALE"},
        {"parameterName": "m-reversed-log", "type": "INTEGER", "minValue": 1, "maxValue": 2}]}},
     "trainingInput.hyperparameters.params[0].parameterName", "'m-reversed-log' is also a parameter"),
    ({"hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "a", "params": [
        {"parameterName": "m", "type": "DOUBLE", "minValue": 1, "maxValue": 2},
        {"parameterName": "m-unit", "type": "INTEGER", "minValue": 1, "maxValue": 2}]}},
     "trainingInput.hyperparameters.params[0].parameterName", "'m-unit' is also a parameter"),
    ({"masterConfig": {"imageUri": "ghcr.io/example/census:1"}},
     "trainingInput.masterConfig.containerCommand", "give the image's entry point"),
])
def test_what_cannot_be_mapped_is_refused(training, field, message):
    plan = make_plan("grid-batch-job", training)
    with pytest.raises(UserInputError) as e:
        katib.experiment_manifest(plan, SETTINGS)
    assert e.value.field == field and message in e.value.message


def test_a_long_job_id_is_refused():
    doc = copy.deepcopy(SWEEPS["grid-batch-job"][0])
    doc["jobId"] = "a" * 41
    plan = plan_job(parse_job(doc), PLAN_SETTINGS, project="p", owner="o")
    with pytest.raises(UserInputError) as e:
        katib.experiment_manifest(plan, SETTINGS)
    assert e.value.field == "jobId"


def test_a_plain_job_is_not_a_sweep():
    doc = {"jobId": "j", "trainingInput": {**MODULE, "runtimeVersion": "python-3.11"}}
    with pytest.raises(ValueError):
        katib.experiment_manifest(plan_job(parse_job(doc), PLAN_SETTINGS, project="p", owner="o"), SETTINGS)


def test_the_plan_is_not_changed():
    plan = make_plan("random-log-tfjob")
    before = copy.deepcopy(plan.job.doc)
    assert katib.experiment_manifest(plan, SETTINGS) == katib.experiment_manifest(plan, SETTINGS)
    assert plan.job.doc == before


# ---------------------------------------------------------------- the trial program, run

TRAINER = """\
import json, os, sys
print(json.dumps(sys.argv[1:]))
print("epoch 1: loss=3.5 auc=0.61")
print("auc = 7.5e-1", file=sys.stderr)
print("val_auc=0.99 my.auc=0.98")
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "a") as f:
    f.write(json.dumps({"auc": "0.8", "global_step": "40", "timestamp": 1700000000.5}) + "\\n")
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def _main_containers(manifest):
    job = manifest["spec"]["trialTemplate"]["trialSpec"]
    if job["kind"] == "Job":
        return [job["spec"]["template"]["spec"]["containers"][0]]
    key = "pytorchReplicaSpecs" if job["kind"] == "PyTorchJob" else "tfReplicaSpecs"
    return [s["template"]["spec"]["containers"][0] for s in job["spec"][key].values()]


def _run(container, values: dict[str, str], tmp_path, wrap: bool = False, exit_code: int = 0):
    """Run a trial container's command as the kubelet would after Katib substituted `values`
    (and, with `wrap`, after Katib's webhook appended its completion marker)."""
    env = {e["name"]: e["value"] for e in container["env"]}
    text = json.dumps(env)
    for name, value in values.items():
        text = text.replace("${trialParameters.%s}" % name, value)
    env = json.loads(text)
    env.update({"CLOUD_ML_HP_METRIC_FILE": str(tmp_path / "katib" / "hypertune.json"),
                katib_trial.KATIB_FILE_ENV: str(tmp_path / "katib" / "metrics.json"), "PATH": os.environ["PATH"],
                "EXIT": str(exit_code)})
    words = container["command"]
    if wrap:
        words = words[:2] + [" ".join(words[2:] + ["&&", f"echo completed > {tmp_path}/katib/$$$$.pid"])]
    argv = [kubernetes_expand(w, env) for w in words]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def _custom(tmp_path, hyper):
    (tmp_path / "train.py").write_text(TRAINER)
    training = {"masterConfig": {"imageUri": "x:1", "containerCommand": [sys.executable, str(tmp_path / "train.py")]},
                "args": ["--data", "s3://b/it's here", "$(HOME)"], "hyperparameters": hyper}
    return make_plan("grid-batch-job", training)


HYPER = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "algorithm": "RANDOM_SEARCH", "params": [
    {"parameterName": "momentum", "type": "DOUBLE", "minValue": 0.5, "maxValue": 0.999,
     "scaleType": "UNIT_REVERSE_LOG_SCALE"},
    {"parameterName": "hidden", "type": "INTEGER", "minValue": 16, "maxValue": 1024,
     "scaleType": "UNIT_REVERSE_LOG_SCALE"},
    {"parameterName": "opt", "type": "CATEGORICAL", "categoricalValues": ["adam", "it's; `id` & more"]}]}


@pytest.mark.parametrize("wrap", [False, True])
def test_the_trial_gets_its_hyperparameters_and_its_metrics_are_collected(tmp_path, wrap):
    plan = _custom(tmp_path, HYPER)
    (main,) = _main_containers(katib.experiment_manifest(plan, SETTINGS))
    # reverse-log parameters are searched as z = ln y (y = min + max - x)
    searched = {"momentum": repr(math.log(0.5123)), "hidden": repr(math.log(17)), "opt": "it's; `id` & more"}
    done = _run(main, searched, tmp_path, wrap=wrap)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    trial = {"spec": {"parameterAssignments": [{"name": "momentum-reversed-log", "value": searched["momentum"]},
                                               {"name": "hidden-reversed-log", "value": searched["hidden"]},
                                               {"name": "opt", "value": searched["opt"]}]}}
    hp = katib_params.trial_hyperparameters(plan.sweep, trial)
    assert hp == {"momentum": repr(0.5 + (0.999 - math.exp(math.log(0.5123)))), "hidden": "1023",
                  "opt": "it's; `id` & more"}
    assert json.loads(lines[0]) == ["--data", "s3://b/it's here", "$(HOME)",
                                    *(f"--{k}={v}" for k, v in hp.items())]
    assert "epoch 1: loss=3.5 auc=0.61" in lines and "auc = 7.5e-1" in lines  # output passed on
    metrics = [json.loads(x) for x in (tmp_path / "katib" / "metrics.json").read_text().splitlines()]
    assert sorted(m["auc"] for m in metrics) == ["0.61", "0.8", "7.5e-1"]  # not val_auc, not my.auc
    # RFC 3339 times (Katib v0.19 misreads a number's fraction of a second: kubeflow/katib#2672); the
    # trainer's own 1700000000.5 kept to the microsecond
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", m["timestamp"]) for m in metrics)
    assert "2023-11-14T22:13:20.500000Z" in [m["timestamp"] for m in metrics]
    # the line the trainer wrote to the file is echoed once; the program's own lines are not
    assert [x for x in lines if x.startswith("{")] == [
        json.dumps({"auc": "0.8", "global_step": "40", "timestamp": 1700000000.5})]
    assert [(x["trainingStep"], x["objectiveValue"]) for x in metric_reports.series(done.stdout, "auc")] == [
        ("40", 0.8)]
    if wrap:
        (marker,) = (tmp_path / "katib").glob("*.pid")
        assert marker.read_text().strip() == "completed"


LOG_HYPER = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "algorithm": "RANDOM_SEARCH", "params": [
    {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1, "scaleType": "UNIT_LOG_SCALE"},
    {"parameterName": "units", "type": "INTEGER", "minValue": 4, "maxValue": 1024, "scaleType": "UNIT_LOG_SCALE"}]}


@pytest.mark.parametrize("searched, given", [
    ({"lr": repr(math.log(0.001)), "units": repr(math.log(64))},
     {"lr": repr(math.exp(math.log(0.001))), "units": "64"}),
    ({"lr": "-20", "units": "9"}, {"lr": "0.0001", "units": "1024"}),  # clamped to [min, max]
    ({"lr": repr((math.log(0.0001) + math.log(0.1)) / 2), "units": "4.2"},  # the log-space midpoint
     {"lr": repr(math.exp((math.log(0.0001) + math.log(0.1)) / 2)), "units": "67"}),
])
def test_a_log_scale_is_searched_as_its_logarithm_and_the_trainer_gets_exp(tmp_path, searched, given):
    plan = _custom(tmp_path, LOG_HYPER)
    manifest = katib.experiment_manifest(plan, SETTINGS)
    assert [(p["name"], p["feasibleSpace"]) for p in manifest["spec"]["parameters"]] == [
        ("lr-log", {"min": repr(math.log(0.0001)), "max": repr(math.log(0.1))}),
        ("units-log", {"min": repr(math.log(4)), "max": repr(math.log(1024))})]
    (main,) = _main_containers(manifest)
    done = _run(main, searched, tmp_path)
    assert done.returncode == 0, done.stderr
    trial = {"spec": {"parameterAssignments": [{"name": f"{k}-log", "value": v} for k, v in searched.items()]}}
    assert katib_params.trial_hyperparameters(plan.sweep, trial) == given
    assert json.loads(done.stdout.splitlines()[0])[3:] == [f"--{k}={v}" for k, v in given.items()]


BAYES_HYPER = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "params": [
    {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1, "scaleType": "UNIT_LOG_SCALE"},
    {"parameterName": "drop", "type": "DOUBLE", "minValue": -0.5, "maxValue": 0.5},
    {"parameterName": "m", "type": "DOUBLE", "minValue": 0.5, "maxValue": 0.999, "scaleType": "UNIT_REVERSE_LOG_SCALE"},
    {"parameterName": "units", "type": "INTEGER", "minValue": 4, "maxValue": 1024, "scaleType": "UNIT_LOG_SCALE"}]}


@pytest.mark.parametrize("u, given", [
    (0.0, {"lr": "0.0001", "drop": "-0.5", "m": "0.999", "units": "4"}),
    (1.0, {"lr": repr(math.exp(math.log(0.0001) + (math.log(0.1) - math.log(0.0001)))), "drop": "0.5",
           "m": repr(0.5 + 0.999 - math.exp(math.log(0.5) + (math.log(0.999) - math.log(0.5)))), "units": "1024"}),
    (0.5, {"lr": repr(math.exp((math.log(0.0001) + math.log(0.1)) / 2)), "drop": "0.0",
           "m": repr(0.5 + 0.999 - math.exp((math.log(0.5) + math.log(0.999)) / 2)), "units": "64"}),
])
def test_bayesian_optimisation_searches_w_whose_log_is_uniform_and_the_trainer_gets_x_by_its_scale(
        tmp_path, u, given):
    """Katib's skopt samples a double log-uniformly in [min, max]: every DOUBLE (and a log-scale INTEGER)
    is searched as w in [1, e], u = ln w uniform in [0, 1], and the trainer gets x by the scale."""
    plan = _custom(tmp_path, BAYES_HYPER)
    manifest = katib.experiment_manifest(plan, SETTINGS)
    assert manifest["spec"]["algorithm"] == {"algorithmName": "bayesianoptimization"}
    assert [(p["name"], p["feasibleSpace"]) for p in manifest["spec"]["parameters"]] == [
        (f"{name}-unit", {"min": "1.0", "max": repr(math.e)}) for name in ("lr", "drop", "m", "units")]
    searched = {name: repr(math.exp(u)) for name in ("lr", "drop", "m", "units")}
    (main,) = _main_containers(manifest)
    done = _run(main, searched, tmp_path)
    assert done.returncode == 0, done.stderr
    trial = {"spec": {"parameterAssignments": [{"name": f"{k}-unit", "value": v} for k, v in searched.items()]}}
    shown = katib_params.trial_hyperparameters(plan.sweep, trial)
    assert {k: float(v) for k, v in shown.items()} == pytest.approx({k: float(v) for k, v in given.items()})
    assert json.loads(done.stdout.splitlines()[0])[3:] == [f"--{k}={v}" for k, v in shown.items()]


def test_a_bayesian_sweep_made_before_it_searched_w_still_shows_its_values():
    """A Bayesian Experiment made when log scales were searched as ln x, as under the other algorithms."""
    plan = make_plan("grid-batch-job", {"hyperparameters": {**LOG_HYPER, "algorithm": "ALGORITHM_UNSPECIFIED"}})
    trial = {"spec": {"parameterAssignments": [{"name": "lr-log", "value": repr(math.log(0.001))},
                                               {"name": "units-log", "value": repr(math.log(64))}]}}
    assert katib_params.trial_hyperparameters(plan.sweep, trial) == {"lr": repr(math.exp(math.log(0.001))),
                                                                      "units": "64"}


def test_an_experiment_made_before_log_space_search_still_shows_its_values():
    """Experiments made with ``distribution: logUniform`` (parameter ``lr``, the value as the trainer got it)."""
    plan = make_plan("grid-batch-job", {"hyperparameters": LOG_HYPER})
    trial = {"spec": {"parameterAssignments": [{"name": "lr", "value": "0.0123"}, {"name": "units", "value": "77"}]}}
    assert katib_params.trial_hyperparameters(plan.sweep, trial) == {"lr": "0.0123", "units": "77"}


@pytest.mark.parametrize("wrap", [False, True])
def test_a_failing_trainer_fails_the_trial(tmp_path, wrap):
    plan = _custom(tmp_path, HYPER)
    (main,) = _main_containers(katib.experiment_manifest(plan, SETTINGS))
    done = _run(main, {"momentum": "0.6", "hidden": "16", "opt": "adam"}, tmp_path, wrap=wrap, exit_code=3)
    assert done.returncode == 3
    assert not list((tmp_path / "katib").glob("*.pid"))


# cloudml-hypertune's reporting, as it does it: the file rewritten whole, its last 100 reports kept
HYPERTUNE = """\
import collections, json, os, sys, time
kept = collections.deque(maxlen=100)
def report(value, step):
    kept.append({"timestamp": time.time(), "trial": "0", "auc": str(value), "global_step": str(step)})
    with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "w") as f:
        for m in kept:
            f.write(json.dumps(m, sort_keys=True) + "\\n")
print("training", flush=True)
for step in range(1, 131):
    report(step / 1000, step)
    if step % 26 == 0:
        time.sleep(0.4)  # the program reads the file four times a second
print("done, no metric printed", end="")
"""


def test_hypertune_reports_are_echoed_to_the_log_once(tmp_path):
    """A trainer that reports only through cloudml-hypertune (nothing on stdout): each line it writes
    to its metrics file reaches stdout exactly once, in order, although the file is rewritten on
    every report and keeps only 100; a line in the file before the trainer started is not echoed;
    Katib's own file gets each report once."""
    (tmp_path / "train.py").write_text(HYPERTUNE)
    training = {"masterConfig": {"imageUri": "x:1", "containerCommand": [sys.executable, str(tmp_path / "train.py")]},
                "hyperparameters": HYPER}
    (main,) = _main_containers(katib.experiment_manifest(make_plan("grid-batch-job", training), SETTINGS))
    (tmp_path / "katib").mkdir()
    (tmp_path / "katib" / "hypertune.json").write_text('{"auc": "0.99", "timestamp": 1.0}\n')  # a previous run's
    done = _run(main, {"momentum": "0.6", "hidden": "16", "opt": "adam"}, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "training" and "done, no metric printed" in lines
    reports = [json.loads(x) for x in lines if x.startswith("{")]
    assert [int(r["global_step"]) for r in reports] == list(range(1, 131))
    series = metric_reports.series(done.stdout, "auc")
    assert [(x["trainingStep"], x["objectiveValue"]) for x in series] == [(str(n), n / 1000) for n in range(1, 131)]
    assert len((tmp_path / "katib" / "hypertune.json").read_text().splitlines()) == 100
    # Katib's file has every report once, in order, under Katib's name (it only grows)
    katib_file = [json.loads(x) for x in (tmp_path / "katib" / "metrics.json").read_text().splitlines()]
    assert [float(m["auc"]) for m in katib_file] == [n / 1000 for n in range(1, 131)]


def test_every_replica_of_a_module_job_gets_the_arguments():
    plan = make_plan("random-log-tfjob")
    manifest = katib.experiment_manifest(plan, SETTINGS)
    for c in _main_containers(manifest):
        assert c["command"][:2] == ["sh", "-c"] and "args" not in c
        program = c["command"][2]
        assert "set -- sh -c " in program and "trainer.task --job-dir=gs://b/out" in program
        assert '--learning_rate="$$MLPLATFORM_HP_0"' in program
        env = {e["name"]: e["value"] for e in c["env"]}
        assert env["MLPLATFORM_HP_0"] == "${trialParameters.learning_rate}"
        assert env["CLOUD_ML_HP_METRIC_FILE"] == katib_trial.HYPERTUNE_FILE and env["MLPLATFORM_HP_METRIC_TAG"] == "auc"
        assert env[katib_trial.KATIB_FILE_ENV] == katib_trial.METRICS_FILE


@pytest.mark.parametrize("searched, expected", [("0.5", "0.999"), ("0.999", "0.5"), ("0.75", repr(0.5 + (0.999 - 0.75))), ("1e9", "0.5"), ("0.1", "0.999")])
def test_reverse_values_stay_in_range(searched, expected):
    p = parse_spec(HYPER).params[0]
    assert katib_params.reverse_value(p, searched) == expected  # Experiments made before (y searched itself)
    assert katib_params.reverse_log_value(p, repr(math.log(float(searched)))) == (
        "0.999" if float(searched) <= 0.5 else repr(min(max(0.5 + (0.999 - math.exp(math.log(float(searched)))),
                                                            0.5), 0.999)))


@pytest.mark.parametrize("z, expected", [(math.log(16), "1024"), (math.log(1024), "16"), (math.log(16.4), "1024"),
                                         (math.log(100.5), "940"), (50, "16"), (-5, "1024")])
def test_an_integer_reverse_log_value(z, expected):
    p = parse_spec(HYPER).params[1]  # hidden: [16, 1024]; y = round(exp(z)); x = 16 + 1024 - y
    assert katib_params.reverse_log_value(p, repr(z)) == expected


def test_an_experiment_made_before_reverse_log_was_searched_as_ln_y_still_shows_its_values():
    """Experiments made with ``<name>-reversed`` = y itself (``distribution: logUniform``)."""
    trial = {"spec": {"parameterAssignments": [{"name": "momentum-reversed", "value": "0.75"},
                                               {"name": "hidden-reversed", "value": "17"}]}}
    assert katib_params.trial_hyperparameters(parse_spec(HYPER), trial) == {"momentum": repr(0.5 + (0.999 - 0.75)),
                                                                     "hidden": "1023"}


def test_trial_hyperparameters_without_a_spec_or_assignments():
    trial = {"spec": {"parameterAssignments": [{"name": "lr", "value": "0.1"}]}}
    assert katib_params.trial_hyperparameters(None, trial) == {"lr": "0.1"}
    assert katib_params.trial_hyperparameters(parse_spec(HYPER), {}) == {}
    assert katib.spec_of({"metadata": {}}) is None
    assert katib.spec_of({"metadata": {"annotations": {"mlplatform.io/job-spec": "{"}}}) is None


def test_a_trial_validates_against_the_swagger_trial():
    trial = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Trial", "metadata": {"name": "t"},
             "spec": {"parameterAssignments": [{"name": "lr", "value": "0.1"}]},
             "status": {"conditions": [{"type": "Succeeded", "status": "True"}],
                        "observation": {"metrics": [{"name": "auc", "latest": "0.9", "min": "0.1", "max": "0.9"}]}}}
    assert TRIAL_SCHEMA.is_valid(trial)
