"""The hub-managed reconciler service (`python -m hub_ext.web.reconcile`, as JupyterHub starts it)
as a real process: it keeps asking while the hub that started it lives, and stops by itself once
that process is gone (a hub killed with SIGKILL cannot stop its services; found as a process left
behind by the hub tier's killed-hub test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.local


def test_the_reconciler_stops_once_the_hub_that_started_it_is_gone(tmp_path):
    env = {**os.environ, "JUPYTERHUB_API_URL": "http://127.0.0.1:9/hub/api", "JUPYTERHUB_API_TOKEN": "t"}
    pid_file = tmp_path / "service.pid"
    # a stand-in parent for the hub (a shell that starts the service, as the hub does, then waits)
    hub = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -m hub_ext.web.reconcile --interval 300 '
                                        f'2>"{tmp_path}/service.log" & echo $! > "{pid_file}"; wait'],
                           cwd=ROOT, env=env, start_new_session=True)
    try:
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        service = int(pid_file.read_text())
        time.sleep(3)
        assert _alive(service), (tmp_path / "service.log").read_text()  # the hub lives: it keeps going
        hub.send_signal(signal.SIGKILL)
        hub.wait()
        deadline = time.monotonic() + 15
        while _alive(service) and time.monotonic() < deadline:
            time.sleep(0.1)
        log = (tmp_path / "service.log").read_text()
        assert not _alive(service), log
        assert "the hub that started this service is gone; stopping" in log, log
        assert "cannot be reached" in log, log  # it had been asking meanwhile
    finally:
        os.killpg(hub.pid, signal.SIGKILL) if hub.poll() is None else None
        if pid_file.exists() and pid_file.read_text().strip() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
