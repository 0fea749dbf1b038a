"""The notebook user's API (`server_ext.client.notebook`, `server_ext.widgets`) against a real
notebook server (the extension on the local backend, the example trainer as real processes).

The blocking calls run in a worker thread (`asyncio.to_thread`) while the test drives the server's
loop (`run`): in a kernel they run on the kernel's thread while the server is another process.
Widgets run with no frontend: `comm.create_comm`, the hook a kernel fills, records what they send."""

from __future__ import annotations

import asyncio
import shutil
import time

import comm
import pytest

from server_ext import client as nb
from server_ext.client.notebook import Client
from server_ext.errors import JobFinished, UserInputError
from server_ext.widgets.form import SubmitForm
from server_ext.widgets.sync import JobsPoll
from server_ext.widgets.views import Browser, JobDetail, JobsTable, SweepMonitor
from tests.bench.widget_traffic import TRAFFIC, RecordingComm, from_view
from tests.local.rest.conftest import PROJECT, TRAINER, job_body

pytestmark = pytest.mark.local


@pytest.fixture
def server(jp_serverapp, http_server, http_server_port, jp_base_url):
    return f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}", jp_serverapp.identity_provider.token


@pytest.fixture
def client(server):
    client = Client(*server, project=PROJECT)
    yield client
    client.close()


@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return TRAFFIC


def blocking(run, fn):
    """Run the blocking `fn` in a thread while the server's loop serves it."""
    return run(asyncio.to_thread(fn))


def until(predicate, timeout=60.0, step=0.1):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(step)


def test_submit_wait_logs_from_the_environment(server, run, monkeypatch):
    monkeypatch.setenv("MLPLATFORM_SERVER_URL", server[0])
    monkeypatch.setenv("MLPLATFORM_SERVER_TOKEN", server[1])
    monkeypatch.setenv("MLPLATFORM_PROJECT", PROJECT)

    def go():
        job = nb.submit(job_body("nb_quick", "--epochs=3", "--sleep=0"))
        assert job.id == "nb_quick" and "token" not in repr(job)
        assert job.wait(timeout=60) is job and job.state == "SUCCEEDED"
        lines = list(job.logs())
        followed = list(nb.job("nb_quick").logs(follow=True))
        listed = [j.id for j in nb.jobs("labels.team=vision")]
        return lines, followed, listed

    lines, followed, listed = blocking(run, go)
    assert [line for line in lines if line.startswith("epoch ")][-1].startswith("epoch 3/3 ")
    assert followed == lines and listed == ["nb_quick"]


def test_submit_with_flags_cancel_and_errors(client, run):
    def go():
        long = client.submit(None, job_id="nb_long", module_name="trainer.task", packages=[TRAINER.as_uri()],
                             scale_tier="basic", labels={"team": "nlp"}, args=["--epochs=1000", "--sleep=0.5"])
        assert long.job["labels"] == {"team": "nlp"}
        assert long.job["trainingInput"]["args"] == ["--epochs=1000", "--sleep=0.5"]
        until(lambda: long.state == "RUNNING")
        first = next(iter(long.logs(follow=True)))  # a followed stream left early is closed
        assert long.cancel().state in ("CANCELLING", "CANCELLED")
        assert long.wait(timeout=30).state == "CANCELLED"
        with pytest.raises(JobFinished):
            long.cancel()
        with pytest.raises(UserInputError) as e:
            client.submit({"trainingInput": {"scaleTier": "BASIC"}}, job_id="nb_bad")
        return first, e.value

    first, error = blocking(run, go)
    assert first.startswith("role: ") and error.field == "module_name"


def test_jobs_table_gets_a_snapshot_then_only_deltas(client, run, recorded, tmp_path):
    poll = JobsPoll(client, PROJECT, interval=0.5)
    gate = tmp_path / "go"  # the long job waits after its first epoch: no progress while the table is quiet

    def go():
        client.submit(job_body("nb_long", "--epochs=1000", "--sleep=0.5", f"--wait_for={gate}"))
        table = JobsTable(client, poll=poll)
        until(lambda: not table.loading)
        t0 = time.monotonic()
        from_view(table, {"type": "ready"})
        until(lambda: recorded.since(t0))
        client.submit(job_body("nb_second", "--epochs=1", "--sleep=0"))
        until(lambda: table.rows.get("nb_second", {}).get("state") == "SUCCEEDED")
        until(lambda: table.rows["nb_long"]["state"] == "RUNNING" and table.rows["nb_long"]["progress"])
        sent = [r for r in recorded.since(t0) if r[2] == "custom"]
        time.sleep(3.0)  # steady: one RUNNING job, six polls, nothing changes
        quiet = [r for r in recorded.since(t0 + 0.001) if r[2] == "custom"][len(sent):]
        gate.touch()  # training goes on: new log lines for the detail
        t1 = time.monotonic()
        detail = JobDetail(client, "nb_long", poll=poll)
        from_view(detail, {"type": "ready"})
        until(lambda: any(r[3] == "log_append" for r in recorded.since(t1)), timeout=30)
        from_view(detail, {"type": "cancel"})
        until(lambda: any(r[3] == "confirm_cancel" for r in recorded.since(t1)))
        token = recorded.last("confirm_cancel")["token"]
        from_view(detail, {"type": "cancel_confirmed", "token": token})
        until(lambda: detail.job.get("state") == "CANCELLED", timeout=30)
        until(lambda: any(r[3] == "log_end" for r in recorded.since(t1)), timeout=30)
        states = [e["state"] for e in detail.timeline]
        table.close()
        detail.close()
        return sent, quiet, states

    sent, quiet, states = blocking(run, go)
    kinds = [r[3] for r in sent]
    assert kinds[0] == "snapshot" and set(kinds[1:]) == {"delta"}, kinds
    assert len(sent) <= 7 and all(r[4] < 2000 for r in sent[1:]), sent  # deltas: changed fields only
    assert quiet == []
    assert states[0] == "QUEUED" and states[-1] == "CANCELLED" and "RUNNING" in states


SPEC = """\
goal: MINIMIZE
hyperparameterMetricTag: rmse
maxTrials: 1
params:
- parameterName: learning_rate
  type: DOUBLE
  minValue: {low}
  maxValue: 0.1
"""


def test_the_form_shows_field_errors_then_a_sweeps_monitor(client, jp_root_dir, run, recorded, tmp_path):
    shutil.copytree(TRAINER, jp_root_dir / "trainer")
    form = SubmitForm(client, info={})
    fields = form.fields
    values = {"job_id": "nb_form_sweep", "module": "trainer.task", "package_path": str(tmp_path),
              "args": "--epochs=1 --sleep=0", "hyperparameters_on": True, "hyperparameters": SPEC.format(low=0.01)}
    for name, value in values.items():
        fields[name].value = value

    def shown_errors():
        return {name: label.value for name, label in form.errors.items() if label.value}

    def go():
        refused = [form.submit()]
        server_errors = shown_errors()  # outside the server's root: the server's fieldViolation
        fields["package_path"].value = str(jp_root_dir / "trainer")
        fields["hyperparameters"].value = SPEC.format(low=0.5)
        refused.append(form.submit())
        spec_errors = shown_errors()  # minValue above maxValue: found before sending
        fields["hyperparameters"].value = SPEC.format(low=0.01)
        sweep = form.submit()
        shown = form.result.children[0]
        sweep.wait(timeout=60)
        until(lambda: [t["state"] for t in shown.main.trials.values()] == ["SUCCEEDED"], timeout=30)
        form.close()
        return refused, server_errors, spec_errors, sweep, shown

    refused, server_errors, spec_errors, sweep, shown = blocking(run, go)
    assert refused == [None, None]
    assert list(server_errors) == ["package_path"] and "root directory" in server_errors["package_path"]
    assert list(spec_errors) == ["hyperparameters"] and "params[0].maxValue: " in spec_errors["hyperparameters"]
    assert sweep.id == "nb_form_sweep" and sweep.job["state"] == "SUCCEEDED"
    assert all(not label.value for label in form.errors.values()) and "nb_form_sweep" in form.message.value
    assert isinstance(shown, Browser) and isinstance(shown.main, SweepMonitor)  # not a plain job detail
    assert shown.main.job_id == "nb_form_sweep" and shown.main.metric_tag == "rmse"


SCRIPT = """\
import sys
from server_ext.client.notebook import Client
client = Client(sys.argv[1], sys.argv[2], project=sys.argv[3])  # never closed by the script
print(len(client.jobs_list()), flush=True)
"""


def test_a_script_that_never_closes_its_client_exits_without_unclosed_session_warnings(server, run, tmp_path):
    """The client's connections are closed at interpreter exit (aiohttp otherwise says "Unclosed
    client session" and "Unclosed connector" on stderr). Warnings are errors in the script."""
    import os
    import sys

    from tests.conftest import ROOT

    (tmp_path / "script.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "error"}

    async def go():
        proc = await asyncio.create_subprocess_exec(sys.executable, str(tmp_path / "script.py"), *server, PROJECT,
                                                    env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode, out.decode(), err.decode()

    code, out, err = run(go())
    assert (code, out) == (0, "0\n"), err
    assert "Unclosed" not in err and err == "", err


def test_a_made_up_job_id_another_kernel_took_gets_the_next_suffix(client, run):
    """Two kernels submitting the same module in the same second make up the same id: the second
    takes ``_2`` instead of failing with ALREADY_EXISTS (a name the user chose is never changed)."""
    import datetime

    from server_ext.client.submissions import default_job_id
    from server_ext.errors import JobExists

    def go():
        now = datetime.datetime.now(datetime.timezone.utc)
        taken = {default_job_id("trainer.task", now + datetime.timedelta(seconds=s)) for s in range(3)}
        for job_id in taken:  # "another kernel's" jobs, for this second and the next two
            client.submit(job_body(job_id, "--epochs=1", "--sleep=0"))
        job = client.submit(None, module_name="trainer.task", packages=[TRAINER.as_uri()], args=["--epochs=1"])
        with pytest.raises(JobExists):
            client.submit(job_body(sorted(taken)[0]))
        return taken, job.id

    taken, made = blocking(run, go)
    assert made not in taken and made.rsplit("_", 1)[0] in taken and made.endswith("_2"), (made, taken)


def test_a_jobs_first_log_line_is_not_held_for_the_batch(client, run):
    """`LogFollower` batches a busy log (at most one message per ``flush_s``), but the first line after
    a quiet ``flush_s`` goes at once: with an hour's batching, the first line of a running job still
    reaches the view while the job runs (before, it waited for the batch or the log's end)."""
    from server_ext.widgets.sync import LogFollower

    def scenario():
        job = client.submit(job_body("nb_first_line", "--epochs=3", "--sleep=30"))
        sent: list[dict] = []
        follower = LogFollower(client, PROJECT, "nb_first_line", sent.append, flush_s=3600)
        follower.view_ready()  # a view's start: an empty reset, which must not hold back the first line
        follower.follow(True)
        try:
            until(lambda: any(m.get("lines") for m in sent), timeout=60)
            assert [m["type"] for m in sent if m["type"] == "log_end"] == [], sent
            assert job.refresh().state == "RUNNING"  # not the log's end that sent it
        finally:
            follower.close()
            job.cancel()

    blocking(run, scenario)
