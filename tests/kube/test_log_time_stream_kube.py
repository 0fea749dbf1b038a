"""Issue 20 on the real control plane, through what users run:

- ``kubectl ai-platform jobs stream-logs`` prints each line with the time the kubelet gave it
  (the pod log read with ``timestamps=true``; before, the time column was empty), the text without
  it. Stdout and stderr stay one stream here (``stream=Stdout|Stderr`` is alpha in Kubernetes
  1.37 and off), so every line is INFO.
- A Katib example Experiment (``metadata.namespace: kubeflow``) through the REST API answers with a
  ``Warning: 299`` header naming the replaced namespace, and the notebook client's
  ``submit(config)`` prints that note (and the JOB-replaced name's) once on stderr.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest

from tests.kube.job_env import pod
from tests.kube.test_cli_kube import SUBMIT, cli, cluster  # noqa: F401  (the fixture)
from tests.unit.test_katib_examples import EXAMPLES

pytestmark = pytest.mark.kube


async def test_stream_logs_shows_the_kubelets_time_of_each_line(cluster, kube_cluster, kube_target):  # noqa: F811
    ns = kube_target.namespace
    code, out, err = await cli(kube_target, *SUBMIT[:3], "timed_job", *SUBMIT[3:])
    assert code == 0, err
    name = (await pod(kube_cluster, ns, **{"training.kubeflow.org/job-name": "timed-job",
                                            "training.kubeflow.org/replica-type": "master"}))["metadata"]["name"]
    cluster.run(ns, name)
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    cluster.log(ns, name, "epoch 1/2 loss=0.52\n", container="pytorch")
    await asyncio.sleep(1.1)
    cluster.log(ns, name, "2026-01-01T00:00:00Z looks like a time but is the trainer's text\n", container="pytorch")
    after = dt.datetime.now(dt.timezone.utc)
    cluster.finish(ns, name, container="pytorch")

    code, out, err = await cli(kube_target, "jobs", "stream-logs", "timed_job", "--task-name", "master-replica-0")
    assert code == 0, err
    records = [row.split("\t") for row in out.splitlines()]
    assert [(r[0], r[2], r[4]) for r in records] == [
        ("INFO", "master-replica-0", "epoch 1/2 loss=0.52"),
        ("INFO", "master-replica-0", "2026-01-01T00:00:00Z looks like a time but is the trainer's text")]
    times = [dt.datetime.strptime(r[1], "%Y-%m-%d %H:%M:%S %z") for r in records]
    assert before <= times[0] < times[1] <= after, (before, times, after)


async def test_rest_and_the_notebook_client_tell_the_replaced_namespace(kube_cluster, kube_target, runner, tmp_path,
                                                                        capsys):
    import yaml

    from server_ext.client.notebook import Client
    from tests.kube.test_widget_watches import KubeNotebookServer

    ns = kube_target.namespace
    note = f"note: the Experiment goes into project {ns!r}: its metadata.namespace 'kubeflow' is replaced"
    server = KubeNotebookServer(tmp_path / "server", kube_target.kubeconfig, ns)
    await asyncio.to_thread(server.start)
    try:
        doc = yaml.safe_load(EXAMPLES["grid-search-lr"])
        answer = await asyncio.to_thread(server.api, "POST", f"ml/v1/projects/{ns}/jobs", data=json.dumps(doc))
        assert answer.status_code == 200, answer.text
        assert answer.headers["Warning"] == f"299 - {json.dumps(note)}"
        doc["metadata"].pop("namespace")
        answer = await asyncio.to_thread(server.api, "POST", f"ml/v1/projects/{ns}/jobs",
                                         data=json.dumps({**doc, "metadata": {**doc["metadata"], "name": "plain"}}))
        assert answer.status_code == 200 and "Warning" not in answer.headers, answer.text

        client = Client(server.url, server.token, project=ns)
        capsys.readouterr()
        job = await asyncio.to_thread(client.submit, EXAMPLES["tpe-example-run"], job_id="tpe_2")
        assert job.id == "tpe_2"
        assert capsys.readouterr().err == (
            "note: the Experiment is named 'tpe-2' after JOB (its metadata.name 'tpe-example-run' is replaced), so "
            f"its jobId is tpe_2\n{note}\n")
        assert kube_cluster.get("kubeflow.org", "v1beta1", "experiments", ns, "tpe-2") is not None
        await asyncio.to_thread(client.close)
    finally:
        await asyncio.to_thread(server.stop)
