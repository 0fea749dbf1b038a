"""The local runtime's state is its OS user's only (issue 16.8): files ``0600`` (or ``0700`` when
executable), directories ``0700``, nothing readable by group or others — when created, and when an
earlier run left them open.

- local tier: the demo's preparation of its state dir (what `mlplatform demo` does before it execs
  the hub) and the job backend with a real job, both under umask ``022`` so the modes come from
  the code, not from the test's umask;
- hub tier: `mlplatform demo` itself (what `make demo` runs: the hub, configurable-http-proxy, a
  single-user server and a job through its REST API) on a state dir an earlier run left open, then
  every path under it is checked with `os.lstat`.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from hub_ext.local.demo import prepare_state_dir, write_config
from server_ext.jobs.backend import FINAL
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job
from server_ext.runtimes.local.backend import LocalBackend
from tests.conftest import ROOT

TRAINER = ROOT / "examples" / "trainer" / "trainer"
SECRET = "-----BEGIN PRIVATE KEY-----not-a-real-key-----END PRIVATE KEY-----"


@pytest.fixture
def open_umask():
    """Umask 022 (the usual one) while the test runs: files the code does not make private show."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def loose(path: Path, text: str | None = None, mode: int = 0o644) -> Path:
    """A file (or, without text, a directory) left readable by everyone, as an earlier run would have."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        path.mkdir(exist_ok=True)
        mode = 0o755
    else:
        path.write_text(text)
    os.chmod(path, mode)
    return path


def earlier_run(state: Path) -> dict[str, Path]:
    """What an earlier (older) demo left in its state dir, all open to group and others."""
    jobs = state / "platform" / "jobs" / "alice"
    files = {
        "config": loose(state / "jupyterhub_config.py", "# an earlier run's passwords\n"),
        "cookie": loose(state / "jupyterhub_cookie_secret", "00" * 32),
        "database": loose(state / "jupyterhub.sqlite", ""),  # an empty file is an empty SQLite database
        "devices": loose(state / "platform" / "devices.json", "{}"),
        "job_records": loose(jobs / "jobs.sqlite", ""),
        "old_log": loose(jobs / "jobs" / "vision" / "old_job" / "master-replica-0.log", "an old job's log\n"),
        "credential": loose(state / "platform" / "projects" / "vision" / "credentials" / "key.json",
                            '{"private_key": "%s"}' % SECRET),
        "home_file": loose(state / "users" / "alice" / "notes.txt", "alice's notes\n"),
        "script": loose(state / "users" / "alice" / "run.sh", "#!/bin/sh\n", 0o755),
    }
    for d in (state, state / "platform", jobs, state / "users" / "alice"):
        os.chmod(d, 0o755)
    return files


def open_paths(root: Path) -> list[str]:
    """Every path under `root` (itself included) that group or others may use, with its mode."""
    found = []
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o077:
            found.append(f"{path.relative_to(root.parent)} {stat.filemode(st.st_mode)}")
    return found


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.local
def test_the_demo_makes_an_earlier_runs_state_private(tmp_path, open_umask):
    state = tmp_path / "state"
    files = earlier_run(state)
    outside = loose(tmp_path / "shared.txt", "not the demo's")
    (state / "link-to-shared").symlink_to(outside)

    assert prepare_state_dir(state) == []
    write_config(files["config"], "# new passwords\n")

    assert open_paths(state) == []
    assert mode(state) == mode(state / "users") == mode(state / "platform" / "projects" / "vision") == 0o700
    for name in ("config", "cookie", "database", "devices", "job_records", "old_log", "credential", "home_file"):
        assert mode(files[name]) == 0o600, name
    assert mode(files["script"]) == 0o700  # still executable, by its owner only
    assert mode(outside) == 0o644  # a symbolic link is not followed out of the state dir
    assert files["config"].read_text() == "# new passwords\n"


@pytest.mark.local
def test_a_new_state_dir_and_config_are_private(tmp_path, open_umask):
    state = tmp_path / "new" / "state"
    prepare_state_dir(state)
    write_config(state / "jupyterhub_config.py", "# passwords\n")
    assert mode(state) == mode(state / "users") == 0o700
    assert mode(state / "jupyterhub_config.py") == 0o600
    assert open_paths(state) == []


async def _run_job(state_dir: Path, job_id: str) -> dict:
    backend = await LocalBackend.create(state_dir, grace_s=2.0, poll_s=0.05)
    try:
        doc = {"jobId": job_id, "trainingInput": {"pythonModule": "trainer.task", "packageUris": [str(TRAINER)],
                                                  "args": ["--epochs=1", "--sleep=0"], "region": "local"}}
        await backend.submit(plan_job(parse_job(doc), PlanSettings(Machines(accelerators={})),
                                      project="vision", owner="alice"))
        deadline = time.monotonic() + 60
        while (job := await backend.get("vision", job_id))["state"] not in FINAL:
            assert time.monotonic() < deadline, job
            await asyncio.sleep(0.05)
        return job
    finally:
        await backend.close()


@pytest.mark.local
def test_job_records_and_logs_are_private_under_an_open_umask(tmp_path, open_umask):
    state = tmp_path / "jobs-state"
    earlier = {"records": loose(state / "jobs.sqlite", ""),
               "log": loose(state / "jobs" / "vision" / "old_job" / "master-replica-0.log", "old\n")}
    os.chmod(state, 0o755)

    job = asyncio.run(_run_job(state, "private_1"))

    assert job["state"] == "SUCCEEDED", job
    job_dir = state / "jobs" / "vision" / "private_1"
    assert (job_dir / "master-replica-0.log").read_text().strip()
    assert mode(state) == mode(job_dir) == mode(job_dir.parent) == 0o700
    for path in (earlier["records"], earlier["log"], job_dir / "master-replica-0.log",
                 job_dir / "master-replica-0.exit"):
        assert mode(path) == 0o600, path
    assert open_paths(state) == []


# ---- the demo as `make demo` starts it ---------------------------------------------------------


def _wait(probe, timeout: float, what: str, log: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the demo exited with {proc.returncode}:\n{log.read_text()[-4000:]}"
        try:
            if probe():
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{what} within {timeout}s:\n{log.read_text()[-4000:]}")


@pytest.mark.hub
def test_make_demo_keeps_its_state_from_other_os_accounts(tmp_path):
    from tests.harness.hub import free_port, related_processes, stop_group
    from tests.hub.test_hub_harness import form_login

    state = tmp_path / "state"
    files = earlier_run(state)
    port = free_port()
    log = tmp_path / "demo.log"
    marker = f"MLPLATFORM_STATE_TEST={os.getpid()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "CONFIGPROXY_"))}
    env.update(dict([marker.split("=", 1)]), DEMO_PORT=str(port))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    before = os.umask(0o022)  # the operator's usual umask: the demo must not depend on it
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "hub_ext.cli", "demo", "--state-dir", str(state)],
                                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
    finally:
        os.umask(before)
    url = f"http://127.0.0.1:{port}"
    ok = False
    try:
        _wait(lambda: requests.get(f"{url}/hub/api/", timeout=5).status_code == 200, 90, "the hub answers", log,
              proc)
        password = re.search(r"Password:\s+(\S+)", log.read_text()).group(1)
        session, r = form_login(url, "alice", password)
        assert r.status_code == 302, r.text
        r = session.post(f"{url}/hub/api/users/alice/tokens", json={"note": "state test"},
                         headers={"X-XSRFToken": session.cookies["_xsrf"]}, timeout=30)
        assert r.status_code == 201, r.text
        auth = {"Authorization": f"token {r.json()['token']}"}
        r = requests.post(f"{url}/hub/api/users/alice/server", json={"project": "vision", "profile": "cpu"},
                          headers=auth, timeout=60)
        assert r.status_code in (201, 202), r.text
        _wait(lambda: requests.get(f"{url}/hub/api/users/alice", headers=auth, timeout=10)
              .json()["servers"].get("", {}).get("ready"), 120, "alice's server is ready", log, proc)
        jobs = f"{url}/user/alice/ml/v1/projects/vision/jobs"
        job = {"jobId": "demo_private", "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task",
                                                          "packageUris": [TRAINER.as_uri()],
                                                          "args": ["--epochs=1", "--sleep=0"]}}
        r = requests.post(jobs, json=job, headers=auth, timeout=60)
        assert r.status_code == 200, r.text
        _wait(lambda: requests.get(f"{jobs}/demo_private", headers=auth, timeout=10).json()["state"] in FINAL,
              60, "the job ends", log, proc)
        assert requests.get(f"{jobs}/demo_private", headers=auth, timeout=10).json()["state"] == "SUCCEEDED"
        ok = True
    finally:
        leftovers = stop_group(proc, lambda: related_processes(proc.pid, proc.pid, marker.encode()), 30, 10)
        if not ok:
            print(log.read_text()[-6000:])
    assert leftovers == [], leftovers

    job_dir = state / "platform" / "jobs" / "alice" / "jobs" / "vision" / "demo_private"
    created = [state / "jupyterhub_config.py", state / "jupyterhub_cookie_secret", state / "jupyterhub.sqlite",
               state / "platform" / "jobs" / "alice" / "jobs.sqlite", job_dir / "master-replica-0.log"]
    for path in created + [files["devices"], files["old_log"], files["credential"]]:
        assert mode(path) == 0o600, path
    for path in (state, state / "users" / "alice", state / "platform", job_dir):
        assert mode(path) == 0o700, path
    assert open_paths(state) == []
    assert proc.returncode is not None and proc.returncode != -signal.SIGKILL
