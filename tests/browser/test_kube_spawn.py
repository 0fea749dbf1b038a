"""Chromium through a real JupyterHub running PlatformSpawner on the real control plane (the hub
process acting as hub-rbac.yaml's ServiceAccount; pods bound by the real scheduler and run by the
process-mode kubelet): alice adds a GCP credential on the hub's page, picks a MIG profile in her
team project with that credential and a dataset (a PVC bound to a volume by the PV controller,
whose directory holds the data), lands in JupyterLab, and a notebook finds the key file at its
path, the dataset's files, and no key material in os.environ."""

import json
import re

import pytest

from tests.browser.kube_hub import kube_hub_at_spawn_form
from tests.harness.browser import run_notebook, screenshot
from tests.kube.platform_env import (
    CANARY,
    GCP_KEY,
    dataset_pvc,
    delete_projects,
    pod_home,
    pvc_dir,
    set_loaded,
)

pytestmark = pytest.mark.browser

CHECK = [
    "import json, os\n",
    "path = os.environ['GOOGLE_APPLICATION_CREDENTIALS']\n",
    "key = json.load(open(path))\n",
    "datasets = json.loads(os.environ['MLPLATFORM_DATASETS'])\n",
    f"leaked = any('{CANARY.replace('-', '')}' in v for v in os.environ.values())\n",
    "print('key:', key['client_email'], path.endswith('/key.json'), oct(os.stat(path).st_mode & 0o777))\n",
    "print('dataset:', open(os.path.join(datasets['imagenet'], 'README.txt')).read().strip())\n",
    "print('in environ:', leaked)",
]
NOTEBOOK = {"cells": [{"cell_type": "code", "execution_count": None, "id": "check", "metadata": {}, "outputs": [],
                       "source": CHECK}],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def projects(kube_cluster):
    """Set up before the hub (so torn down after it): then the kubelets stop, the projects go."""
    yield kube_cluster
    for kubelet in list(kube_cluster.kubelets):
        kubelet.stop()
    delete_projects(kube_cluster)


def test_credential_page_then_mig_spawn_with_credential_and_dataset(projects, hub_factory, browser_page, tmp_path):
    cluster, page = projects, browser_page
    hub, workdir = kube_hub_at_spawn_form(cluster, hub_factory, page, tmp_path)
    # the form provisioned alice's projects; a dataset in the team project, filled and marked Loaded
    # as the operator's loader leaves it (the loader itself: tests/kube/test_operator_datasets.py)
    cluster.create("", "v1", "persistentvolumeclaims", "vision",
                   dataset_pvc("vision", "imagenet", "gs://vision-data/imagenet"))
    (pvc_dir(cluster, "vision", "imagenet") / "README.txt").write_text("imagenet train split\n")
    set_loaded(cluster, "vision", "imagenet", "True", "Loaded")

    page.goto(f"{hub.url}/hub/mlplatform/credentials")
    page.select_option("#credential-project", "vision")
    page.fill("#credential-name", "training-sa")
    page.fill("#credential-description", "trainer service account")
    page.fill("#credential-key-json", GCP_KEY.replace("service_account", "authorized_user"))
    page.click("#add-credential button[type=submit]")
    page.wait_for_selector("#credential-error")
    assert "key_json.type" in page.inner_text("#credential-error")
    assert page.input_value("#credential-key-json") == ""  # never echoed back
    screenshot(page, "kube-credential-refused")
    page.fill("#credential-key-json", GCP_KEY)
    page.click("#add-credential button[type=submit]")
    page.wait_for_selector("tr[data-credential=training-sa]")
    assert CANARY.replace("-", "") not in page.content()
    screenshot(page, "kube-credentials-page")

    page.goto(f"{hub.url}/hub/spawn")
    page.wait_for_selector("text=Small GPU slice")
    assert page.locator("#profile-mig-1g-details .mlplatform-capacity").inner_text() == "2 of 2 free"
    page.get_by_label("Small GPU slice").check()
    page.get_by_label("Vision team").check()
    page.check("#credential--vision--training-sa")
    page.check("#dataset--vision--imagenet")
    screenshot(page, "kube-spawn-form")
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(r"/user/alice/"), timeout=120_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)

    pod_name = next(p["metadata"]["name"] for p in cluster.items("", "v1", "pods", "vision")
                    if p["metadata"]["labels"].get("component") == "singleuser-server")
    (pod_home(workdir, "vision", pod_name) / "check.ipynb").write_text(json.dumps(NOTEBOOK))
    text = run_notebook(page, f"{hub.url}/user/alice/lab/tree/check.ipynb")
    assert text.splitlines() == ["key: trainer@vision-training.iam.gserviceaccount.com True 0o440",
                                 "dataset: imagenet train split", "in environ: False"], text
    screenshot(page, "kube-notebook-credential-and-dataset")
    server = hub.api("GET", "/users/alice").json()["servers"][""]
    assert server["user_options"] == {"project": "vision", "profile": "mig-1g", "credentials": ["training-sa"],
                                      "datasets": ["imagenet"]}
