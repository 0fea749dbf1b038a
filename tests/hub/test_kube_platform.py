"""A real JupyterHub with PlatformSpawner on the real control plane, the hub process acting as the
ServiceAccount of `helm-values/hub-rbac.yaml` (its ``KUBECONFIG``), pods run by the process-mode
kubelet: credentials through the hub's REST API and page, a spawn into the team project with a
MIG slice, a credential and a dataset (a PVC bound by the real PV controller), a training job
from that notebook server mounting them (chosen from what the hub lists: the server reads no
Secret, and talks to Kubernetes as its pod's own identity, the project's ServiceAccount, from the
kubeconfig the kubelet writes into the pod's home), and a canary credential value that never
shows up anywhere it should not."""

import json
import pathlib
import re
import time

import pytest
import requests
import yaml

from hub_ext.local.demo import DemoSecrets
from tests.cluster.identities import hub_kubeconfig
from tests.hub.test_hub_harness import form_login
from tests.kube.platform_env import CANARY, GCP_KEY, NODES, dataset_pvc, delete_projects, kube_hub_config, set_loaded

pytestmark = pytest.mark.hub
CREDENTIALS = "/var/run/mlplatform/credentials"


@pytest.fixture
def kube_hub(kube_cluster, hub_factory, tmp_path):
    # the notebook server in its pod has no kubeconfig of ours: it acts as the pod's ServiceAccount
    # (the kubelet's $HOME/.kube/config); what it may mount comes from the hub
    kubelet = kube_cluster.kubelet("process", nodes=NODES, workdir=tmp_path / "kubelet")
    secrets = DemoSecrets.generate()
    # not the default mount root: a job's paths must come from the hub, not from the server's defaults
    hub = hub_factory(kube_hub_config(tmp_path / "state", secrets, credentials_mount_path=CREDENTIALS),
                      env={"KUBECONFIG": str(hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig"))})
    yield hub, secrets, kubelet
    try:
        hub.stop()  # the hub stops its servers (their pods) first
    finally:
        kubelet.stop()
        delete_projects(kube_cluster)


def token_for(hub, user):
    hub.api("POST", f"/users/{user}")
    r = hub.api("POST", f"/users/{user}/tokens", json={"note": "kube platform test"})
    assert r.status_code == 201, r.text
    return r.json()["token"]


def call(hub, method, path, token, **kwargs):
    return requests.request(method, f"{hub.api_url}{path}", headers={"Authorization": f"token {token}"},
                            timeout=60, **kwargs)


def wait_ready(hub, user, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server = hub.api("GET", f"/users/{user}").json()["servers"].get("")
        if server and server["ready"]:
            return server
        if server is None:
            raise AssertionError("the server went away:\n" + hub.log_tail(80))
        time.sleep(0.5)
    raise AssertionError("the server did not become ready:\n" + hub.log_tail(80))


def test_spawn_into_a_team_project_with_a_credential_and_a_dataset(kube_hub, kube_cluster):
    hub, _, kubelet = kube_hub
    alice = token_for(hub, "alice")
    # a credential goes in through REST (the hub creates the project first if it must)
    r = call(hub, "GET", "/mlplatform/users/alice/projects", alice)
    assert r.status_code == 200, r.text
    assert [p["name"] for p in r.json()["projects"]] == ["user-alice", "vision"], r.text
    bad = call(hub, "POST", "/mlplatform/users/alice/projects/vision/credentials", alice,
               json={"name": "training-sa", "type": "gcp-credential", "key_json": GCP_KEY.replace("service_account", "x")})
    assert bad.status_code == 400 and bad.json()["message"].startswith("key_json.type:"), bad.text
    other = call(hub, "POST", "/mlplatform/users/alice/projects/research/credentials", alice,
                 json={"name": "x", "type": "gcp-credential", "key_json": GCP_KEY})
    assert other.status_code == 403 and other.json()["message"].startswith("project:")
    ok = call(hub, "POST", "/mlplatform/users/alice/projects/vision/credentials", alice,
              json={"name": "training-sa", "type": "gcp-credential", "key_json": GCP_KEY,
                    "description": "trainer service account"})
    assert ok.status_code == 201, ok.text
    assert ok.json() == {"project": "vision", "name": "training-sa", "type": "gcp-credential",
                         "description": "trainer service account"}
    assert kube_cluster.get("", "v1", "secrets", "vision", "training-sa")["type"] == "gcp-credential"
    kube_cluster.create("", "v1", "persistentvolumeclaims", "vision",
                        dataset_pvc("vision", "imagenet", "gs://vision-data/imagenet"))
    set_loaded(kube_cluster, "vision", "imagenet", "True", "Loaded")  # as the operator's loader leaves it

    r = call(hub, "POST", "/users/alice/server", alice,
             json={"project": "vision", "profile": "mig-1g", "credentials": ["training-sa"], "datasets": ["imagenet"]})
    assert r.status_code in (201, 202), r.text
    wait_ready(hub, "alice")
    (pod,) = [p for p in kube_cluster.items("", "v1", "pods", "vision")
              if p["metadata"]["labels"].get("component") == "singleuser-server"]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-1g.5gb"] == "1" and pod["spec"]["nodeName"] == "dgx-mig"
    # the notebook server has no kubeconfig of ours: only its pod's ServiceAccount token
    (server,) = kubelet.processes("vision", pod["metadata"]["name"])
    environ = pathlib.Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
    assert not [e for e in environ if e.startswith(b"KUBECONFIG=")]
    home = dict(e.decode().split("=", 1) for e in environ if e.startswith(b"HOME="))["HOME"]
    (user,) = yaml.safe_load(pathlib.Path(home, ".kube", "config").read_text())["users"]
    # in the team project alice's server runs as her own ServiceAccount (gone, with its tokens, when she leaves)
    assert list(user["user"]) == ["tokenFile"] and pod["spec"]["serviceAccountName"] == "mlplatform-member-alice"

    answers = [call(hub, "GET", f"/mlplatform/users/alice/{what}", alice)
               for what in ("credentials", "datasets", "capacity", "projects", "catalog")]
    assert answers[0].json() == {"credentials": [{"project": "vision", "name": "training-sa", "type": "gcp-credential",
                                                  "description": "trainer service account",
                                                  "path": f"{CREDENTIALS}/training-sa/key.json"}]}
    assert answers[1].json()["datasets"][0]["source"] == "gs://vision-data/imagenet"
    assert answers[2].json()["accelerators"]["1g.5gb"] == {"free": 1, "total": 2}
    assert {p["name"]: p["in_use"] for p in answers[3].json()["projects"]}["vision"] == {"1g.5gb": 1}
    events = kube_cluster.items("", "v1", "events", "vision")
    seen = json.dumps([pod, events]) + "".join(a.text for a in answers) + hub.log_text()
    canary = CANARY.replace("-", "")
    assert canary not in seen
    token_env = [e for e in pod["spec"]["containers"][0]["env"] if e["name"] == "JUPYTERHUB_API_TOKEN"]
    assert "value" not in token_env[0] and token_env[0]["valueFrom"]["secretKeyRef"]["key"] == "token"

    # a training job from alice's server mounts what the hub lists for her (the server reads no Secret)
    jobs = f"{hub.url}/user/alice/ml/v1/projects/vision/jobs"
    body = {"jobId": "mounted", "trainingInput": {"pythonModule": "trainer.task",
                                                  "packageUris": ["gs://b/trainer.tar.gz"]},
            "mounts": {"credentials": ["training-sa"], "datasets": ["imagenet"]}}
    headers = {"Authorization": f"token {alice}"}
    refused = requests.post(jobs, json={**body, "mounts": {"credentials": ["prod-sa"]}}, headers=headers, timeout=60)
    assert refused.status_code == 403 and "prod-sa" in refused.json()["error"]["message"], refused.text
    r = requests.post(jobs, json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    job = kube_cluster.get("kubeflow.org", "v1", "tfjobs", "vision", "mounted")  # AI Platform's default: TensorFlow
    (replica,) = job["spec"]["tfReplicaSpecs"].values()
    spec = replica["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == f"{CREDENTIALS}/training-sa/key.json"
    assert {"name": "credential-training-sa", "mountPath": f"{CREDENTIALS}/training-sa", "readOnly": True} in \
        spec["containers"][0]["volumeMounts"]
    assert json.loads(env["MLPLATFORM_DATASETS"]) == {"imagenet": "/datasets/imagenet"}
    volumes = {v["name"]: v.get("secret", v.get("persistentVolumeClaim")) for v in spec["volumes"]}
    assert volumes["credential-training-sa"] == {"secretName": "training-sa", "defaultMode": 0o440}
    assert volumes["dataset-imagenet"] == {"claimName": "imagenet", "readOnly": True}
    assert canary not in json.dumps(job) + r.text

    assert call(hub, "DELETE", "/users/alice/server", alice).status_code in (202, 204)
    deadline = time.monotonic() + 60
    while hub.api("GET", "/users/alice").json()["servers"] and time.monotonic() < deadline:
        time.sleep(0.3)
    assert call(hub, "DELETE", "/mlplatform/users/alice/projects/vision/credentials/training-sa",
                alice).status_code == 204
    assert kube_cluster.get("", "v1", "secrets", "vision", "training-sa") is None


def test_the_credentials_and_datasets_pages_add_and_delete_without_echoing(kube_hub, kube_cluster):
    hub, secrets, _ = kube_hub
    session, r = form_login(hub.url, "alice", secrets.user_password)
    assert r.status_code == 302
    page = session.get(f"{hub.url}/hub/mlplatform/credentials", timeout=60)
    assert page.status_code == 200 and "No credentials yet." in page.text
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
    bad_key = json.loads(GCP_KEY)
    bad_key["client_email"] = "not-an-email"
    r = session.post(f"{hub.url}/hub/mlplatform/credentials", timeout=60, data={
        "_xsrf": xsrf, "action": "add", "project": "vision", "name": "sa", "type": "gcp-credential",
        "key_json": json.dumps(bad_key)})
    assert r.status_code == 400 and "key_json.client_email" in r.text
    assert CANARY.replace("-", "") not in r.text and 'value="sa"' in r.text  # the name is kept, the key is not
    r = session.post(f"{hub.url}/hub/mlplatform/credentials", timeout=60, data={
        "_xsrf": xsrf, "action": "add", "project": "vision", "name": "sa", "type": "gcp-credential",
        "key_json": GCP_KEY, "description": "for training"})
    assert r.status_code == 200 and 'data-credential="sa"' in r.text and "for training" in r.text
    assert CANARY.replace("-", "") not in r.text
    r = session.post(f"{hub.url}/hub/mlplatform/credentials", timeout=60, data={
        "_xsrf": xsrf, "action": "delete", "project": "vision", "name": "sa"})
    assert r.status_code == 200 and 'data-credential="sa"' not in r.text
    assert kube_cluster.get("", "v1", "secrets", "vision", "sa") is None

    # datasets: the home page links the page; a mistake keeps what was typed; a dataset added waits
    # for the loader (the operator: tests/kube/test_operator_datasets.py); REST with the user's token
    assert 'href="/hub/mlplatform/datasets"' in session.get(f"{hub.url}/hub/home", timeout=60).text
    page = session.get(f"{hub.url}/hub/mlplatform/datasets", timeout=60)
    assert page.status_code == 200 and "No datasets yet." in page.text
    r = session.post(f"{hub.url}/hub/mlplatform/datasets", timeout=60, data={
        "_xsrf": xsrf, "action": "add", "project": "vision", "name": "coco", "source": "gs://b/x", "size": "10GB"})
    assert r.status_code == 400 and "size: must be a size with a unit" in r.text and 'value="coco"' in r.text
    r = session.post(f"{hub.url}/hub/mlplatform/datasets", timeout=60, data={
        "_xsrf": xsrf, "action": "add", "project": "vision", "name": "coco", "source": "gs://bkt/x", "size": "1Gi",
        "credential": "", "description": "coco train"})
    assert r.status_code == 200 and 'data-dataset="coco" data-state="loading"' in r.text
    assert "waiting for the loader to start" in r.text
    alice = token_for(hub, "alice")
    bad = call(hub, "POST", "/mlplatform/users/alice/projects/vision/datasets", alice,
               json={"name": "imagenet", "source": "s3://raw/x", "size": "1Gi", "credential": "nope"})
    assert bad.status_code == 400 and "credential" in bad.json()["message"]
    other = call(hub, "POST", "/mlplatform/users/alice/projects/research/datasets", alice,
                 json={"name": "x", "source": "s3://raw/x", "size": "1Gi"})
    assert other.status_code == 403
    ok = call(hub, "POST", "/mlplatform/users/alice/projects/vision/datasets", alice,
              json={"name": "imagenet", "source": "s3://raw/x", "size": "1Gi"})
    assert ok.status_code == 201 and ok.json()["state"] == "loading"
    listed = call(hub, "GET", "/mlplatform/users/alice/projects/vision/datasets", alice)
    assert [d["name"] for d in listed.json()["datasets"]] == ["coco", "imagenet"]
    bob = token_for(hub, "bob")
    assert call(hub, "DELETE", "/mlplatform/users/alice/projects/vision/datasets/imagenet", bob).status_code in (403, 404)
    assert call(hub, "DELETE", "/mlplatform/users/alice/projects/vision/datasets/imagenet", alice).status_code == 204
    r = session.post(f"{hub.url}/hub/mlplatform/datasets", timeout=60, data={
        "_xsrf": xsrf, "action": "delete", "project": "vision", "name": "coco"})
    assert r.status_code == 200
    for _ in range(100):
        if kube_cluster.get("", "v1", "persistentvolumeclaims", "vision", "coco") is None:
            break
        time.sleep(0.2)
    assert kube_cluster.get("", "v1", "persistentvolumeclaims", "vision", "coco") is None
