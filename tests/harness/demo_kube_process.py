"""`python -m tests.harness.demo_kube` run as a user runs it (`make demo-kube`), for the browser
tier: `Launcher` starts it in a new session (its output in a file, a marker in its environment to
find every process it made); `login` reads the URL and password from its banner; `stop_cleanly`
sends Ctrl-C (SIGINT to its process group, as a terminal does) and checks what must hold after it:
exit 0 within 90 s, no process of it left, its pod address gone from ``lo``, nothing of its
directory still mounted. `log_in`, `start_in_lab` and `server_pod` are what a test does in it: log
in as a demo user, press Start on the spawn form and wait for JupyterLab, find the user's server pod
as the demo's admin."""

from __future__ import annotations

import os
import pathlib
import re
import secrets
import signal
import subprocess
import sys
import time

from hub_ext.core.ports import free_port
from tests.conftest import ROOT
from tests.harness.hub import related_processes

MARKER = "MLPLATFORM_DEMO_KUBE_TEST"


class Launcher:
    """`python -m tests.harness.demo_kube` as a user starts it, its output in a file."""

    def __init__(self, workdir: pathlib.Path):
        self.workdir, self.port = workdir, free_port()
        self.log = workdir.parent / "demo-kube.out"
        self.marker = f"{MARKER}={secrets.token_hex(8)}"
        env = {**os.environ, MARKER: self.marker.split("=", 1)[1]}
        self.started = time.monotonic()
        self.answering: float | None = None  # seconds from the launch to the banner (the hub answering)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.harness.demo_kube", "--port", str(self.port),
                                          "--workdir", str(workdir)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def login(self, timeout: float = 240) -> tuple[str, str]:
        """(URL, password) from the banner."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"URL:\s+(\S+)/hub/login\n.*?Password:\s+(\S+)", self.output(), re.S)
            if found:
                if self.answering is None:
                    self.answering = time.monotonic() - self.started
                return found.group(1), found.group(2)
            assert self.proc.poll() is None, f"demo-kube exited ({self.proc.returncode}):\n{self.output()}"
            time.sleep(0.5)
        raise TimeoutError(f"demo-kube printed no login in {timeout} s:\n{self.output()}")

    def processes(self):
        return related_processes(self.proc.pid, self.proc.pid, self.marker.encode())

    def stop(self, timeout: float = 120) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C in its terminal (SIGTERM: the same handler)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise


def stop_cleanly(demo: Launcher) -> None:
    """Ctrl-C, then: exit 0 within 90 s, saying so; no process left; its pod address off ``lo``
    (where it ran one); nothing of its directory mounted."""
    processes = demo.processes()
    corefile = demo.workdir / "cluster" / "network" / "Corefile"
    bound = re.search(r"bind (\S+)", corefile.read_text()) if corefile.exists() else None
    started = time.monotonic()
    assert demo.stop() == 0, demo.output()
    stopped_in = time.monotonic() - started
    time.sleep(1)
    left = [p for p in processes if p.alive()] + [p for p in demo.processes() if p.alive()]
    assert not left, "\n".join(f"{p.pid}: {p.cmdline}" for p in left)
    if bound:
        lo = subprocess.run(["ip", "addr", "show", "lo"], capture_output=True, text=True).stdout
        assert f"inet {bound.group(1)}/" not in lo
    assert str(demo.workdir) not in pathlib.Path("/proc/self/mountinfo").read_text()
    assert "demo-kube: stopped" in demo.output() and stopped_in < 90, (stopped_in, demo.output()[-2000:])


def admin_api(workdir: pathlib.Path):
    import kubernetes

    return kubernetes.config.new_client_from_config(config_file=str(workdir / "admin.kubeconfig"))


def log_in(page, url: str, password: str, user: str) -> None:
    """Log in on the hub's login page; the spawn form comes."""
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r"/hub/spawn"), timeout=60_000)


def start_in_lab(page, user: str) -> None:
    """Press the spawn form's Start and wait for JupyterLab."""
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(rf"/user/{user}/"), timeout=120_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)


def server_pod(workdir: pathlib.Path, project: str):
    """(a CoreV1Api as the demo's admin, the one notebook server pod in `project`)."""
    import kubernetes

    core = kubernetes.client.CoreV1Api(admin_api(workdir))
    (pod,) = [p for p in core.list_namespaced_pod(project).items
              if (p.metadata.labels or {}).get("component") == "singleuser-server"]
    return core, pod
