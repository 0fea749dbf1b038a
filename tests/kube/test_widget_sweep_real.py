"""The notebook widgets' sweep monitor fed by a real Katib Experiment (issue 15 item 3).

A real ``jupyter server`` with the extension on the Kubernetes backend (`KubeNotebookServer`, as
test_widget_watches.py runs it) takes an AI Platform hyperparameter sweep from `server_ext.client`
(``RANDOM_SEARCH``, 3 trials of the example trainer, 2 in parallel, its package shipped from the
server's root), which real Katib v0.19.0 runs (`real_katib`: goptuna's ``random``, the trials as
TFJobs of the real Training Operator, Katib's own collector reading the trainer's hypertune
reports). A `sweep_browser` follows it as in a kernel, its frontend played by `RecordingComm` and a
view's ``ready``: what the monitor sends (a snapshot, then deltas of the trial rows and series)
is applied as the JS view applies it, and must show the trials appear, run (each trainer holds
after its first report, ``--wait_for``, until the test has seen two trials RUNNING there, each with
that report in its series) and finish, their objective values the real Trials' observations, best first, the best one flagged,
the sweep SUCCEEDED; opening the best trial shows its log below."""

from __future__ import annotations

import asyncio

import comm
import pytest

from server_ext.client.notebook import Client
from server_ext.widgets import state
from server_ext.widgets.views import JobDetail, sweep_browser
from tests.bench.widget_traffic import TRAFFIC, RecordingComm, from_view
from tests.harness.notebook_ui import copy_trainer
from tests.kube.job_env import until
from tests.kube.test_katib_real import sweeps_ns, trials_of  # noqa: F401  (sweeps_ns: a fixture)
from tests.kube.test_widget_watches import KubeNotebookServer

pytestmark = pytest.mark.kube
JOB = "widget_sweep"
SWEEP = {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": 3, "maxParallelTrials": 2,
         "algorithm": "RANDOM_SEARCH",
         "params": [{"parameterName": "learning_rate", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.2}]}


class View:
    """What a sweep monitor's view holds: the custom messages it has been sent since `start`,
    applied as ``sweep.js`` applies them (a snapshot replaces, a delta patches)."""

    def __init__(self) -> None:
        self.start = len(TRAFFIC.contents)
        self.trials: state.Rows = {}
        self.series: dict[str, list] = {}
        self.seen: list[state.Rows] = []  # the rows after every message

    def update(self) -> "View":
        with TRAFFIC._lock:
            new, self.start = TRAFFIC.contents[self.start:], len(TRAFFIC.contents)
        for msg in new:
            if msg.get("type") == "snapshot" and "trials" in msg:
                self.trials, self.series = state.apply({}, {"added": msg["trials"]}), dict(msg["series"])
            elif msg.get("type") == "delta" and "series" in msg:
                self.trials = state.apply(self.trials, msg)
                for key, points in msg["series"].items():
                    self.series[key] = self.series.get(key, []) + points
            else:
                continue  # the trial log's messages (the JobDetail below)
            self.seen.append(self.trials)
        return self

    def states(self) -> list[str]:
        return sorted(r["state"] for r in self.update().trials.values())


@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return TRAFFIC


async def test_the_sweep_monitor_follows_a_real_katib_experiment(kube_cluster, kube_target, sweeps_ns, runner,
                                                               _operator_log, tmp_path, recorded):
    ns = sweeps_ns
    gate = tmp_path / "go-on"
    server = KubeNotebookServer(tmp_path / "server", kube_target.kubeconfig, ns)
    server.root.mkdir(parents=True)
    copy_trainer(server.root)
    await asyncio.to_thread(server.start)
    client = Client(server.url, server.token, project=ns)
    box = None
    try:
        doc = {"jobId": JOB, "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task",
                                               "args": ["--epochs=3", "--sleep=0.2", f"--wait_for={gate}"],
                                               "hyperparameters": SWEEP}}
        handle = await asyncio.to_thread(client.submit, doc, package_path=str(server.root / "trainer" / "trainer"))
        assert handle.id == JOB
        view = View()
        box = sweep_browser(client, JOB, ns)
        monitor = box.main
        from_view(monitor, {"type": "ready"})  # a view rendered: deltas from now on

        # the trials appear and run: two at once (maxParallelTrials), each held after its first report
        await until(lambda: view.states() == ["RUNNING", "RUNNING"]
                    and all(len(view.series.get(k, [])) == 1 for k in view.trials), timeout=180,
                    what="two trials RUNNING in the monitor, each with its first report")
        running = view.trials
        assert all(r["objective"] is None and r["startTime"] for r in running.values()), running
        assert all(0.01 <= float(r["hyperparameters"]["learning_rate"]) <= 0.2 for r in running.values()), running
        gate.touch()  # go on

        await until(lambda: monitor.job.get("state") == "SUCCEEDED", timeout=180, what="the sweep SUCCEEDED")
        try:
            await until(lambda: view.states() == ["SUCCEEDED"] * 3
                        and all(len(view.series.get(k, [])) == 3 for k in view.trials), timeout=30)
        except AssertionError:
            raise AssertionError(f"the monitor's rows and series are not final: {view.trials} {view.series}") from None
        rows = view.trials
        assert rows == monitor.trials  # the view holds what the widget holds
        experiment = next(iter(kube_cluster.items("kubeflow.org", "v1beta1", "experiments", ns)))
        assert experiment["spec"]["algorithm"]["algorithmName"] == "random"
        trials = trials_of(kube_cluster, ns, experiment["metadata"]["name"])
        assert len(trials) == 3
        observed = {}  # Katib's collector → db-manager → the Trial's status
        for t in trials:
            metric = next(m for m in t["status"]["observation"]["metrics"] if m["name"] == "rmse")
            observed[t["spec"]["parameterAssignments"][0]["value"]] = float(metric["latest"])
        shown = {str(r["hyperparameters"]["learning_rate"]): r["objective"] for r in rows.values()}
        assert shown == observed, (rows, observed)
        ranked = state.sorted_trials(rows, monitor.goal)  # the table's order: best first (MINIMIZE)
        assert [r["objective"] for r in ranked] == sorted(observed.values())
        best = ranked[0]
        assert best["best"] and sum(r["best"] for r in rows.values()) == 1 and monitor.best_trial == best["trialId"]
        optimal = experiment["status"]["currentOptimalTrial"]
        assert optimal["parameterAssignments"][0]["value"] == str(best["hyperparameters"]["learning_rate"])
        for key, points in view.series.items():  # each trial's curve: its 3 reports, the last its objective
            assert [p[0] for p in points] == sorted(p[0] for p in points)
            # Katib v0.19's file collector reads a float timestamp's fraction as nanoseconds, so of reports
            # within one second its "latest" could be an earlier one (seen here: trial 1's epoch 1; open
            # upstream as kubeflow/katib#2672); the trial program writes RFC 3339 times into Katib's file
            assert points[-1][1] == pytest.approx(rows[key]["objective"], rel=1e-5), (key, points)
        # the rows went through the states a user sees: running without an objective, then final with one
        assert any(r["state"] == "RUNNING" for rows_ in view.seen for r in rows_.values())
        assert view.seen[-1] == rows

        # a click on the best trial opens its log below the monitor
        from_view(monitor, {"type": "open_trial", "trialId": best["trialId"]})
        await until(lambda: isinstance(box.detail, JobDetail), timeout=10, what="the trial's detail")
        assert box.detail.task == f"trial-{best['trialId']}"
        await until(lambda: any(text.startswith("epoch 3/3 ") for _, text in box.detail.log.lines()), timeout=30,
                    what="the trial's log")
    finally:
        if box is not None:
            box.close()
        await asyncio.wrap_future(client.bg.spawn(client.jobs.close()))
        await asyncio.to_thread(server.stop)
