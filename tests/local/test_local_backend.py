"""The local job backend with real processes: the example trainer (examples/trainer) run end to end,
from its sdist (built once per session) and from its package directory."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Credential
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job, with_package
from server_ext.runtimes.local.backend import LocalBackend
from server_ext.runtimes.local.procs import Replica, read_exit
from server_ext.runtimes.package import digest

pytestmark = pytest.mark.local

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "trainer"
PACKAGE_DIR = str(EXAMPLE / "trainer")
SETTINGS = PlanSettings(Machines(accelerators={}))


@pytest.fixture(scope="session")
def sdist(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("sdist")
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(EXAMPLE)], check=True,
                   capture_output=True, timeout=120)
    (path,) = out.glob("*.tar.gz")
    return path


@pytest.fixture
async def backend(tmp_path):
    b = await LocalBackend.create(tmp_path / "state", grace_s=2.0, poll_s=0.05)
    yield b
    for project in ("alice", "bob"):
        for job in await b.list(project):
            if job["state"] not in FINAL:
                await b.cancel(project, job["jobId"])
                await wait_for(b, project, job["jobId"])
    await b.close()


def uid(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def make_plan(job_id: str, args: list[str], uris: list[str] | None = None, project: str = "alice",
              credentials: tuple[Credential, ...] = (), **training):
    doc = {"jobId": job_id, "labels": {"team": "ml"},
           "trainingInput": {"pythonModule": "trainer.task", "packageUris": uris or [PACKAGE_DIR], "args": args,
                             "region": "local", **training}}
    return plan_job(parse_job(doc), SETTINGS, project=project, owner=project, credentials=credentials)


def cluster(workers: int, ps: int = 0, **extra) -> dict:
    t = {"scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard", "workerCount": str(workers), **extra}
    if ps:
        t.update(parameterServerType="standard", parameterServerCount=str(ps))
    return t


async def wait_for(b: LocalBackend, project: str, job_id: str, states=FINAL, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = await b.get(project, job_id)
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"{job_id} is still {job['state']}: {job}"
        await asyncio.sleep(0.05)


async def texts(b: LocalBackend, project: str, job_id: str, task: str = "master-replica-0", **kw) -> list[str]:
    return [line.text async for line in b.logs(project, job_id, task, **kw)]


def job_pids(job_id: str) -> list[int]:
    """Processes whose environment says they run `job_id` (what the backend gives every replica)."""
    marker = f"CLOUD_ML_JOB_ID={job_id}".encode()
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in environ and state != "Z":
                pids.append(int(entry.name))
    return pids


async def until_gone(job_id: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while job_pids(job_id):
        assert time.monotonic() < deadline, f"processes of {job_id} remain: {job_pids(job_id)}"
        await asyncio.sleep(0.05)


async def test_sdist_job_succeeds_with_logs_metrics_and_result(backend, sdist, tmp_path):
    job_id = uid("sdist")
    out = tmp_path / "out"
    created = await backend.submit(make_plan(job_id, ["--epochs=3", "--sleep=0", "--learning_rate=0.1"],
                                             [str(sdist)], jobDir=str(out)))
    assert created["state"] == "QUEUED" and created["createTime"].endswith("Z") and created["etag"]
    assert created["trainingInput"]["packageUris"] == [str(sdist)]
    job = await wait_for(backend, "alice", job_id)
    assert job["state"] == "SUCCEEDED", job
    assert job["startTime"].endswith("Z") and job["endTime"] >= job["startTime"] >= job["createTime"]
    assert "errorMessage" not in job and job["labels"] == {"team": "ml"} and job["etag"] != created["etag"]
    parse_job(job, create=False)  # still a valid ml.v1 Job

    lines = [line async for line in backend.logs("alice", job_id)]
    assert [line.seq for line in lines] == list(range(1, len(lines) + 1))
    text = [line.text for line in lines]
    assert text[0].startswith(f"Installing {sdist.name} into {backend.state_dir / 'packages' / 'alice'}/")
    assert any("Successfully installed mlplatform-example-trainer" in t for t in text)
    assert "role: master 0 of 1 (TF_CONFIG cluster master=1); primary=True" in text
    assert [t.split()[1] for t in text if t.startswith("epoch ")] == ["1/3", "2/3", "3/3"]

    metrics = (backend.job_dir("alice", job_id) / "master-replica-0.metrics").read_text().splitlines()
    reports = [json.loads(m) for m in metrics]
    assert [sorted(r) for r in reports] == [["global_step", "rmse", "timestamp", "trial"]] * 3
    assert [r["trial"] for r in reports] == ["0"] * 3 and reports[0]["global_step"] == "20"
    assert float(reports[-1]["rmse"]) < float(reports[0]["rmse"])
    assert json.loads((out / "model.json").read_text())["epochs"] == 3
    assert [j["jobId"] for j in await backend.list("alice")] == [job_id]


async def test_package_fetched_from_s3_with_the_jobs_credential(s3_store, sdist, tmp_path):
    uri = s3_store.put(f"packages/{uuid.uuid4().hex[:6]}/{sdist.name}", sdist.read_bytes())
    files = s3_store.credentials_env(tmp_path / "creds")
    credential = Credential("aws", "aws-credential", files["AWS_SHARED_CREDENTIALS_FILE"], files["AWS_CONFIG_FILE"])
    env = {**os.environ, "AWS_ENDPOINT_URL_S3": s3_store.endpoint}  # the server's environment: no key in it
    b = await LocalBackend.create(tmp_path / "state", env=env, poll_s=0.05)
    try:
        job_id = uid("s3")
        await b.submit(make_plan(job_id, ["--epochs=1", "--sleep=0"], [uri], credentials=(credential,)))
        job = await wait_for(b, "alice", job_id)
        assert job["state"] == "SUCCEEDED", job
        assert (b.job_dir("alice", job_id) / "packages" / sdist.name).read_bytes() == sdist.read_bytes()
        assert (await texts(b, "alice", job_id))[-1].startswith("done: rmse=")
    finally:
        await b.close()


def shipped_plan(job_id: str, sdist: pathlib.Path, **ship):
    """What `JobService.create(package_path=…)` submits: no packageUris of its own, the sdist attached."""
    doc = {"jobId": job_id, "trainingInput": {"pythonModule": "trainer.task", "args": ["--epochs=2", "--sleep=0"],
                                              "region": "local"}}
    plan = plan_job(parse_job(doc, shipped_package=True), SETTINGS, project="alice", owner="alice")
    return with_package(plan, sdist, *digest(sdist), **ship)


@pytest.mark.parametrize("delivery, ship", [("configmap", {}), ("bucket", {"staging_bucket": "gs://stage", "limit": 1})])
async def test_a_shipped_package_is_kept_and_installed_without_fetching(backend, sdist, tmp_path, delivery, ship):
    """The sdist's file is removed once submit returns (as `JobService.create` does); the job still
    installs it, and neither its configmap:// nor its (never uploaded) staged URI is read."""
    built = tmp_path / "build" / sdist.name
    built.parent.mkdir()
    shutil.copy(sdist, built)
    job_id = uid("shipped")
    plan = shipped_plan(job_id, built, **ship)
    assert plan.package.delivery == delivery
    created = await backend.submit(plan)
    shutil.rmtree(built.parent)
    assert created["trainingInput"]["packageUris"] == [plan.package.uri]
    job = await wait_for(backend, "alice", job_id)
    assert job["state"] == "SUCCEEDED", job
    job_dir = backend.job_dir("alice", job_id)
    text = await texts(backend, "alice", job_id)
    assert text[0].startswith(f"Installing {sdist.name} into {backend.state_dir / 'packages' / 'alice'}/")
    assert text[-1].startswith("done: rmse=")
    assert (job_dir / "shipped" / sdist.name).read_bytes() == sdist.read_bytes()
    assert not (job_dir / "packages").exists()  # nothing was fetched
    assert not list(backend.state_dir.glob(".incoming-*"))


async def test_a_shipped_package_that_is_not_the_planned_bytes_is_refused(backend, sdist):
    job_id = uid("changed")
    plan = shipped_plan(job_id, sdist)
    plan = dataclasses.replace(plan, package=dataclasses.replace(plan.package, sha256="0" * 64))
    with pytest.raises(UserInputError) as e:
        await backend.submit(plan)
    assert e.value.field == "package.path" and "changed after it was built" in e.value.message
    with pytest.raises(JobNotFound):
        await backend.get("alice", job_id)
    assert not backend.job_dir("alice", job_id).exists() and not list(backend.state_dir.glob(".incoming-*"))


async def test_failing_replica_fails_the_job(backend):
    job_id = uid("fail")
    await backend.submit(make_plan(job_id, ["--epochs=5", "--sleep=0", "--fail_at_epoch=2"],
                                   [pathlib.Path(PACKAGE_DIR).as_uri()]))
    job = await wait_for(backend, "alice", job_id)
    assert (job["state"], job["errorMessage"]) == ("FAILED", "The replica master 0 exited with a non-zero status of 1.")
    text = await texts(backend, "alice", job_id)
    assert text[-1] == "error: failing at epoch 2 as asked (--fail_at_epoch=2)"


async def test_package_that_does_not_install_fails_the_job(backend, tmp_path):
    broken = tmp_path / "broken-0.1.tar.gz"
    broken.write_bytes(b"not a tarball")
    job_id = uid("pip")
    await backend.submit(make_plan(job_id, [], [str(broken)]))
    job = await wait_for(backend, "alice", job_id)
    assert job["state"] == "FAILED" and "startTime" not in job
    assert job["errorMessage"].startswith("Installing the job's packages failed (pip exited with status ")
    assert job["errorMessage"].endswith("the master-replica-0 log has pip's output.")
    assert len(await texts(backend, "alice", job_id)) > 1
    assert await texts(backend, "alice", job_id, "master-replica-0", follow=True)  # ends: the job is over


async def test_distributed_tensorflow_each_replica_sees_its_tf_config(backend):
    job_id = uid("tf")
    await backend.submit(make_plan(job_id, ["--epochs=3", "--sleep=0.5"], runtimeVersion="2.11",
                                   **cluster(workers=2, ps=1)))
    job = await wait_for(backend, "alice", job_id)
    assert job["state"] == "SUCCEEDED", job
    shape = "(TF_CONFIG cluster master=1, ps=1, worker=2)"
    assert f"role: master 0 of 4 {shape}; primary=True" in await texts(backend, "alice", job_id)
    for i in (0, 1):
        assert f"role: worker {i} of 4 {shape}; primary=False" in await texts(backend, "alice", job_id,
                                                                              f"worker-replica-{i}")
    ps = await texts(backend, "alice", job_id, "ps-0")
    assert ps[-1] == "ps 0: serving until terminated"  # it never ends by itself: stopped after the master
    assert not job_pids(job_id)


async def test_distributed_pytorch_ranks(backend):
    job_id = uid("torch")
    await backend.submit(make_plan(job_id, ["--epochs=2", "--sleep=0.5"], runtimeVersion="pytorch-2.5",
                                   pythonVersion="3.11", **cluster(workers=2)))
    job = await wait_for(backend, "alice", job_id)
    assert job["state"] == "SUCCEEDED", job
    roles = {}
    for task in ("master-replica-0", "worker-0", "worker-replica-1"):
        (role,) = [t for t in await texts(backend, "alice", job_id, task) if t.startswith("role: ")]
        roles[task] = role
    port = roles["master-replica-0"].split("MASTER=127.0.0.1:")[1].split(")")[0]
    assert int(port) > 0
    assert roles == {t: f"role: rank {r} of 3 (torch.distributed WORLD_SIZE=3 MASTER=127.0.0.1:{port}); "
                        f"primary={r == 0}" for t, r in (("master-replica-0", 0), ("worker-0", 1),
                                                         ("worker-replica-1", 2))}


async def test_cancel_stops_every_process(backend):
    job_id = uid("cancel")
    await backend.submit(make_plan(job_id, ["--epochs=100", "--sleep=1"], runtimeVersion="2.11", **cluster(workers=1)))
    await wait_for(backend, "alice", job_id, ("RUNNING",))
    deadline = time.monotonic() + 10
    while len(job_pids(job_id)) < 4:  # a shell and a Python per replica
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    cancelling = await backend.cancel("alice", job_id)
    assert cancelling["state"] == "CANCELLING"
    job = await wait_for(backend, "alice", job_id)
    assert job["state"] == "CANCELLED" and job["endTime"].endswith("Z") and "errorMessage" not in job
    assert not job_pids(job_id)
    with pytest.raises(JobFinished):
        await backend.cancel("alice", job_id)


async def test_cancel_while_installing_and_while_queued(backend, sdist):
    installing, queued = uid("installing"), uid("queued")
    await backend.submit(make_plan(installing, ["--epochs=1"], [str(sdist)]))
    await wait_for(backend, "alice", installing, ("PREPARING",))
    await backend.submit(make_plan(queued, ["--epochs=1"], [str(sdist)]))
    assert (await backend.cancel("alice", queued))["state"] == "CANCELLING"  # before its runner took a step
    assert (await backend.cancel("alice", installing))["state"] == "CANCELLING"
    for job_id in (installing, queued):
        job = await wait_for(backend, "alice", job_id)
        assert job["state"] == "CANCELLED" and "startTime" not in job, job
        assert not (backend.job_dir("alice", job_id) / "master-replica-0.exit").exists()  # no replica ran
    assert (await backend.get("alice", queued))["state"] == "CANCELLED"


async def test_logs_follow_and_resume_after(backend):
    job_id = uid("logs")
    await backend.submit(make_plan(job_id, ["--epochs=4", "--sleep=0.2"]))
    followed = [line async for line in backend.logs("alice", job_id, follow=True)]
    assert (await backend.get("alice", job_id))["state"] == "SUCCEEDED"
    assert followed[-1].text.startswith("done: rmse=") and followed[-1].task == "master-replica-0"
    assert [line.seq for line in followed] == list(range(1, len(followed) + 1))
    again = [line async for line in backend.logs("alice", job_id, after=3)]
    assert again == followed[3:]
    assert [line async for line in backend.logs("alice", job_id, after=len(followed), follow=True)] == []


async def test_refusals_duplicates_and_projects(backend, tmp_path, monkeypatch):
    job_id = uid("dup")
    await backend.submit(make_plan(job_id, ["--epochs=1", "--sleep=0"]))
    with pytest.raises(JobExists):
        await backend.submit(make_plan(job_id, ["--epochs=1"]))
    await backend.submit(make_plan(job_id, ["--epochs=1", "--sleep=0"], project="bob"))  # projects are separate
    assert [j["jobId"] for j in await backend.list("alice")] == [job_id]
    assert [j["jobId"] for j in await backend.list("bob")] == [job_id]
    assert await backend.list("carol") == []
    for call in (backend.get("carol", job_id), backend.cancel("alice", "nope")):
        with pytest.raises(JobNotFound):
            await call
    with pytest.raises(JobNotFound):
        backend.logs("carol", job_id)
    for task in ("worker-0", "bogus"):
        with pytest.raises(UserInputError) as e:
            backend.logs("alice", job_id, task)
        assert e.value.field == "task"

    refused = [
        (make_plan(uid("img"), [], masterConfig={"imageUri": "gcr.io/p/trainer:1"}),
         "trainingInput.masterConfig.imageUri"),
        (make_plan(uid("missing"), [], [str(tmp_path / "nope.tar.gz")]), "trainingInput.packageUris[0]"),
    ]
    monkeypatch.setitem(sys.modules, "server_ext.runtimes.fetch", None)  # as where the fetch module is not installed
    refused.append((make_plan(uid("remote"), [], ["gs://bucket/t.tar.gz"]), "trainingInput.packageUris"))
    for plan, field in refused:
        with pytest.raises(UserInputError) as e:
            await backend.submit(plan)
        assert e.value.field == field
        with pytest.raises(JobNotFound):
            await backend.get("alice", plan.job.job_id)
    for project in ("alice", "bob"):
        assert (await wait_for(backend, project, job_id))["state"] == "SUCCEEDED"


@pytest.mark.parametrize("training, field", [
    (cluster(2**31 - 1), "trainingInput.workerCount"),  # once built 2^31 task names on the event loop
    (cluster(1, ps=32), "trainingInput.parameterServerCount"),
    (cluster(20, ps=12), "trainingInput.workerCount"),
    ({"scaleTier": "CUSTOM", "masterType": "standard", "evaluatorType": "standard", "evaluatorCount": "40"},
     "trainingInput.evaluatorCount"),
])
async def test_more_processes_than_the_local_limit_are_refused_before_anything_is_made(backend, training, field):
    assert backend.max_processes == 32
    plan = make_plan(uid("many"), ["--epochs=1"], **training)
    with pytest.raises(UserInputError) as e:
        await backend.submit(plan)
    assert e.value.field == field and "the local runtime runs at most 32 for one job" in e.value.message
    assert "MLPLATFORM_LOCAL_MAX_PROCESSES" in e.value.message
    with pytest.raises(JobNotFound):
        await backend.get("alice", plan.job.job_id)
    assert not backend.job_dir("alice", plan.job.job_id).exists() and job_pids(plan.job.job_id) == []


async def test_the_local_process_limit_is_configurable(tmp_path, monkeypatch):
    from hub_ext.core.errors import ConfigError
    from server_ext.runtimes.local.limits import MAX_PROCESSES_ENV

    premium = make_plan(uid("premium"), ["--epochs=1"], scaleTier="PREMIUM_1")  # 31 replicas: within the default
    two = make_plan(uid("two"), ["--epochs=1", "--sleep=0"], **cluster(1))
    monkeypatch.setenv(MAX_PROCESSES_ENV, "2")
    assert LocalBackend(tmp_path / "a").max_processes == 2
    b = await LocalBackend.create(tmp_path / "b", max_processes=8, grace_s=1.0, poll_s=0.05)
    try:
        with pytest.raises(UserInputError) as e:
            await b.submit(premium)
        assert e.value.field == "trainingInput.scaleTier" and "at most 8 for one job" in e.value.message
        await b.submit(two)
        assert (await wait_for(b, "alice", two.job.job_id))["state"] == "SUCCEEDED"
    finally:
        await b.close()
    for bad in ("0", "many", "-1", "1e3", "9999999"):
        monkeypatch.setenv(MAX_PROCESSES_ENV, bad)
        with pytest.raises(ConfigError) as c:
            LocalBackend(tmp_path / "c")
        assert c.value.problems[0].path == MAX_PROCESSES_ENV
    monkeypatch.delenv(MAX_PROCESSES_ENV)
    assert LocalBackend(tmp_path / "d").max_processes == 32


async def test_a_state_directory_has_one_owner(tmp_path):
    """A second backend on the same directory, here or in another process, is refused while the first
    runs (it would adopt the first one's jobs and fail those still being prepared)."""
    from hub_ext.core.errors import ConfigError

    state = tmp_path / "state"
    first = await LocalBackend.create(state)
    try:
        with pytest.raises(ConfigError) as e:
            await LocalBackend.create(state)
        assert f"pid {os.getpid()}" in str(e.value) and "without --local" in str(e.value)
        other = subprocess.run([sys.executable, "-c", "import asyncio, sys\n"
                                "from server_ext.runtimes.local.backend import LocalBackend\n"
                                "asyncio.run(LocalBackend.create(sys.argv[1]))", str(state)],
                               capture_output=True, text=True, timeout=60)
        assert other.returncode != 0 and "is in use by another process" in other.stderr
    finally:
        await first.close()
    second = await LocalBackend.create(state)  # closed: free again
    await second.close()


async def test_restart_keeps_finished_adopts_running_and_fails_orphans(tmp_path):
    state = tmp_path / "state"
    first = await LocalBackend.create(state, grace_s=2.0, poll_s=0.05)
    done, adopted, killed, cancelled = uid("done"), uid("adopted"), uid("killed"), uid("cancelled")
    try:
        await first.submit(make_plan(done, ["--epochs=1", "--sleep=0"]))
        finished = await wait_for(first, "alice", done)
        await first.submit(make_plan(adopted, ["--epochs=8", "--sleep=0.75"]))  # still running after the restart
        await first.submit(make_plan(killed, ["--epochs=100", "--sleep=1"]))
        await first.submit(make_plan(cancelled, ["--epochs=100", "--sleep=1"], runtimeVersion="2.11",
                                     **cluster(workers=1)))
        for job_id in (adopted, killed, cancelled):
            await wait_for(first, "alice", job_id, ("RUNNING",))
    finally:
        await first.close()

    # "the server is down": the killed job's processes die unseen
    for pid in job_pids(killed):
        os.kill(pid, signal.SIGKILL)
    await until_gone(killed)

    second = await LocalBackend.create(state, grace_s=2.0, poll_s=0.05)
    try:
        assert await second.get("alice", done) == finished
        job = await wait_for(second, "alice", killed)
        assert job["state"] == "FAILED"
        assert "while no server was watching it" in job["errorMessage"]
        assert (await second.get("alice", adopted))["state"] == "RUNNING"
        assert (await wait_for(second, "alice", adopted))["state"] == "SUCCEEDED"  # judged from its exit status
        assert (await texts(second, "alice", adopted))[-1].startswith("done: rmse=")
        assert job_pids(cancelled)
        assert (await second.cancel("alice", cancelled))["state"] == "CANCELLING"
        assert (await wait_for(second, "alice", cancelled))["state"] == "CANCELLED"
        assert not job_pids(cancelled)
        assert [j["jobId"] for j in await second.list("alice")] == [done, adopted, killed, cancelled]
    finally:
        await second.close()


async def test_a_job_that_ends_as_it_is_cancelled_keeps_its_outcome_and_a_complete_exit_marker(tmp_path):
    """The program exits 0 while its wrapper is still recording the status (its `mv` is slow here) and
    the job is cancelled then (an early-stopping sweep's pruner deciding on the last report): the
    marker is completed, not left as ``*.exit.tmp``, and the job SUCCEEDED, not CANCELLED."""
    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "mv").write_text('#!/bin/sh\nsleep 1\nexec /bin/mv "$@"\n')
    (slow / "mv").chmod(0o755)
    env = {**os.environ, "PATH": f"{slow}:{os.environ['PATH']}"}
    b = await LocalBackend.create(tmp_path / "state", env=env, grace_s=2.0, poll_s=0.05)
    try:
        job_id = uid("ends")
        await b.submit(make_plan(job_id, ["--epochs=1", "--sleep=0"]))
        marker = b.job_dir("alice", job_id) / "master-replica-0.exit"
        deadline = time.monotonic() + 30
        while not pathlib.Path(f"{marker}.tmp").exists():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert (await b.cancel("alice", job_id))["state"] == "CANCELLING"
        job = await wait_for(b, "alice", job_id)
        assert job["state"] == "SUCCEEDED", job
        assert marker.read_text() == "0\n" and not pathlib.Path(f"{marker}.tmp").exists()
    finally:
        await b.close()


async def test_the_exit_marker_is_read_from_a_complete_tmp_and_never_from_a_partial_one(tmp_path):
    """A wrapper killed (SIGKILL) between writing ``.exit.tmp`` and its rename: a restarted server still
    knows the status; an empty or unterminated file is no status."""
    marker = tmp_path / "master-replica-0.exit"
    tmp = tmp_path / "master-replica-0.exit.tmp"
    replica = Replica.adopt("master-replica-0", {"pid": 0}, marker)
    replica.ended = False
    tmp.write_text("0\n")
    assert await replica.finish() == 0
    for partial in ("", "1"):
        tmp.write_text(partial)
        assert read_exit(marker) is None
    marker.write_text("3\n")
    assert read_exit(marker) == 3


async def test_a_running_jobs_progress_is_its_training_output(backend, tmp_path):
    """The trainer's progress lines (`server_ext.jobs.progress`) reach the job's JSON while it runs
    (the trainer waits after its first epoch: 1 of 4 is 25%) and its last one stays once it ended."""
    gate = tmp_path / "go"
    job_id = uid("progress")
    await backend.submit(make_plan(job_id, ["--epochs=4", "--sleep=0", f"--wait_for={gate}"]))
    deadline = time.monotonic() + 30
    while not ((await backend.get("alice", job_id)).get("trainingOutput") or {}).get("progress"):
        assert time.monotonic() < deadline, await backend.get("alice", job_id)
        await asyncio.sleep(0.05)
    running = await backend.get("alice", job_id)
    assert running["state"] == "RUNNING"
    reported = running["trainingOutput"]["progress"]
    assert reported["progressPercentage"] == 25 and reported["updateTime"].endswith("Z")
    assert [m["name"] for m in reported["metrics"]] == ["loss", "rmse"]
    assert [j for j in await backend.list("alice") if j["jobId"] == job_id][0]["trainingOutput"]["progress"] == reported
    gate.touch()
    done = await wait_for(backend, "alice", job_id)
    assert done["state"] == "SUCCEEDED"
    assert done["trainingOutput"]["progress"]["progressPercentage"] == 100
