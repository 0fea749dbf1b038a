"""`kubectl ai-platform` as a subprocess against the real control plane (the Training Operator
played by `tests.kube.training_operator` until the real one runs there; pods bound by the real
scheduler to the test kubelet's CPU and MIG nodes): the project's published catalogue decides which
accelerators a job may ask for; submit, list, describe, stream-logs and cancel, as an admin; and,
as a project member bound to the platform's project Role, what real RBAC refuses it (Secrets)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import pathlib
import sysconfig

import pytest
import yaml

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.core.publish import catalog_json
from hub_ext.manifests.tenancy import CATALOG_CONFIGMAP, MEMBER_LABEL, project_objects
from tests.cluster.kubelet import node_manifest
from tests.kube.job_env import pod
from tests.kube.platform_env import CANARY, GCP_KEY, NVIDIA_TAINT, dataset_pvc, mark_loaded, secret_body
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA as JOB_SCHEMA

pytestmark = pytest.mark.kube
PLUGIN = os.path.join(sysconfig.get_path("scripts"), "kubectl-ai_platform")
TRAINER = pathlib.Path(__file__).resolve().parents[2] / "examples" / "trainer" / "trainer"
CATALOG = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                              "1g.5gb": {"type": "mig", "profile": "1g.5gb"}})


@pytest.fixture
async def cluster(cluster, kube, kube_target):
    """The shared `cluster` (tests/kube/conftest.py) with a MIG node beside its CPU node, and the
    project's published catalogue."""
    cluster.add_node(node_manifest("dgx-mig", {"cpu": "64", "memory": "512Gi", "nvidia.com/mig-1g.5gb": "7"},
                                   taints=NVIDIA_TAINT))
    await kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": CATALOG_CONFIGMAP, "namespace": kube_target.namespace},
                       "data": {"catalog.json": json.dumps(catalog_json(CATALOG.values(), []))}})
    return cluster


async def cli(kube_target, *argv: str, kubeconfig=None) -> tuple[int, str, str]:
    """The plugin as a subprocess, as admin (the test's kubeconfig) unless `kubeconfig` says who."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig or kube_target.kubeconfig), "JUPYTERHUB_USER": "alice",
           "MLPLATFORM_CONFIG": os.devnull, "PYTHONWARNINGS": "ignore"}
    for name in ("MLPLATFORM_LOCAL", "MLPLATFORM_SERVER_URL", "JUPYTERHUB_SERVICE_URL", "JUPYTER_SERVER_URL"):
        env.pop(name, None)  # not the local runtime, nor a notebook server's API (if run in a notebook terminal)
    if "--" in argv:  # the namespace flag goes before the user's arguments
        i = argv.index("--")
        argv = (*argv[:i], "--namespace", kube_target.namespace, *argv[i:])
    else:
        argv = (*argv, "--namespace", kube_target.namespace)
    proc = await asyncio.create_subprocess_exec(PLUGIN, *argv, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


SUBMIT = ["jobs", "submit", "training", "--module-name", "trainer.task", "--packages", "gs://bucket/trainer.tar.gz",
          "--runtime-version", "pytorch-2.3", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4"]


async def test_submit_list_describe_logs_and_cancel_on_a_cluster(cluster, kube_cluster, kube_target):
    ns = kube_target.namespace
    code, out, err = await cli(kube_target, *SUBMIT[:3], "mig_job", *SUBMIT[3:], "--labels", "team=vision",
                               "--master-accelerator", "type=nvidia-a100-1g-5gb,count=1",
                               "--worker-machine-type", "n1-standard-4", "--worker-count", "1", "--", "--epochs=2")
    assert code == 0, err
    assert yaml.safe_load(out) == {"jobId": "mig_job", "state": "QUEUED"}
    assert "Job [mig_job] submitted successfully." in err
    stored = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "mig-job")
    master = stored["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["resources"]["limits"]["nvidia.com/mig-1g.5gb"] == "1"

    # the operator makes pods; the kubelet runs them and they log
    pods = {}
    for role in ("master", "worker"):
        pods[role] = (await pod(kube_cluster, ns, **{"training.kubeflow.org/job-name": "mig-job",
                                                "training.kubeflow.org/replica-type": role}))["metadata"]["name"]
        cluster.run(ns, pods[role])
        cluster.log(ns, pods[role], f"{role} says hello\n", container="pytorch")
    cluster.finish(ns, pods["worker"], container="pytorch")
    cluster.finish(ns, pods["master"], container="pytorch")

    code, out, err = await cli(kube_target, "jobs", "stream-logs", "mig_job", "--task-name", "master-replica-0")
    assert code == 0, err
    assert "master-replica-0" in out and "master says hello" in out and "worker says" not in out
    code, out, err = await cli(kube_target, "jobs", "describe", "mig_job", "--format", "json")
    job = json.loads(out)
    JOB_SCHEMA.validate(job)
    assert job["state"] == "SUCCEEDED" and job["labels"] == {"team": "vision"}

    code, out, err = await cli(kube_target, *SUBMIT[:3], "long_job", *SUBMIT[3:])
    assert code == 0, err
    code, out, err = await cli(kube_target, "jobs", "list", "--filter", "state=SUCCEEDED")
    assert out.split("\n")[0].split() == ["JOB_ID", "STATUS", "CREATED"] and "mig_job" in out and "long_job" not in out
    code, out, err = await cli(kube_target, "jobs", "cancel", "long_job")
    assert code == 0, err
    stored = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "long-job")
    assert stored["spec"]["runPolicy"]["suspend"] is True


async def test_an_accelerator_the_project_does_not_offer_is_refused_and_nothing_is_made(cluster, kube_cluster,
                                                                                        kube_target):
    code, out, err = await cli(kube_target, *SUBMIT[:3], "v100_job", *SUBMIT[3:],
                               "--master-accelerator", "type=nvidia-tesla-v100,count=1")
    assert (code, out) == (2, "")
    assert "[--master-accelerator]" in err and "no NVIDIA_TESLA_V100 on this platform" in err, err
    assert kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", kube_target.namespace, "v100-job") is None


async def test_package_path_is_built_and_shipped_in_a_configmap_owned_by_the_job(cluster, kube_cluster, kube_target):
    """The same ``--package-path`` as on the local runtime: built here, shipped through the cluster."""
    ns = kube_target.namespace
    code, out, err = await cli(kube_target, "jobs", "submit", "training", "shipped_job", "--module-name", "trainer.task",
                               "--package-path", str(TRAINER), "--runtime-version", "pytorch-2.3", "--", "--epochs=2")
    assert code == 0, err
    assert yaml.safe_load(out) == {"jobId": "shipped_job", "state": "QUEUED"}
    job = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "shipped-job")
    cm = kube_cluster.get("", "v1", "configmaps", ns, "shipped-job-package")
    assert cm["metadata"]["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                                  "name": "shipped-job", "uid": job["metadata"]["uid"]}]
    (name, data), = cm["binaryData"].items()
    assert name == "mlplatform_example_trainer-0.1.0.tar.gz"
    assert hashlib.sha256(base64.b64decode(data)).hexdigest() == cm["metadata"]["annotations"][
        "mlplatform.io/package-sha256"]
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert pod["initContainers"][0]["command"][-1] == f"configmap://shipped-job-package/{name}"

    code, out, err = await cli(kube_target, "jobs", "submit", "training", "unbuilt_job", "--module-name", "m",
                               "--package-path", str(TRAINER.parent / "README.md"), "--runtime-version", "pytorch-2.3")
    assert (code, out) == (2, "") and "Invalid value for [--package-path]: " in err, err
    assert kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "unbuilt-job") is None


async def test_credentials_and_datasets_of_the_project_are_mounted_into_the_job(cluster, kube_cluster, kube,
                                                                                kube_target):
    """``--credentials``/``--datasets`` are chosen from the project's Secrets and PVCs, read with the
    user's own kubeconfig: mounted read-only, named by path in the environment, content nowhere."""
    ns = kube_target.namespace
    await kube.create(secret_body(ns, "training-sa", "gcp-credential", {"key.json": GCP_KEY}))
    await kube.create(secret_body(ns, "s3-reader", "aws-credential", {"credentials": "[default]\n", "config": "x"}))
    await kube.create(dataset_pvc(ns, "imagenet", "gs://vision-data/imagenet"))
    await mark_loaded(kube, ns, "imagenet")
    code, out, err = await cli(kube_target, *SUBMIT[:3], "mounted_job", *SUBMIT[3:],
                               "--credentials", "training-sa,s3-reader", "--datasets", "imagenet")
    assert code == 0, err
    spec = kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "mounted-job")["spec"]
    pod = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/etc/mlplatform/credentials/training-sa/key.json"
    assert env["AWS_SHARED_CREDENTIALS_FILE"] == "/etc/mlplatform/credentials/s3-reader/credentials"
    assert env["AWS_CONFIG_FILE"] == "/etc/mlplatform/credentials/s3-reader/config"
    assert json.loads(env["MLPLATFORM_DATASETS"]) == {"imagenet": "/datasets/imagenet"}
    mounts = {m["mountPath"]: m.get("readOnly") for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/etc/mlplatform/credentials/training-sa"] and mounts["/datasets/imagenet"]
    assert {"secretName": "training-sa", "defaultMode": 0o440} in [v.get("secret") for v in pod["volumes"]]
    assert CANARY.replace("-", "") not in json.dumps(spec) + out + err

    code, out, err = await cli(kube_target, *SUBMIT[:3], "unmounted_job", *SUBMIT[3:], "--datasets", "coco")
    assert (code, out) == (1, ""), err
    assert "PERMISSION_DENIED" in err and "no dataset 'coco'" in err, err
    assert kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "unmounted-job") is None


async def member(kube_cluster, ns: str, tmp_path, username: str = "alice"):
    """A kubeconfig acting as `username`'s own Kubernetes identity (``oidc:<name>``), bound to the
    project Role by the objects the hub makes for a member (`hub_ext.manifests.tenancy.project_objects`)."""
    identity = f"oidc:{username}"
    project = Project(name=ns, display_name=ns, personal=True, profiles=frozenset(), limits=None)
    for obj in project_objects(project, CATALOG, [], members=[(username, identity)]):
        if obj["kind"] == "Role" or MEMBER_LABEL in obj["metadata"]["labels"]:  # the Role and alice's binding
            kube_cluster.create("rbac.authorization.k8s.io", "v1", obj["kind"].lower() + "s", ns, obj)
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": identity, "groups": ["system:authenticated"],
        "resourceAttributes": {"namespace": ns, "verb": "create", "group": "kubeflow.org", "resource": "pytorchjobs"}}}
    for _ in range(100):  # the authorizer sees the binding once its informer has it
        if kube_cluster.create("authorization.k8s.io", "v1", "subjectaccessreviews", None, review)["status"].get(
                "allowed"):
            break
        await asyncio.sleep(0.05)
    return kube_cluster.write_kubeconfig(tmp_path / f"{username}.kubeconfig", ns, user=identity, groups=())


async def test_an_identity_that_may_not_read_secrets_is_told_where_to_choose_credentials(cluster, kube_cluster, kube,
                                                                                        kube_target, tmp_path):
    """The platform's project Role grants members PVCs but not Secrets: datasets still work from a
    laptop, and asking for a credential says why not and where instead."""
    ns = kube_target.namespace
    await kube.create(dataset_pvc(ns, "imagenet", "gs://vision-data/imagenet"))
    await mark_loaded(kube, ns, "imagenet")
    alice = await member(kube_cluster, ns, tmp_path)
    code, out, err = await cli(kube_target, *SUBMIT[:3], "datasets_job", *SUBMIT[3:], "--datasets", "imagenet",
                               kubeconfig=alice)
    assert code == 0, err
    assert kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "datasets-job") is not None
    code, out, err = await cli(kube_target, *SUBMIT[:3], "credentials_job", *SUBMIT[3:], "--credentials", "sa",
                               kubeconfig=alice)
    assert (code, out) == (1, "") and "PERMISSION_DENIED" in err and "submit from a notebook server" in err, err
    assert kube_cluster.get("kubeflow.org", "v1", "pytorchjobs", ns, "credentials-job") is None
    assert "Unclosed" not in err  # the CLI closes its connections on an error too
    assert kube_cluster.requests("GET", f"/api/v1/namespaces/{ns}/secrets")  # asked; RBAC said no
