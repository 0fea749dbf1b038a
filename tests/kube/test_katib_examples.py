"""A Katib-example-shaped Experiment (``metadata.namespace: kubeflow``, a hyphenated name; written in
tests/unit/test_katib_examples.py) submitted as it is by ``kubectl ai-platform`` as a subprocess,
with a gcloud script's ``--region``, to the real API server: it is created in the project (nothing
in ``kubeflow``), valid against Katib's swagger, named by JOB, and found again by the commands a
script runs next."""

from __future__ import annotations

import json

import pytest

from tests.kube.test_cli_kube import cli
from tests.kube.test_kube_sweeps import validate_swagger
from tests.unit.test_katib_examples import EXAMPLES

pytestmark = pytest.mark.kube

REGION_NOTE = ("note: --region us-central1 is accepted: no region table is configured, so this platform's one "
               "cluster serves every region\n")


async def test_a_katib_example_is_submitted_as_it_is_into_the_project(kube_cluster, kube_target, runner, tmp_path):
    ns = kube_target.namespace
    path = tmp_path / "random.yaml"
    path.write_text(EXAMPLES["random-search-mnist"])

    code, out, err = await cli(kube_target, "jobs", "submit", "training", "random_search_mnist", "--config", str(path),
                               "--region", "us-central1")
    assert code == 0, err
    assert err.count(REGION_NOTE) == 1 and (f"note: the Experiment goes into project {ns!r}: its metadata.namespace "
                                            "'kubeflow' is replaced\n") in err
    assert "Job [random_search_mnist] submitted successfully." in err
    stored = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "random-search-mnist")
    validate_swagger(stored, "v1beta1.Experiment")
    assert stored["metadata"]["annotations"]["mlplatform.io/job-id"] == "random_search_mnist"

    # the same file again, under a script's dated JOB: a second Experiment, named by JOB
    code, out, err = await cli(kube_target, "jobs", "submit", "training", "mnist_20261204_031500", "--config",
                               str(path), "--region", "us-central1")
    assert code == 0, err
    assert ("note: the Experiment is named 'mnist-20261204-031500' after JOB (its metadata.name "
            "'random-search-mnist' is replaced), so its jobId is mnist_20261204_031500\n") in err
    assert kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "mnist-20261204-031500") is not None
    assert kube_cluster.items("kubeflow.org", "v1beta1", "experiments", "kubeflow") == []

    code, out, err = await cli(kube_target, "jobs", "describe", "mnist_20261204_031500", "--region", "us-central1",
                               "--format", "json")
    assert code == 0, err
    job = json.loads(out)
    assert job["jobId"] == "mnist_20261204_031500" and job["trainingOutput"]["isHyperparameterTuningJob"] is True
    code, out, err = await cli(kube_target, "jobs", "list", "--region", "us-central1", "--format", "value(jobId)")
    assert (code, sorted(out.split())) == (0, ["mnist_20261204_031500", "random_search_mnist"]), err


async def test_the_rest_api_widgets_and_a_notebook_terminal_take_katib_examples(kube_cluster, kube_target, runner,
                                                                                tmp_path):
    """The other doors, on a real notebook server of the Kubernetes backend: the REST API (the body
    is the Experiment; its name gives the jobId), the widgets' client listing it, and the CLI in a
    notebook terminal with a script's ``--region`` (kept on the server's jobs)."""
    import asyncio
    import os

    import yaml

    from server_ext.client.notebook import Client
    from tests.kube.test_cli_kube import PLUGIN
    from tests.kube.test_widget_watches import KubeNotebookServer

    ns = kube_target.namespace
    server = KubeNotebookServer(tmp_path / "server", kube_target.kubeconfig, ns)
    await asyncio.to_thread(server.start)
    try:
        doc = yaml.safe_load(EXAMPLES["grid-search-lr"])
        answer = await asyncio.to_thread(server.api, "POST", f"ml/v1/projects/{ns}/jobs", data=json.dumps(doc))
        assert answer.status_code == 200, answer.text
        assert answer.json()["jobId"] == "grid_search_lr"
        stored = kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "grid-search-lr")
        validate_swagger(stored, "v1beta1.Experiment")

        client = Client(server.url, server.token, project=ns)  # what the widgets list
        assert "grid_search_lr" in {j.id for j in await asyncio.to_thread(client.jobs_list)}

        path = tmp_path / "tpe.yaml"
        path.write_text(EXAMPLES["tpe-example-run"])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLPLATFORM_", "JUPYTERHUB_", "JUPYTER_"))}
        env.update(JUPYTERHUB_SERVICE_URL=server.url, JUPYTERHUB_API_TOKEN=server.token, JUPYTERHUB_USER="alice",
                   MLPLATFORM_PROJECT=ns, MLPLATFORM_CONFIG=os.devnull, KUBECONFIG=str(tmp_path / "none"))
        proc = await asyncio.create_subprocess_exec(
            PLUGIN, "jobs", "submit", "training", "tpe_example_run", "--config", str(path), "--region", "us-central1",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert REGION_NOTE in err.decode() and "metadata.namespace 'kubeflow' is replaced" in err.decode()
        assert kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "tpe-example-run") is not None
    finally:
        await asyncio.to_thread(server.stop)
