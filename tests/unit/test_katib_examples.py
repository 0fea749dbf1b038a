"""What users already have, part 2: Experiments in the shape of Katib's own examples (written here:
``metadata.namespace: kubeflow``, hyphenated names, batch Job trial templates, one per search
algorithm) submitted as they are. Each goes into the caller's project with a note naming the
replaced namespace (a Kubeflow installation's; another namespace, maybe another project, is
refused); through the CLI, JOB names it as gcloud's JOB names any job (the file's name
is replaced, with a note; JOB may also be the name itself); through the REST API (the service's
``create``, which hands the body to `native_experiment`) its name gives the jobId. Every manifest
is checked against Katib's CRD and swagger and its trial Job against Kubernetes' schema."""

from __future__ import annotations

import copy
import io

import pytest
import yaml

from hub_ext.core.errors import UserInputError
from server_ext.cli.main import main
from server_ext.jobs.kube.native_experiment import job_id_of, named, native_experiment, notes
from tests.unit.test_katib import check_experiment

pytestmark = pytest.mark.unit

ENV = {"JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": "/nonexistent/kubectl-ai-platform.yaml"}


def _experiment(name: str, algorithm: str, parameters: str, *, settings: str = "", extra_spec: str = "",
                trial_parameters: str, command: str, resources: str = "") -> str:
    return f"""\
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata:
  namespace: kubeflow
  name: {name}
spec:
  objective:
    type: maximize
    goal: 0.98
    objectiveMetricName: Validation-accuracy
    additionalMetricNames:
      - Train-accuracy
  algorithm:
    algorithmName: {algorithm}{settings}
  parallelTrialCount: 3
  maxTrialCount: 12
  maxFailedTrialCount: 3
  parameters:
{parameters}{extra_spec}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters:
{trial_parameters}
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          metadata:
            annotations:
              sidecar.istio.io/inject: "false"
          spec:
            containers:
              - name: training-container
                image: docker.io/example-org/fashion-mnist-trainer:v0.3
                command:
{command}{resources}
            restartPolicy: Never
"""


LR_LAYERS_OPT = """\
    - name: lr
      parameterType: double
      feasibleSpace:
        min: "0.01"
        max: "0.05"
    - name: num-layers
      parameterType: int
      feasibleSpace:
        min: "2"
        max: "5"
    - name: optimizer
      parameterType: categorical
      feasibleSpace:
        list:
          - sgd
          - adam
          - ftrl"""
TRIAL_LR_LAYERS_OPT = """\
      - name: learningRate
        description: Learning rate for the training model
        reference: lr
      - name: numberLayers
        description: Number of training model layers
        reference: num-layers
      - name: optimizer
        description: Training model optimizer (sdg, adam or ftrl)
        reference: optimizer"""
COMMAND_LR_LAYERS_OPT = """\
                  - "python3"
                  - "/opt/trainer/train.py"
                  - "--batch-size=64"
                  - "--lr=${trialParameters.learningRate}"
                  - "--num-layers=${trialParameters.numberLayers}"
                  - "--optimizer=${trialParameters.optimizer}\""""
RESOURCES = """
                resources:
                  limits:
                    cpu: "1"
                    memory: 2Gi"""

EXAMPLES = {
    "random-search-mnist": _experiment("random-search-mnist", "random", LR_LAYERS_OPT,
                                       trial_parameters=TRIAL_LR_LAYERS_OPT, command=COMMAND_LR_LAYERS_OPT),
    "tpe-example-run": _experiment("tpe-example-run", "tpe", LR_LAYERS_OPT, trial_parameters=TRIAL_LR_LAYERS_OPT,
                                   command=COMMAND_LR_LAYERS_OPT, resources=RESOURCES),
    "grid-search-lr": _experiment("grid-search-lr", "grid", """\
    - name: lr
      parameterType: double
      feasibleSpace:
        min: "0.01"
        max: "0.03"
        step: "0.005"
    - name: momentum
      parameterType: discrete
      feasibleSpace:
        list: ["0.5", "0.9"]""", trial_parameters="""\
      - name: learningRate
        description: Learning rate for the training model
        reference: lr
      - name: momentum
        description: SGD momentum
        reference: momentum""", command="""\
                  - "python3"
                  - "/opt/trainer/train.py"
                  - "--lr=${trialParameters.learningRate}"
                  - "--momentum=${trialParameters.momentum}\""""),
    "bayesian-optimization-demo": _experiment(
        "bayesian-optimization-demo", "bayesianoptimization", LR_LAYERS_OPT, settings="""
    algorithmSettings:
      - name: random_state
        value: "10\"""", trial_parameters=TRIAL_LR_LAYERS_OPT, command=COMMAND_LR_LAYERS_OPT, resources=RESOURCES),
    # a file metrics collector and early stopping, as Katib's collector and medianstop examples do
    "file-metrics-medianstop": _experiment("file-metrics-medianstop", "random", LR_LAYERS_OPT, extra_spec="""
  earlyStopping:
    algorithmName: medianstop
    algorithmSettings:
      - name: min_trials_required
        value: "2"
  metricsCollectorSpec:
    source:
      fileSystemPath:
        path: /var/log/katib/metrics.log
        kind: File
    collector:
      kind: File""", trial_parameters=TRIAL_LR_LAYERS_OPT, command=COMMAND_LR_LAYERS_OPT),
}


def run_cli(argv, env=ENV):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, env=env)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(params=sorted(EXAMPLES))
def example(request, tmp_path):
    path = tmp_path / f"{request.param}.yaml"
    path.write_text(EXAMPLES[request.param])
    return request.param, path


def test_a_katib_example_is_submitted_under_its_own_name(example):
    name, path = example
    code, out, err = run_cli(["jobs", "submit", "training", job_id_of(name), "--config", str(path),
                              "--region", "us-central1", "--dry-run", "-n", "team"])
    assert code == 0, err
    manifest = yaml.safe_load(out)
    check_experiment(manifest)
    assert (manifest["metadata"]["namespace"], manifest["metadata"]["name"]) == ("team", name)
    assert manifest["metadata"]["annotations"]["mlplatform.io/job-id"] == job_id_of(name)
    assert manifest["spec"] == yaml.safe_load(EXAMPLES[name])["spec"]  # taken as it is
    assert err.splitlines() == [
        "note: --region us-central1 is accepted: no region table is configured, so this platform's one cluster "
        "serves every region",
        "note: the Experiment goes into project 'team': its metadata.namespace 'kubeflow' is replaced"]


def test_job_names_the_experiment_as_gclouds_job_names_any_job(example):
    """A script submits one file under many JOBs (``tuning_$(date +%Y%m%d_%H%M%S)``)."""
    name, path = example
    code, out, err = run_cli(["jobs", "submit", "training", "sweep_20261204_031500", "--config", str(path),
                              "--dry-run", "-n", "team"])
    assert code == 0, err
    manifest = yaml.safe_load(out)
    check_experiment(manifest)
    assert manifest["metadata"]["name"] == "sweep-20261204-031500"
    assert manifest["metadata"]["annotations"]["mlplatform.io/job-id"] == "sweep_20261204_031500"
    assert (f"note: the Experiment is named 'sweep-20261204-031500' after JOB (its metadata.name {name!r} is "
            "replaced), so its jobId is sweep_20261204_031500\n") in err
    code, out, err = run_cli(["jobs", "submit", "training", name, "--config", str(path), "--dry-run", "-n", "team"])
    assert code == 0 and yaml.safe_load(out)["metadata"]["name"] == name and "after JOB" not in err  # the name itself


@pytest.mark.parametrize("job, why", [
    ("Random_Search", "must be lower-case letters"),
    ("a" * 41, "at most 40 characters"),
    ("sweep_", "end with a letter or digit"),
])
def test_a_job_that_cannot_name_an_experiment_is_refused_naming_job(job, why, tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EXAMPLES["random-search-mnist"])
    code, out, err = run_cli(["jobs", "submit", "training", job, "--config", str(path), "--dry-run"])
    assert (code, out) == (2, "")
    assert err.startswith("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for [JOB]: names the "
                          "Katib Experiment") and why in err, err


def test_job_flags_other_than_region_are_still_refused_beside_an_experiment(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(EXAMPLES["grid-search-lr"])
    code, out, err = run_cli(["jobs", "submit", "training", "g1", "--config", str(path), "--runtime-version", "2.11",
                              "--region", "us-central1", "--dry-run"])
    assert code == 2 and "Invalid value for [--runtime-version]: cannot be combined with a Katib Experiment" in err


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_through_the_rest_api_the_name_gives_the_job_id_and_the_namespace_is_replaced(name):
    """The REST API's create hands the body to the backend's ``submit_experiment``, which calls
    `native_experiment`: no JOB there, the Experiment's own name gives its jobId."""
    doc = yaml.safe_load(EXAMPLES[name])
    original = copy.deepcopy(doc)
    manifest = native_experiment(doc, "vision", "bob@example.com")
    check_experiment(manifest)
    assert manifest["metadata"]["namespace"] == "vision" and doc == original
    assert manifest["metadata"]["annotations"]["mlplatform.io/job-id"] == job_id_of(name)
    assert notes(doc, "vision") == ["note: the Experiment goes into project 'vision': its metadata.namespace "
                                    "'kubeflow' is replaced"]
    assert notes({**doc, "metadata": {"name": name}}, "vision") == []
    assert notes({**doc, "metadata": {"name": name, "namespace": "vision"}}, "vision") == []


@pytest.mark.parametrize("namespace, kept", [("kubeflow", True), ("kubeflow-user-example-com", True),
                                              ("vision", True), (None, True), ("user-bob", False), ("default", False)])
def test_only_a_kubeflow_installations_namespace_is_replaced(namespace, kept):
    """Another namespace may be another project of the platform: refused, as kubectl refuses an
    object whose namespace is not ``-n``'s, saying what to do."""
    doc = yaml.safe_load(EXAMPLES["random-search-mnist"])
    doc["metadata"]["namespace"] = namespace
    if kept:
        assert native_experiment(doc, "vision", "bob")["metadata"]["namespace"] == "vision"
        assert bool(notes(doc, "vision")) == (namespace not in (None, "vision"))
        return
    with pytest.raises(UserInputError) as e:
        native_experiment(doc, "vision", "bob")
    assert (e.value.field, e.value.message) == ("metadata.namespace", f"the Experiment goes into project vision, not "
                                                f"{namespace!r}: leave it out, or submit it in that project "
                                                "(--project)")
    assert notes(doc, "vision") == []


def test_named_keeps_the_document_and_says_what_it_replaced():
    doc = yaml.safe_load(EXAMPLES["tpe-example-run"])
    renamed, said = named(doc, "tpe_2")
    assert renamed["metadata"]["name"] == "tpe-2" and doc["metadata"]["name"] == "tpe-example-run"
    assert said == ["note: the Experiment is named 'tpe-2' after JOB (its metadata.name 'tpe-example-run' is "
                    "replaced), so its jobId is tpe_2"]
    assert named({**doc, "metadata": None}, "tpe_2")[0]["metadata"] == {"name": "tpe-2"}
    with pytest.raises(UserInputError) as e:
        named(doc, "Tpe")
    assert e.value.field == "JOB"


def test_the_notebook_client_reads_a_katib_example_as_the_cli_does(tmp_path):
    """``widgets``/``mlplatform`` ``submit(config)`` in a notebook builds its body with the CLI's reading
    (`submission_of` → `submission.from_options`, as the CLI's): the example's name gives the jobId, ``job_id=`` names it, and
    a script's ``region=`` is taken beside it."""
    from server_ext.client.submissions import submission_of

    path = tmp_path / "bayes.yaml"
    path.write_text(EXAMPLES["bayesian-optimization-demo"])
    sub = submission_of(str(path), None, {"region": "us-central1"})
    doc, staging, mounts = sub.job, sub.package, sub.mounts.to_rest()
    assert (doc["metadata"]["name"], staging, mounts) == ("bayesian-optimization-demo", None, {})
    check_experiment(native_experiment(doc, "vision", "bob"))
    doc = submission_of(str(path), None, {"job_id": "bayes_run_2"}).job
    assert doc["metadata"]["name"] == "bayes-run-2" and doc["metadata"]["namespace"] == "kubeflow"  # replaced there
