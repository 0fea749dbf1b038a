"""docs/widgets.md's claim, on the Kubernetes backend: widgets open no Kubernetes watch of their own.
The notebook server (a real ``jupyter server`` process with the extension, ``backend =
"kubernetes"``, on the real control plane through the fault proxy) holds one watch cache per
(kind, project); the widgets are REST + SSE clients of that server (`server_ext.client`), as in a
kernel.

Ten widgets in three "notebooks" (each its own `Client` and `JobsPoll`, as three kernels have):
three `JobsTable`s and seven `JobDetail`s following running jobs' logs. While they poll and stream,
the proxy's request log must show no WATCH and no LIST of the watched collections (the tables
are answered from the server's cache); what a followed log costs is one ``pods/log`` stream and
one lookup of its pod (a LIST by the task's labels), made once per detail, not per poll.

The jobs are batch/v1 Jobs: the control plane's Job controller makes their pods (its requests do
not pass the proxy) and the test kubelet runs them at once, so every request in the window is the
notebook server's."""

from __future__ import annotations

import asyncio
import time

import comm
import pytest

from server_ext.client.notebook import Client
from server_ext.jobs.kube.kubeflow import resource_path
from server_ext.runtimes.kube.project_caches import KINDS, SELECTOR
from server_ext.runtimes.kube.sweeps import EXPERIMENT_LABEL, katib_path
from server_ext.widgets.sync import JobsPoll
from server_ext.widgets.views import JobDetail, JobsTable
from tests.bench.widget_traffic import TRAFFIC, RecordingComm, from_view
from tests.harness.lab import NotebookServer
from tests.kube.job_env import NODES, pods, until

pytestmark = pytest.mark.kube
JOBS = [f"watched_{i}" for i in range(7)]
WINDOW_S = 5.0  # two or three polls of every table (`sync.POLL_S`)


class KubeNotebookServer(NotebookServer):
    """`tests.harness.lab.NotebookServer` as ``jupyter server`` on the Kubernetes backend, reading
    the cluster through `kubeconfig`, with `project` its one project."""

    def __init__(self, directory, kubeconfig: str, project: str):
        super().__init__(directory, app="server", project=project)
        self.kubeconfig = kubeconfig

    def environment(self) -> dict[str, str]:
        return {**super().environment(), "MLPLATFORM_BACKEND": "kubernetes", "KUBECONFIG": self.kubeconfig}

    def config(self) -> dict:
        config = super().config()
        config["MLPlatformApp"] = {"backend": "kubernetes", "projects": [self.project]}
        return config


def job_doc(job_id: str) -> dict:
    """One replica in a custom container: a batch/v1 Job."""
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": "python:3.11-slim", "containerCommand": ["python", "train.py"]}}}


def is_watch(record) -> bool:
    return (record.query.get("watch") or "").lower() in ("true", "1")


@pytest.fixture
def recorded(monkeypatch):
    """Widgets with no frontend: `comm.create_comm`, the hook a kernel fills, records what they send."""
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return TRAFFIC


async def test_ten_widgets_in_three_notebooks_open_no_watch(kube_cluster, kube_target, runner, tmp_path, recorded):
    ns = kube_target.namespace
    kubelet = kube_cluster.kubelet(nodes=NODES)  # pods run as soon as they are bound
    server = KubeNotebookServer(tmp_path / "server", kube_target.kubeconfig, ns)
    await asyncio.to_thread(server.start)
    widgets: list = []
    submitter, notebooks = Client(server.url, server.token, project=ns), []
    try:
        for job_id in JOBS:
            await asyncio.to_thread(submitter.submit, job_doc(job_id))
        running = lambda: {j.id for j in submitter.jobs_list() if j.state == "RUNNING"}  # noqa: E731
        await until(lambda: running() == set(JOBS), what="every job RUNNING")
        names = {p["metadata"]["name"]: p for p in pods(kube_cluster, ns)}
        assert len(names) == len(JOBS)
        for name in names:
            kubelet.log(ns, name, "epoch 1 loss=0.9")
        caches = {**{resource_path(kind, ns): SELECTOR for kind in KINDS},  # Katib's CRDs are installed
                  katib_path("experiments", ns): SELECTOR, katib_path("trials", ns): EXPERIMENT_LABEL}
        before = kube_cluster.requests()
        server_watches = {r.path: r.query.get("labelSelector") for r in before
                          if is_watch(r) and r.query.get("labelSelector") in (SELECTOR, EXPERIMENT_LABEL)}
        assert server_watches == caches  # one watch per kind, opened by the project's first request
        since = len(before)

        t0 = time.monotonic()
        notebooks = [Client(server.url, server.token, project=ns) for _ in range(3)]
        polls = [JobsPoll(c, ns) for c in notebooks]
        shown = {0: JOBS[0:3], 1: JOBS[3:5], 2: JOBS[5:7]}
        for n, client in enumerate(notebooks):
            widgets.append(JobsTable(client, poll=polls[n]))
            widgets += [JobDetail(client, job_id, poll=polls[n]) for job_id in shown[n]]
        assert len(widgets) == 10
        for w in widgets:
            from_view(w, {"type": "ready"})
        details = [w for w in widgets if isinstance(w, JobDetail)]
        await until(lambda: all(len(d.log) for d in details), what="every detail's first log line")
        for name in names:
            kubelet.log(ns, name, "epoch 2 loss=0.5")
        await until(lambda: all(len(d.log) == 2 for d in details), what="every detail's second log line")
        await asyncio.sleep(max(0.0, WINDOW_S - (time.monotonic() - t0)))
        window = kube_cluster.requests()[since:]
        assert all(p.polls >= 2 for p in polls), [p.polls for p in polls]
        assert all(len(w.rows) == len(JOBS) for w in widgets if isinstance(w, JobsTable))
    finally:
        for w in widgets:
            w.close()
        for client in [submitter, *notebooks]:
            await asyncio.wrap_future(client.bg.spawn(client.jobs.close()))
        await asyncio.to_thread(server.stop)

    assert [r.path for r in window if is_watch(r)] == []
    assert [r.path for r in window if r.method == "GET" and r.path in caches] == []  # no LIST of a watched kind
    log_streams = [r for r in window if r.path.endswith("/log")]
    assert sorted(r.path.split("/")[-2] for r in log_streams) == sorted(names)  # one per detail
    assert all(r.query.get("follow") == "true" for r in log_streams)
    pod_lists = [r for r in window if r.method == "GET" and r.path == f"/api/v1/namespaces/{ns}/pods"]
    assert len(pod_lists) == len(details)  # each detail's pod looked up once, not on every poll
    other = [(r.method, r.path) for r in window if r not in log_streams and r not in pod_lists]
    assert other == []  # nor a pod read by name, or anything else, on a poll
