"""Native Katib Experiments as the platform checks them before anything reaches the cluster (the
checks of `server_ext.jobs.kube.native_experiment`, against Katib's own swagger) and the jobs
service's routing of an Experiment document to the backend's ``submit_experiment``. Sweeps
themselves run on real Katib: test_katib_sweeps.py, test_katib_real.py, test_katib_mapping_real.py
and test_katib_python_services.py (every suggestion service of Katib's released katib-config,
skopt and optuna included).
"""

from __future__ import annotations

import json
import pathlib

import jsonschema
import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.kube.native_experiment import native_experiment

pytestmark = pytest.mark.kube
SWAGGER = pathlib.Path(__file__).parents[1] / "cluster" / "crds" / "katib-v1beta1-swagger.json"


def native_doc(name: str) -> dict:
    """A Katib Experiment as a user writes it (batch Job trials, grid search)."""
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "grid"}, "parallelTrialCount": 1, "maxTrialCount": 2,
                     "parameters": [{"name": "units", "parameterType": "int",
                                     "feasibleSpace": {"min": "16", "max": "32", "step": "16"}}],
                     "trialTemplate": {
                         "primaryContainerName": "training-container",
                         "trialParameters": [{"name": "units", "reference": "units"}],
                         "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
                             "restartPolicy": "Never",
                             "containers": [{"name": "training-container", "image": "python:3.11-slim",
                                             "command": ["python", "train.py", "--units=${trialParameters.units}"],
                                             "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}}}}


def validate_swagger(obj: dict, definition: str) -> None:
    """`obj` against a definition of Katib's v1beta1 swagger (Kubernetes' own types taken as objects)."""
    doc = json.loads(SWAGGER.read_text())
    defs = {**doc["definitions"], "v1.ObjectMeta": {"type": "object"}, "v1.Time": {"type": "string"},
            "v1.unstructured.Unstructured": {"type": "object"}}
    schema = {"$ref": f"#/definitions/{definition}", "definitions": defs}
    jsonschema.Draft4Validator(schema).validate(obj)


def test_native_experiments_are_checked():
    ok = native_experiment(native_doc("exp-1"), "team", "bob@example.com")
    assert ok["metadata"]["namespace"] == "team" and ok["metadata"]["annotations"]["mlplatform.io/job-id"] == "exp_1"
    validate_swagger(ok, "v1beta1.Experiment")
    cases = [
        (lambda d: d["metadata"].update(name="Bad_Name"), "metadata.name"),
        (lambda d: d["metadata"].update(namespace="other"), "metadata.namespace"),
        (lambda d: d["spec"].update(parallelTrialCount=3), "spec.parallelTrialCount"),
        (lambda d: d["spec"].update(maxTrialCount=0), "spec.maxTrialCount"),
        (lambda d: d["spec"].update(paralelTrialCount=1), "spec.paralelTrialCount"),
        (lambda d: d["spec"]["objective"].update(type="up"), "spec.objective.type"),
        (lambda d: d["spec"]["parameters"][0]["feasibleSpace"].update(min=16), "spec.parameters[0].feasibleSpace.min"),
        (lambda d: d["spec"]["trialTemplate"]["trialSpec"].update(kind="MPIJob"), "spec.trialTemplate.trialSpec.kind"),
        (lambda d: d["spec"]["trialTemplate"].update(trialParameters=[]), "spec.trialTemplate.trialParameters"),
        (lambda d: d["metadata"].update(labels={"mlplatform.io/job": "x"}), "metadata.labels.mlplatform.io/job"),
    ]
    for change, field in cases:
        doc = native_doc("exp-1")
        change(doc)
        with pytest.raises(UserInputError) as e:
            native_experiment(doc, "team", "bob@example.com")
        assert e.value.field == field, (field, e.value)


async def test_the_service_routes_an_experiment_to_submit_experiment():
    from server_ext.service.jobs import JobService
    from tests.kube.job_env import PLAN_SETTINGS

    class Cluster:
        async def submit_experiment(self, project, owner, doc):
            return {"routed": (project, owner, doc["metadata"]["name"])}

    async def projects(user):
        return ["team"]

    doc = native_doc("exp-2")
    assert await JobService(Cluster(), PLAN_SETTINGS, projects).create("bob", "team", doc) == {
        "routed": ("team", "bob", "exp-2")}
    with pytest.raises(UserInputError) as e:  # a backend without Katib (the local one)
        await JobService(object(), PLAN_SETTINGS, projects).create("bob", "team", doc)
    assert e.value.field == "kind"
