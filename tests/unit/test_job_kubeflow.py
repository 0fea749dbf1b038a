"""A job plan as Kubernetes objects: whole manifests against golden YAML, every PyTorchJob/TFJob
against the Training Operator's CRD schema (tests/cluster/crds), every batch Job and pod template
with kubernetes-validate. Regenerate the golden files with ``UPDATE_GOLDEN=1``."""

import copy
import json
import pathlib

import kubernetes_validate
import pytest
import yaml

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import UserInputError
from hub_ext.manifests.mounts import MountSettings, credential_from_secret, dataset_from_pvc
from server_ext.jobs.kube.kubeflow import (
    CANCEL_ANNOTATION,
    RUN_MODULE,
    SPEC_ANNOTATION,
    KubeSettings,
    cancel_patch,
    deadline_seconds,
    job_manifest,
    pod_selector,
    replica_type,
    resource_path,
)
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import JOB_ID_ANNOTATION, Job, parse_job
from server_ext.jobs.plan import PlanSettings, Runtime, Runtimes, plan_job, with_package
from tests.cluster.crd_schema import prune, validate
from tests.unit.golden import assert_golden

pytestmark = pytest.mark.unit

GOLDEN = pathlib.Path(__file__).parent / "golden" / "jobs"
CRDS = pathlib.Path(__file__).resolve().parents[1] / "cluster" / "crds"
K8S_VERSION = "1.31.0"
CANARY = "CANARY-7f3a9c-never-in-a-manifest"

CATALOG = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb": {"type": "mig", "profile": "3g.20gb", "node_selector": {"mlplatform.io/pool": "dgx"}},
})
RUNTIMES = Runtimes({**Runtimes().table, "python-3.11": {"3.11": Runtime("python:3.11-slim")}})
PLAN_SETTINGS = PlanSettings(Machines(CATALOG, aliases={"NVIDIA_TESLA_V100": "a100"}), RUNTIMES)
MOUNT_SETTINGS = MountSettings({"gcp-credential": "mlplatform.io/gcp-credential",
                                "aws-credential": "mlplatform.io/aws-credential"})
SETTINGS = KubeSettings(MOUNT_SETTINGS)

# credentials as the hub sees them: Secrets whose data hold the canary (the manifest must not)
GCP_SECRET = {"type": "mlplatform.io/gcp-credential", "metadata": {"name": "training-sa"},
              "data": {"key.json": CANARY}}
AWS_SECRET = {"type": "mlplatform.io/aws-credential", "metadata": {"name": "s3-reader"},
              "data": {"credentials": CANARY, "config": CANARY}}
GCP = credential_from_secret(GCP_SECRET, MOUNT_SETTINGS)
AWS = credential_from_secret(AWS_SECRET, MOUNT_SETTINGS)
IMAGENET = dataset_from_pvc({"metadata": {"name": "imagenet", "labels": {"mlplatform.io/dataset": "true"}},
                             "spec": {"resources": {"requests": {"storage": "200Gi"}}}}, MOUNT_SETTINGS)

MODULE = {"pythonModule": "trainer.task", "packageUris": ["gs://bucket/trainer-0.1.tar.gz"]}
JOBS = {
    # one plain replica: a runtime without a framework → batch/v1 Job
    "job-python-module": (
        {"jobId": "census_v2", "labels": {"team": "vision"},
         "trainingInput": {**MODULE, "runtimeVersion": "python-3.11", "args": ["--epochs=3"],
                           "jobDir": "s3://bucket/out", "scheduling": {"maxRunningTime": "7200s"}}},
        {"credentials": (AWS,)}),
    # PyTorch: a master and two workers on MIG slices, a GCP key and a dataset
    "pytorchjob-mig": (
        {"jobId": "resnet_ddp", "trainingInput": {
            **MODULE, "scaleTier": "CUSTOM", "runtimeVersion": "pytorch-2.5", "masterType": "n1-highmem-8",
            "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_3G_20GB", "count": 1}},
            "workerType": "n1-standard-4", "workerCount": 2,
            "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": 1}},
            "args": ["--batch-size", "64"]}},
        {"credentials": (GCP,), "datasets": (IMAGENET,)}),
    # TensorFlow: chief, workers and a parameter server, legacy machine names
    "tfjob-chief-worker-ps": (
        {"jobId": "Wide_Deep", "trainingInput": {
            **MODULE, "scaleTier": "CUSTOM", "runtimeVersion": "2.11", "masterType": "complex_model_m",
            "workerType": "standard_v100", "workerCount": 2, "parameterServerType": "large_model",
            "parameterServerCount": 1, "evaluatorType": "complex_model_s", "evaluatorCount": 1,
            "scheduling": {"maxRunningTime": "3600.5s"}}},
        {}),
    # a custom container: its own command, the job's args as the container's args
    "custom-container": (
        {"jobId": "custom_train", "trainingInput": {
            "scaleTier": "CUSTOM", "masterType": "a2-highgpu-1g", "args": ["--epochs", "2", "$(rm -rf /)"],
            "masterConfig": {"imageUri": "ghcr.io/example/train:1.2", "containerCommand": ["/app/train"]}}},
        {"credentials": (GCP, AWS)}),
}


# jobs that ship a package built from --package-path: (sdist file name, size)
SHIPPED = {"job-shipped-package": ("mlplatform_example_trainer-0.1.0.tar.gz", 4096)}
JOBS["job-shipped-package"] = (
    {"jobId": "shipped_v1", "trainingInput": {"pythonModule": "trainer.task", "runtimeVersion": "python-3.11",
                                              "args": ["--epochs=3"]}},
    {"credentials": (GCP,)})
SHA = "9f" * 32


def make_plan(name: str, job_id: str | None = None):
    doc, mounts = JOBS[name]
    doc = {**doc, "jobId": job_id or doc["jobId"]}
    plan = plan_job(parse_job(doc, shipped_package=name in SHIPPED), PLAN_SETTINGS, project="vision",
                    owner="alice@example.com", **mounts)
    if name in SHIPPED:
        filename, size = SHIPPED[name]
        plan = with_package(plan, pathlib.Path("/tmp/build") / filename, SHA, size)
    return plan


def _crd_schema(plural: str) -> dict:
    crd = yaml.safe_load((CRDS / f"kubeflow.org_{plural}.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


SCHEMAS = {"PyTorchJob": _crd_schema("pytorchjobs"), "TFJob": _crd_schema("tfjobs")}


def check_kubernetes(manifest: dict) -> None:
    """CRD schema with nothing pruned (operator kinds) or kubernetes-validate (batch Jobs), and every
    pod template with kubernetes-validate; a TrainJob's node pod (its runtime patch with the
    trainer's container fields; the Trainer CRD's own check is the kube tier's)."""
    kind = manifest["kind"]
    if kind == "TrainJob":
        templates = trainjob_node_templates(manifest)
        assert templates
    elif kind in SCHEMAS:
        pruned = copy.deepcopy(manifest)
        assert prune(pruned, SCHEMAS[kind]) == [] and pruned == manifest
        assert validate(manifest, SCHEMAS[kind]) == []
        specs = manifest["spec"]["pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"]
        templates = [s["template"] for s in specs.values()]
    else:
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
        templates = [manifest["spec"]["template"]]
    for template in templates:
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "PodTemplate",
                                      "metadata": {"name": manifest["metadata"]["name"]}, "template": template},
                                     K8S_VERSION, strict=True)


def trainjob_node_templates(manifest: dict) -> list[dict]:
    """A TrainJob's node pod templates as the runtime gets them: each runtime patch's step, its first
    container given the TrainJob's trainer fields (image, command, args, env, resources)."""
    trainer = manifest["spec"]["trainer"]
    main = {name: trainer[field] for name, field in (("image", "image"), ("command", "command"), ("args", "args"),
                                                     ("env", "env"), ("resources", "resourcesPerNode"))
            if field in trainer}
    templates = []
    for patch in manifest["spec"].get("runtimePatches") or []:
        for step in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            template = step["template"]["spec"]["template"]
            first, *rest = template["spec"]["containers"]
            templates.append({**template, "spec": {**template["spec"], "containers": [{**first, **main}, *rest]}})
    return templates


@pytest.mark.parametrize("name", sorted(JOBS))
def test_manifests_match_the_golden_files(name):
    assert_golden(GOLDEN / f"{name}.yaml", job_manifest(make_plan(name), SETTINGS), pathlib.Path(__file__).name)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_manifests_are_valid_kubernetes_objects(name):
    check_kubernetes(job_manifest(make_plan(name), SETTINGS))


@pytest.mark.parametrize("training, kind", [
    ({**MODULE, "scaleTier": "STANDARD_1"}, "TFJob"),
    ({**MODULE, "scaleTier": "BASIC_GPU"}, "TFJob"),
    ({**MODULE, "runtimeVersion": "pytorch-2.3"}, "PyTorchJob"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 1,
      "masterConfig": {"imageUri": "ghcr.io/x/y:1", "containerArgs": ["a"]},
      "workerConfig": {"imageUri": "ghcr.io/x/y:1"}}, "TFJob"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"imageUri": "ghcr.io/x/y:1"}}, "Job"),
])
def test_every_kind_validates(training, kind):
    plan = plan_job(parse_job({"jobId": "j", "trainingInput": training}),
                    PlanSettings(Machines(CATALOG, aliases={"NVIDIA_TESLA_K80": "1g.5gb"}), RUNTIMES),
                    project="team-a", owner="Bob", credentials=(GCP, AWS), datasets=(IMAGENET,))
    manifest = job_manifest(plan, SETTINGS)
    assert manifest["kind"] == kind
    check_kubernetes(manifest)
    cancelled = _merge(manifest, cancel_patch(kind, "2026-12-02T10:00:00Z"))
    check_kubernetes(cancelled)


def _merge(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


@pytest.mark.parametrize("name", sorted(JOBS))
def test_secret_values_never_appear_only_paths(name):
    manifest = job_manifest(make_plan(name), SETTINGS)
    text = json.dumps(manifest)
    assert CANARY not in text
    for pod in _pod_specs(manifest):
        for c in pod["containers"] + pod.get("initContainers", []):
            env = {e["name"]: e for e in c.get("env", [])}
            assert all(set(e) == {"name", "value"} for e in env.values())  # no valueFrom secretKeyRef
            for var in ("GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
                if var in env:
                    path = env[var]["value"]
                    assert path.startswith("/etc/mlplatform/credentials/")
                    mounts = [m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
                    assert len(mounts) == 1 and mounts[0]["readOnly"] is True


def _pod_specs(manifest):
    if manifest["kind"] == "Job":
        return [manifest["spec"]["template"]["spec"]]
    specs = manifest["spec"]["pytorchReplicaSpecs" if manifest["kind"] == "PyTorchJob" else "tfReplicaSpecs"]
    return [s["template"]["spec"] for s in specs.values()]


def test_the_job_can_be_rebuilt_from_its_annotations():
    plan = make_plan("pytorchjob-mig", job_id="ResNet__DDP")
    meta = job_manifest(plan, SETTINGS)["metadata"]
    assert meta["name"] == plan.name != "ResNet__DDP"
    assert meta["annotations"][JOB_ID_ANNOTATION] == "ResNet__DDP"
    assert meta["annotations"]["mlplatform.io/owner"] == "alice@example.com"
    assert meta["labels"]["mlplatform.io/owner"] == "alice-example-com---ff8d9819"
    spec = meta["annotations"][SPEC_ANNOTATION]
    assert json.loads(spec) == {k: plan.job.doc[k] for k in ("jobId", "trainingInput")}
    assert " " not in spec.replace("--batch-size", "")  # compact


def kubernetes_expand(word: str, env: dict[str, str]) -> str:
    """What the kubelet makes of a command word: ``$(VAR)`` of a defined variable is replaced, ``$$`` is
    ``$``, anything else is kept."""
    out, i = [], 0
    while i < len(word):
        if word[i] == "$" and i + 1 < len(word):
            if word[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            end = word.find(")", i + 2)
            if word[i + 1] == "(" and end != -1:
                name = word[i + 2:end]
                out.append(env.get(name, word[i:end + 1]))
                i = end + 1
                continue
        out.append(word[i])
        i += 1
    return "".join(out)


NASTY = ["--name=$(touch /tmp/pwned)", "`id`", "a'b\"c", "; exit 1", "$(CLOUD_ML_JOB_ID)", "$$", "100$"]


def test_module_arguments_are_never_part_of_the_shell_script():
    doc = {"jobId": "j", "trainingInput": {**MODULE, "args": NASTY, "jobDir": "s3://b/o",
                                           "runtimeVersion": "python-3.11"}}
    job = parse_job(doc)
    # the model refuses such a module name; the manifest must not depend on that
    job = Job({**job.doc, "trainingInput": {**job.training, "pythonModule": "trainer.task;id"}})
    plan = plan_job(job, PLAN_SETTINGS, project="p", owner="o")
    (pod,) = _pod_specs(job_manifest(plan, SETTINGS))
    (main,) = pod["containers"]
    assert main["command"] == ["sh", "-c", RUN_MODULE]
    env = {e["name"]: e["value"] for e in main["env"]}
    argv = [kubernetes_expand(w, env) for w in main["command"] + main["args"]]
    assert argv == ["sh", "-c", RUN_MODULE, "trainer.task;id", *NASTY, "--job-dir=s3://b/o"]
    assert "$(" not in RUN_MODULE and "$$" not in RUN_MODULE
    assert 'exec "$py" -m "$0" "$@"' in RUN_MODULE and "--no-deps" in RUN_MODULE
    assert '--target "$code/site"' in RUN_MODULE
    (fetch,) = pod["initContainers"]
    assert fetch["command"] == ["python", "-m", "server_ext.runtimes.fetch", "--job", "j", "--dest", "/mlplatform/code",
                                "gs://bucket/trainer-0.1.tar.gz"]


def test_a_custom_image_may_bring_the_module_itself():
    doc = {"jobId": "j", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                           "pythonModule": "trainer.task", "args": ["--x"],
                                           "masterConfig": {"imageUri": "ghcr.io/x/y:1"}}}
    plan = plan_job(parse_job(doc), PLAN_SETTINGS, project="p", owner="o")
    (pod,) = _pod_specs(job_manifest(plan, SETTINGS))
    assert "initContainers" not in pod and {"name": "code", "emptyDir": {}} in pod["volumes"]
    assert pod["containers"][0]["args"] == ["trainer.task", "--x"]
    check_kubernetes(job_manifest(plan, SETTINGS))


def test_custom_container_words_reach_the_process_as_written():
    doc = {"jobId": "j", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {
        "imageUri": "ghcr.io/x/y:1", "containerCommand": ["sh", "-c", 'echo "$0 $(CLOUD_ML_JOB_ID)"'],
        "containerArgs": NASTY}}}
    plan = plan_job(parse_job(doc), PLAN_SETTINGS, project="p", owner="o")
    ((main,),) = [p["containers"] for p in _pod_specs(job_manifest(plan, SETTINGS))]
    env = {e["name"]: e["value"] for e in main["env"]}
    assert [kubernetes_expand(w, env) for w in main["command"] + main["args"]] == [
        "sh", "-c", 'echo "$0 $(CLOUD_ML_JOB_ID)"', *NASTY]


@pytest.mark.parametrize("container_args, expected", [
    ((), ["--epochs", "2"]),  # the job's args go to the ENTRYPOINT
    (["--lr", "0.1"], ["--lr", "0.1"]),
])
def test_custom_container_args(container_args, expected):
    doc = {"jobId": "j", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                           "args": ["--epochs", "2"],
                                           "masterConfig": {"imageUri": "ghcr.io/x/y:1",
                                                            "containerArgs": list(container_args)}}}
    plan = plan_job(parse_job(doc), PLAN_SETTINGS, project="p", owner="o")
    (pod,) = _pod_specs(job_manifest(plan, SETTINGS))
    assert "command" not in pod["containers"][0] and "initContainers" not in pod
    assert pod["containers"][0]["args"] == expected


def test_settings_choose_account_image_code_dir_and_fs_group():
    settings = KubeSettings(MOUNT_SETTINGS, service_account="runner", fetcher_image="registry.local/tools:2",
                            code_dir="/code", fs_group=None)
    (pod,) = _pod_specs(job_manifest(make_plan("job-python-module"), settings))
    assert pod["serviceAccountName"] == "runner" and "fsGroup" not in pod["securityContext"]
    assert pod["initContainers"][0]["image"] == "registry.local/tools:2"
    assert {"name": "MLPLATFORM_CODE_DIR", "value": "/code"} in pod["containers"][0]["env"]
    assert [v["secret"]["defaultMode"] for v in pod["volumes"] if "secret" in v] == [0o400]  # root reads it


def test_every_container_runs_as_the_user_settings_name():
    settings = KubeSettings(MOUNT_SETTINGS, run_as=(20001, 100))
    (pod,) = _pod_specs(job_manifest(make_plan("job-python-module"), settings))
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 100,
                                      "runAsUser": 20001, "runAsGroup": 100, "runAsNonRoot": True}
    assert [v["secret"]["defaultMode"] for v in pod["volumes"] if "secret" in v] == [0o440]  # the fsGroup reads it
    (default,) = _pod_specs(job_manifest(make_plan("job-python-module"), SETTINGS))
    assert "runAsUser" not in default["securityContext"]  # the image's user


def test_the_plan_is_not_changed():
    plan = make_plan("tfjob-chief-worker-ps")
    before = copy.deepcopy(plan.job.doc)
    assert job_manifest(plan, SETTINGS) == job_manifest(plan, SETTINGS)
    assert plan.job.doc == before


@pytest.mark.parametrize("duration, seconds", [("7200s", 7200), ("1.5s", 2), ("0.000000001s", 1), ("60s", 60)])
def test_max_running_time(duration, seconds):
    assert deadline_seconds(duration) == seconds


@pytest.mark.parametrize("duration", ["0s", "2h", "-5s", "1.0000000001s", ""])
def test_bad_max_running_time(duration):
    with pytest.raises(UserInputError) as e:
        deadline_seconds(duration)
    assert e.value.field == "trainingInput.scheduling.maxRunningTime"


@pytest.mark.parametrize("kind, role, expected", [
    ("PyTorchJob", "master", "Master"), ("PyTorchJob", "worker", "Worker"), ("TFJob", "master", "Chief"),
    ("TFJob", "worker", "Worker"), ("TFJob", "ps", "PS"), ("TFJob", "evaluator", "Evaluator"),
])
def test_replica_types(kind, role, expected):
    assert replica_type(kind, role) == expected


@pytest.mark.parametrize("kind, role", [("PyTorchJob", "ps"), ("Job", "master")])
def test_roles_a_kind_lacks(kind, role):
    with pytest.raises(ValueError):
        replica_type(kind, role)


def _operator_selector(replica: str, index: int) -> str:
    return (f"training.kubeflow.org/job-name=resnet,training.kubeflow.org/replica-type={replica},"
            f"training.kubeflow.org/replica-index={index}")


@pytest.mark.parametrize("kind, task, selector", [
    ("PyTorchJob", "master-replica-0", _operator_selector("master", 0)),
    ("PyTorchJob", "worker-1", _operator_selector("worker", 1)),
    ("TFJob", "master-replica-0", _operator_selector("chief", 0)),
    ("TFJob", "ps-0", _operator_selector("ps", 0)),
    ("TFJob", "evaluator-replica-2", _operator_selector("evaluator", 2)),
    ("Job", "master-replica-0", "batch.kubernetes.io/job-name=resnet"),
])
def test_pod_selectors(kind, task, selector):
    assert pod_selector(kind, "resnet", task) == selector


@pytest.mark.parametrize("kind, task", [("Job", "worker-0"), ("PyTorchJob", "ps-0"), ("TFJob", "launcher-0")])
def test_pod_selectors_of_tasks_a_kind_lacks(kind, task):
    with pytest.raises(UserInputError) as e:
        pod_selector(kind, "resnet", task)
    assert e.value.field == "task"


@pytest.mark.parametrize("kind, name, path", [
    ("PyTorchJob", "resnet", "/apis/kubeflow.org/v1/namespaces/vision/pytorchjobs/resnet"),
    ("TFJob", None, "/apis/kubeflow.org/v1/namespaces/vision/tfjobs"),
    ("Job", "census", "/apis/batch/v1/namespaces/vision/jobs/census"),
])
def test_resource_paths(kind, name, path):
    assert resource_path(kind, "vision", name) == path


@pytest.mark.parametrize("kind, spec", [
    ("PyTorchJob", {"runPolicy": {"suspend": True}}), ("TFJob", {"runPolicy": {"suspend": True}}),
    ("Job", {"suspend": True}),
])
def test_cancel_patches_suspend_and_record_the_request(kind, spec):
    assert cancel_patch(kind, "2026-12-02T10:00:00Z") == {
        "metadata": {"annotations": {CANCEL_ANNOTATION: "2026-12-02T10:00:00Z"}}, "spec": spec}


def test_the_crds_have_the_fields_we_patch():
    for schema in SCHEMAS.values():
        run_policy = schema["properties"]["spec"]["properties"]["runPolicy"]["properties"]
        assert {"suspend", "backoffLimit", "cleanPodPolicy", "activeDeadlineSeconds"} <= set(run_policy)


def test_a_package_in_a_configmap_is_mounted_in_the_fetch_container_only():
    plan = make_plan("job-shipped-package")
    uri = "configmap://shipped-v1-package/mlplatform_example_trainer-0.1.0.tar.gz"
    assert plan.package_uris == (uri,) and plan.job.training["packageUris"] == [uri]
    (pod,) = _pod_specs(job_manifest(plan, SETTINGS))
    assert {"name": "package", "configMap": {"name": "shipped-v1-package", "optional": False, "items": [
        {"key": "mlplatform_example_trainer-0.1.0.tar.gz",
         "path": "shipped-v1-package/mlplatform_example_trainer-0.1.0.tar.gz"}]}} in pod["volumes"]
    (fetch,) = pod["initContainers"]
    assert fetch["command"][-1] == uri
    assert {"name": "MLPLATFORM_PACKAGES_DIR", "value": "/mlplatform/packages"} in fetch["env"]
    assert {"name": "package", "mountPath": "/mlplatform/packages", "readOnly": True} in fetch["volumeMounts"]
    for c in pod["containers"]:
        assert "package" not in [m["name"] for m in c["volumeMounts"]]
        assert "MLPLATFORM_PACKAGES_DIR" not in [e["name"] for e in c["env"]]
    doc = {"jobId": "ddp", "trainingInput": {"pythonModule": "trainer.task", "scaleTier": "CUSTOM",
                                             "runtimeVersion": "pytorch-2.5", "masterType": "n1-standard-4",
                                             "workerType": "n1-standard-4", "workerCount": 1}}
    plan = plan_job(parse_job(doc, shipped_package=True), PLAN_SETTINGS, project="p", owner="o")
    manifest = job_manifest(with_package(plan, pathlib.Path("/tmp/t-1.0.tar.gz"), SHA, 10), SETTINGS)
    check_kubernetes(manifest)  # the CRD keeps the configMap volume and its items (nothing pruned)
    assert all(pod["volumes"][-2]["configMap"]["name"] == "ddp-package" for pod in _pod_specs(manifest))


def test_a_staged_package_needs_no_volume_and_comes_first():
    doc = {"jobId": "big", "trainingInput": {**MODULE, "runtimeVersion": "pytorch-2.5"}}
    plan = plan_job(parse_job(doc), PLAN_SETTINGS, project="p", owner="o")
    plan = with_package(plan, pathlib.Path("/tmp/t-1.0.tar.gz"), SHA, 2_000_000, staging_bucket="gs://stage/x")
    staged = f"gs://stage/x/big/packages/{SHA}/t-1.0.tar.gz"
    assert plan.package.delivery == "bucket" and plan.package.uri == staged and plan.package.configmap is None
    manifest = job_manifest(plan, SETTINGS)
    check_kubernetes(manifest)
    for pod in _pod_specs(manifest):
        assert pod["initContainers"][0]["command"][-2:] == [staged, "gs://bucket/trainer-0.1.tar.gz"]
        assert "package" not in [v["name"] for v in pod["volumes"]]
        assert "MLPLATFORM_PACKAGES_DIR" not in [e["name"] for e in pod["initContainers"][0]["env"]]


@pytest.mark.parametrize("training, size, bucket, message", [
    ({**MODULE, "runtimeVersion": "python-3.11"}, 2_000_000, None, "package.path: the package is 2.0 MB"),
    ({**MODULE, "runtimeVersion": "python-3.11", "packageUris": ["s3://b/t-1.0.tar.gz"]}, 10, None,
     "package.path: the package's file 't-1.0.tar.gz' has the same name as s3://b/t-1.0.tar.gz"),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"imageUri": "ghcr.io/x/y:1"}}, 10,
     None, "package.path: needs a pythonModule"),
    ({**MODULE, "runtimeVersion": "python-3.11"}, 2_000_000, "http://nope", "package.stagingBucket: 'http://nope'"),
])
def test_packages_that_cannot_ship(training, size, bucket, message):
    plan = plan_job(parse_job({"jobId": "j", "trainingInput": training}), PLAN_SETTINGS, project="p", owner="o")
    with pytest.raises(UserInputError) as e:
        with_package(plan, pathlib.Path("/tmp/t-1.0.tar.gz"), SHA, size, staging_bucket=bucket)
    assert str(e.value).startswith(message)
    with pytest.raises(UserInputError, match="cannot be a ConfigMap key"):
        with_package(make_plan("job-python-module"), pathlib.Path("/tmp/t 1.tar.gz"), SHA, 10)
