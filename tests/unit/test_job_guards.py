"""Issue 16's early guards of the jobs API: a shipped package is immutable and its digest checked by
the fetcher before anything is installed; jobs are planned with the project's limits from the
catalogue the hub published; a native Experiment's trial pods are refused when a project's pods may
not do what they ask (`server_ext.jobs.kube.pod_guard`)."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.core.publish import catalog_json
from hub_ext.manifests.tenancy import CATALOG_CONFIGMAP
from server_ext.jobs import package_delivery
from server_ext.jobs.kube.native_experiment import native_experiment
from server_ext.jobs.kube.pod_guard import GPU_ENV, pod_spec_findings, workload_findings
from server_ext.jobs.model import parse_job
from server_ext.jobs.package_uri import (
    DEFAULT_MAX_BYTES,
    DIGESTS_ENV,
    MAX_BYTES_ENV,
    PACKAGES_DIR_ENV,
    max_package_bytes,
    parse_all,
    parse_uri,
    recorded_digests,
)
from server_ext.jobs.plan import plan_job
from server_ext.jobs.tables import parse_tables
from server_ext.runtimes.fetch import fetch_all
from server_ext.runtimes.kube.target import Published, published_of

pytestmark = pytest.mark.unit

SHA = hashlib.sha256(b"the submitted sdist").hexdigest()
OTHER = hashlib.sha256(b"a teammate's sdist").hexdigest()


# --- packages: immutable, and the fetcher checks the recorded digest ------------------------------

def test_the_package_configmap_is_immutable_and_the_digest_rides_in_the_pod_env():
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}
    cm = package_delivery.package_configmap("j", "vision", b"sdist", "t-1.tar.gz", owner)
    assert cm["immutable"] is True
    uri = "configmap://j-package/t-1.tar.gz"
    entry = package_delivery.digest_env(uri, SHA)
    assert entry == {"name": DIGESTS_ENV, "value": json.dumps({uri: SHA}, separators=(",", ":"))}
    assert recorded_digests({DIGESTS_ENV: entry["value"]}) == {uri: SHA}
    # Kubernetes expands $(VAR) in env values: a URI with `$` is escaped for it
    assert package_delivery.digest_env("gs://b/$(HOME)/t.tar.gz", SHA)["value"].count("$$(HOME)") == 1


def shipped(tmp_path, data: bytes) -> tuple[str, dict]:
    """A package ConfigMap's one file laid out as the pod mounts it; (its URI, the fetch env)."""
    target = tmp_path / "packages" / "j-package" / "t-1.tar.gz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return "configmap://j-package/t-1.tar.gz", {PACKAGES_DIR_ENV: str(tmp_path / "packages")}


def test_the_fetcher_installs_the_submitted_bytes(tmp_path):
    uri, env = shipped(tmp_path, b"the submitted sdist")
    env[DIGESTS_ENV] = package_delivery.digest_env(uri, SHA)["value"]
    (path,) = asyncio.run(fetch_all([uri], tmp_path / "code", env))
    assert path.read_bytes() == b"the submitted sdist"


def test_a_swapped_package_fails_the_fetch_and_leaves_nothing(tmp_path):
    uri, env = shipped(tmp_path, b"a teammate's sdist")
    other = tmp_path / "other.tar.gz"
    other.write_bytes(b"fine")
    env[DIGESTS_ENV] = package_delivery.digest_env(uri, SHA)["value"]
    with pytest.raises(UserInputError) as e:
        asyncio.run(fetch_all([str(other), uri], tmp_path / "code", env))
    assert e.value.field == "trainingInput.packageUris[1]"
    assert f"its sha256 is {OTHER}, not {SHA}" in e.value.message
    assert "changed after submission" in e.value.message and "nothing was installed" in e.value.message
    assert list((tmp_path / "code").iterdir()) == []  # not even the other, good package


def test_without_a_recorded_digest_nothing_is_checked(tmp_path):
    uri, env = shipped(tmp_path, b"anything")
    assert asyncio.run(fetch_all([uri], tmp_path / "code", env))[0].read_bytes() == b"anything"


def test_a_staged_package_is_pinned_by_its_content_addressed_key():
    staged = package_delivery.staging_uri_of("gs://bucket/staging", "j", SHA, "t-1.tar.gz")
    assert parse_uri(staged, "f").sha256 == SHA
    assert parse_uri(staged.replace("gs://", "s3://"), "f").sha256 == SHA
    assert parse_uri("gs://bucket/packages/not-hex/t.tar.gz", "f").sha256 is None
    assert parse_uri("gs://bucket/t.tar.gz", "f").sha256 is None


def test_the_package_size_limit_is_read_from_the_env_and_a_bad_one_named(tmp_path):
    assert max_package_bytes({}) == DEFAULT_MAX_BYTES == 512 * 2**20
    assert max_package_bytes({MAX_BYTES_ENV: "4096"}) == 4096
    with pytest.raises(UserInputError) as e:
        max_package_bytes({MAX_BYTES_ENV: "4 MiB"})
    assert e.value.field == MAX_BYTES_ENV
    uri, env = shipped(tmp_path, b"x" * 20)
    with pytest.raises(UserInputError, match="more than the"):
        asyncio.run(fetch_all([uri], tmp_path / "code", {**env, MAX_BYTES_ENV: "10"}))


def test_a_uri_may_pin_its_own_digest_as_pip_does(tmp_path):
    assert parse_uri(f"gs://b/t.tar.gz#sha256={SHA}", "f").sha256 == SHA
    assert parse_uri(f"gs://b/t.tar.gz#sha256={SHA}", "f").key == "t.tar.gz"
    source = tmp_path / "t.tar.gz"
    source.write_bytes(b"a teammate's sdist")
    with pytest.raises(UserInputError, match="changed after submission"):
        asyncio.run(fetch_all([f"file://{source}#sha256={SHA}"], tmp_path / "code", {}))


@pytest.mark.parametrize("uris, env, field, message", [
    (["gs://b/t.tar.gz#md5=abc"], {}, "trainingInput.packageUris[0]", "the only fragment understood"),
    (["gs://b/t.tar.gz#sha256=ABC"], {}, "trainingInput.packageUris[0]", "the only fragment understood"),
    ([f"gs://b/j/packages/{SHA}/t.tar.gz#sha256={OTHER}"], {}, "trainingInput.packageUris[0]", "different digests"),
    ([f"gs://b/j/packages/{SHA}/t.tar.gz"], {DIGESTS_ENV: json.dumps({f"gs://b/j/packages/{SHA}/t.tar.gz": OTHER})},
     "trainingInput.packageUris[0]", "records a different sha256"),
    (["gs://b/t.tar.gz"], {DIGESTS_ENV: "not json"}, DIGESTS_ENV, "must be a JSON object"),
    (["gs://b/t.tar.gz"], {DIGESTS_ENV: json.dumps({"gs://b/t.tar.gz": "short"})}, DIGESTS_ENV, "64 lower-case"),
])
def test_conflicting_or_malformed_digests_are_refused_before_any_download(uris, env, field, message):
    with pytest.raises(UserInputError) as e:
        parse_all(uris, digests=recorded_digests(env))
    assert e.value.field == field and message in e.value.message


# --- plans use the project's limits from the published catalogue ---------------------------------

ACCELERATORS = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                                   "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"}})


def catalogue_configmap(limits, name: str = "vision") -> dict:
    project = Project(name, name, False, frozenset(), limits)
    return {"metadata": {"name": CATALOG_CONFIGMAP},
            "data": {"catalog.json": json.dumps(catalog_json(ACCELERATORS.values(), [], project))}}


def gpu_job(gpu: str, count: int = 1) -> dict:
    return {"jobId": "j", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-8",
        "masterConfig": {"imageUri": "python:3.11-slim", "acceleratorConfig": {"type": gpu, "count": str(count)}}}}


def test_the_published_catalogue_gives_the_projects_limits():
    found = published_of(catalogue_configmap({"a100": 1}), "vision")
    assert found.published and set(found.accelerators) == {"a100", "h100"} and found.limits == {"a100": 1}
    assert published_of(catalogue_configmap(None), "vision").limits is None  # an admin's project
    assert published_of(None, "vision") == Published()  # no platform hub here: built-in, no limits


@pytest.mark.parametrize("doc", [
    {"data": {"catalog.json": "{"}},
    {"data": {"catalog.json": json.dumps({"accelerators": [], "project": {"name": "vision", "limits": {"a100": "1"}}})}},
    {"data": {"catalog.json": json.dumps({"accelerators": [], "project": {"name": "vision", "limits": [1]}})}},
    {"data": {}},
])
def test_a_malformed_catalogue_is_an_error_not_a_catalogue_without_limits(doc):
    with pytest.raises(UpstreamError) as e:
        published_of(doc, "vision")
    assert CATALOG_CONFIGMAP in e.value.reason


def test_another_projects_catalogue_is_refused():
    with pytest.raises(UpstreamError):
        published_of(catalogue_configmap({"a100": 8}, name="ops"), "vision")


@pytest.mark.parametrize("gpu, count, message", [
    ("NVIDIA_H100_80GB", 1, "may use none of"),
    ("NVIDIA_TESLA_A100", 2, "may use at most 1 at once of"),
])
def test_a_job_beyond_the_published_limits_is_refused_naming_the_field(gpu, count, message):
    found = published_of(catalogue_configmap({"a100": 1}), "vision")
    settings = parse_tables(None, "").plan_settings(found.accelerators, found.limits)
    with pytest.raises(UserInputError) as e:
        plan_job(parse_job(gpu_job(gpu, count)), settings, project="vision", owner="bob")
    assert e.value.status == 403 and e.value.field == "trainingInput.masterConfig.acceleratorConfig"
    assert message in e.value.message
    ok = plan_job(parse_job(gpu_job("NVIDIA_TESLA_A100")), settings, project="vision", owner="bob")
    assert ok.replicas[0].accelerator.name == "a100"


# --- pod specs a project's pods may not have ------------------------------------------------------

def container(**fields) -> dict:
    return {"name": "c", "image": "python:3.11-slim", **fields}


CLEAN = {"restartPolicy": "Never", "serviceAccountName": "mlplatform-runner",
         "securityContext": {"runAsNonRoot": True},
         "volumes": [{"name": "creds", "secret": {"secretName": "gcp-training"}}, {"name": "t", "emptyDir": {}}],
         "containers": [container(env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"},
                                       {"name": "K", "valueFrom": {"secretKeyRef": {"name": "gcp-training",
                                                                                    "key": "k"}}}],
                                  envFrom=[{"prefix": "APP_", "configMapRef": {"name": "settings"}}],
                                  ports=[{"containerPort": 8080}],
                                  securityContext={"allowPrivilegeEscalation": False,
                                                   "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}})]}


def with_(path: tuple, value) -> dict:
    spec = copy.deepcopy(CLEAN)
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


CASES = [
    (("containers", 0, "securityContext", "privileged"), True, "spec.containers[0].securityContext.privileged"),
    (("containers", 0, "securityContext", "allowPrivilegeEscalation"), True,
     "spec.containers[0].securityContext.allowPrivilegeEscalation"),
    (("containers", 0, "securityContext", "capabilities", "add"), ["NET_BIND_SERVICE", "SYS_ADMIN"],
     "spec.containers[0].securityContext.capabilities.add[1]"),
    (("volumes",), [{"name": "root", "hostPath": {"path": "/"}}], "spec.volumes[0].hostPath"),
    (("hostPID",), True, "spec.hostPID"),
    (("hostIPC",), True, "spec.hostIPC"),
    (("hostNetwork",), True, "spec.hostNetwork"),
    (("containers", 0, "ports"), [{"containerPort": 80, "hostPort": 80}], "spec.containers[0].ports[0].hostPort"),
    (("serviceAccountName",), "default", "spec.serviceAccountName"),
    (("serviceAccount",), "hub", "spec.serviceAccount"),
    (("nodeName",), "dgx-full", "spec.nodeName"),
    (("volumes",), [{"name": "t", "secret": {"secretName": "jupyter-alice-hub-token"}}],
     "spec.volumes[0].secret.secretName"),
    (("volumes",), [{"name": "t", "projected": {"sources": [{"secret": {"name": "mlplatform-hub"}}]}}],
     "spec.volumes[0].projected.sources[0].secret.name"),
    (("containers", 0, "env"), [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "x-hub-token", "key": "t"}}}],
     "spec.containers[0].env[0].valueFrom.secretKeyRef.name"),
    (("containers", 0, "envFrom"), [{"prefix": "T_", "secretRef": {"name": "mlplatform-db"}}],
     "spec.containers[0].envFrom[0].secretRef.name"),
    (("containers", 0, "envFrom"), [{"configMapRef": {"name": "gpus"}}], "spec.containers[0].envFrom[0].prefix"),
    (("containers", 0, "envFrom"), [{"prefix": "NVIDIA_", "configMapRef": {"name": "gpus"}}],
     "spec.containers[0].envFrom[0].prefix"),
    (("initContainers",), [container(securityContext={"privileged": True})],
     "spec.initContainers[0].securityContext.privileged"),
    (("ephemeralContainers",), [container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])],
     "spec.ephemeralContainers[0].env[0].name"),
    (("serviceAccountName",), "${trialParameters.units}", "spec.serviceAccountName"),
    (("volumes",), [{"name": "t", "secret": {"secretName": "${trialParameters.units}"}}],
     "spec.volumes[0].secret.secretName"),
    (("containers", 0, "env"), [{"name": "${trialParameters.units}", "value": "all"}], "spec.containers[0].env[0].name"),
]


def test_a_projects_ordinary_pod_has_no_finding():
    assert pod_spec_findings(CLEAN) == []
    assert pod_spec_findings({**CLEAN, "serviceAccountName": None}) == []  # unset: admission decides


@pytest.mark.parametrize("path, value, field", CASES, ids=[c[2] for c in CASES])
def test_each_thing_a_projects_pod_may_not_do_is_found_by_its_path(path, value, field):
    assert [f for f, _ in pod_spec_findings(with_(path, value))] == [field]


@pytest.mark.parametrize("name", GPU_ENV)
def test_every_variable_the_nvidia_runtime_reads_is_refused(name):
    (finding,) = pod_spec_findings(with_(("containers", 0, "env"), [{"name": name, "value": "all"}]))
    assert finding[0] == "spec.containers[0].env[0].name" and "resources.limits" in finding[1]


def test_every_pod_template_of_a_workload_is_checked():
    bad = with_(("hostNetwork",), True)
    pytorch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
        "Master": {"template": {"spec": CLEAN}}, "Worker": {"template": {"spec": bad}}}}}
    assert [f for f, _ in workload_findings(pytorch, "t")] == ["t.spec.pytorchReplicaSpecs.Worker.template.spec.hostNetwork"]
    tf = {"kind": "TFJob", "spec": {"tfReplicaSpecs": {"PS": {"template": {"spec": bad}}}}}
    assert [f for f, _ in workload_findings(tf)] == ["spec.tfReplicaSpecs.PS.template.spec.hostNetwork"]
    assert workload_findings({"kind": "Job", "spec": {"template": {"spec": CLEAN}}}) == []


# --- native Experiments: the trial template's pods decided before anything is created -------------

def experiment(pod_spec: dict, kind: str = "Job", values=("16", "32")) -> dict:
    if kind == "Job":
        trial = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": pod_spec}}}
    elif kind == "TrainJob":
        trial = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": {
            "runtimeRef": {"name": "mlplatform-torch"}, "trainer": {"command": ["python", "-m", "t", "--units=${trialParameters.units}"]},
            "runtimePatches": [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}}}}]}}
    else:
        trial = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": pod_spec}}}}}
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": "sweep"},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "grid"}, "maxTrialCount": 2, "parallelTrialCount": 1,
                     "parameters": [{"name": "units", "parameterType": "categorical",
                                     "feasibleSpace": {"list": list(values)}}],
                     "trialTemplate": {"primaryContainerName": "c",
                                       "trialParameters": [{"name": "units", "reference": "units"}],
                                       "trialSpec": trial}}}


def test_a_clean_native_experiment_is_accepted():
    assert native_experiment(experiment(CLEAN), "vision", "bob")["spec"]["trialTemplate"]["trialSpec"]["spec"]


@pytest.mark.parametrize("path, value, field", CASES, ids=[c[2] for c in CASES])
def test_a_trial_template_a_projects_pod_may_not_have_is_refused_naming_the_field(path, value, field):
    with pytest.raises(UserInputError) as e:
        native_experiment(experiment(with_(path, value)), "vision", "bob")
    assert e.value.field == f"spec.trialTemplate.trialSpec.spec.template.{field}"


def test_a_trainjob_trial_is_accepted_and_its_runtime_patches_pods_are_checked():
    """Issue 31.3: a native Experiment whose trialSpec is a TrainJob (Katib v0.19's trial kind)."""
    made = native_experiment(experiment(CLEAN, kind="TrainJob"), "vision", "bob")
    assert made["spec"]["trialTemplate"]["trialSpec"]["kind"] == "TrainJob"
    with pytest.raises(UserInputError) as e:
        native_experiment(experiment(with_(("hostNetwork",), True), kind="TrainJob"), "vision", "bob")
    assert e.value.field == ("spec.trialTemplate.trialSpec.spec.runtimePatches[0].trainingRuntimeSpec.template.spec."
                             "replicatedJobs[0].template.spec.template.spec.hostNetwork")


def test_a_pytorchjob_trials_replica_templates_are_checked_and_every_finding_counted():
    spec = with_(("containers", 0, "securityContext", "privileged"), True)
    spec["hostPID"] = True
    with pytest.raises(UserInputError) as e:
        native_experiment(experiment(spec, kind="PyTorchJob"), "vision", "bob")
    assert e.value.field == "spec.trialTemplate.trialSpec.spec.pytorchReplicaSpecs.Master.template.spec.hostPID"
    assert "(and 1 more: spec.trialTemplate.trialSpec.spec.pytorchReplicaSpecs.Master.template.spec.containers[0]." \
           "securityContext.privileged)" in e.value.message


@pytest.mark.parametrize("value", ['16", "hostPID": true, "x": "', "16\\", "16\n"])
def test_a_parameter_value_that_could_rewrite_the_trials_json_is_refused(value):
    with pytest.raises(UserInputError) as e:
        native_experiment(experiment(CLEAN, values=("16", value)), "vision", "bob")
    assert e.value.field == "spec.parameters[0].feasibleSpace.list[1]" and "quotes" in e.value.message

