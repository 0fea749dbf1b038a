"""A real JupyterHub for tests: ``jupyterhub`` + configurable-http-proxy + single-user servers.

:class:`HubProcess` starts ``sys.executable -m jupyterhub`` as a subprocess in its own session
and process group, on free 127.0.0.1 ports, with the project's configurable-http-proxy
(``node_modules/.bin``). What it guarantees:

- The caller's config (Python source, or ``{"Class": {"trait": value}}`` / ``{"Class.trait":
  value}``) is loaded first; the harness then *always* sets the network and state settings
  (``bind_url``, hub and proxy API ports, proxy command, database, cookie secret, pid files
  under the hub's directory) and adds a ``harness`` service whose random :attr:`token` has an
  admin-like role (users, servers, server state, access to servers, tokens, proxy, metrics).
- :meth:`start` returns only once ``GET {url}/hub/api/`` answers 200 through the proxy, and
  fails with the tail of the hub log if the hub exits or does not answer in time.
- Hub stdout and stderr go to :attr:`log_path`.
- :meth:`stop` sends SIGTERM to the hub's group, waits, escalates to SIGKILL, and then
  **asserts that nothing it started is left alive**: no process of the hub's process group,
  none of the hub's descendants (the proxy and single-user servers run in sessions of their
  own), and no process carrying this hub's marker environment variable. Leftovers are killed
  before the AssertionError is raised, so a failing test does not leak processes.

Linux only (it reads ``/proc``); adds no dependencies beyond ``requests``.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from hub_ext.local.demo import free_port, render_config

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = PROJECT_ROOT / "node_modules" / ".bin"
MARKER_ENV = "MLPLATFORM_HARNESS_HUB"

HARNESS_SCOPES = [
    "admin:users",
    "admin:servers",
    "admin:server_state",
    "admin:groups",
    "access:servers",
    "tokens",
    "read:hub",
    "read:roles",
    "read:metrics",
    "proxy",
]


@dataclass(frozen=True)
class ProcInfo:
    """One live process, identified by pid *and* start time (pids are reused)."""

    pid: int
    start_time: int
    cmdline: str

    def alive(self) -> bool:
        stat = _stat(self.pid)
        return stat is not None and stat["start_time"] == self.start_time and stat["state"] != "Z"


def _stat(pid: int) -> dict | None:
    """Fields of /proc/<pid>/stat we need, or None if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    return {"state": fields[0], "ppid": int(fields[1]), "pgid": int(fields[2]), "start_time": int(fields[19])}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _has_env(pid: int, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def related_processes(root_pid: int, pgid: int, marker: bytes) -> list[ProcInfo]:
    """Live (non-zombie) descendants of ``root_pid``, members of ``pgid``, and holders of ``marker``."""
    stats = {pid: s for pid in _all_pids() if (s := _stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, s in stats.items():
        children.setdefault(s["ppid"], []).append(pid)
    found: set[int] = set()
    todo = [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    found |= {pid for pid, s in stats.items() if s["pgid"] == pgid}
    found |= {pid for pid in stats if pid != os.getpid() and _has_env(pid, marker)}
    return [
        ProcInfo(pid, stats[pid]["start_time"], _cmdline(pid))
        for pid in sorted(found)
        if stats[pid]["state"] != "Z"
    ]


def wait_answering(proc: subprocess.Popen, probe, timeout: float, what: str, log_tail, interval: float = 0.25) -> None:
    """Return once `probe()` is true (a `requests` error counts as not yet); RuntimeError with the
    log's tail if `proc` exits first, TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log_tail()}")
        try:
            if probe():
                return
        except requests.RequestException:
            pass
        time.sleep(interval)
    raise TimeoutError(f"{what} did not answer in {timeout}s:\n{log_tail()}")


def stop_group(proc: subprocess.Popen, processes, stop_timeout: float, settle_s: float) -> list[ProcInfo]:
    """SIGTERM `proc`'s process group, SIGKILL it after `stop_timeout`; give what `processes()`
    found before (and finds after) `settle_s` to exit, then SIGKILL the rest. Returns those that
    were still alive (killed now): a clean stop returns []."""
    tracked = processes()
    for sig, wait in ((signal.SIGTERM, stop_timeout), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    deadline = time.monotonic() + settle_s
    leftovers = [p for p in tracked if p.alive()]
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.2)
        leftovers = [p for p in leftovers if p.alive()]
    leftovers += [p for p in processes() if p not in leftovers]
    for p in leftovers:
        if p.alive():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return leftovers


class HubProcess:
    """A running ``jupyterhub``; use as a context manager or call :meth:`start` / :meth:`stop`.

    ``config``: Python source of a ``jupyterhub_config.py`` or a settings dict (see
    :func:`hub_ext.local.demo.render_config`). ``directory``: where config, database, cookie secret
    and log go (created). ``env``: extra environment for the hub (e.g. ``KUBECONFIG``).
    """

    def __init__(
        self,
        config: str | dict,
        directory: Path,
        *,
        env: dict[str, str] | None = None,
        start_timeout: float = 60,
        stop_timeout: float = 30,
    ) -> None:
        self.directory = Path(directory)
        self.config_source = config if isinstance(config, str) else render_config(config)
        self.extra_env = dict(env or {})
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.token = secrets.token_hex(32)
        self.port, self.hub_port, self.proxy_api_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/hub/api"
        self.log_path = self.directory / "jupyterhub.log"
        self.config_path = self.directory / "jupyterhub_config.py"
        self._marker = f"{MARKER_ENV}={secrets.token_hex(8)}"
        self.proc: subprocess.Popen | None = None

    # -- configuration -------------------------------------------------------------------

    def harness_source(self) -> str:
        """The settings the harness appends after the caller's config."""
        d = self.directory
        proxy = NODE_BIN / "configurable-http-proxy"
        return f"""
# --- tests.harness.hub overrides ---
c.JupyterHub.bind_url = {self.url!r}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port!r}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.proxy_api_port}"
c.ConfigurableHTTPProxy.command = [{str(proxy) if proxy.exists() else "configurable-http-proxy"!r}]
c.ConfigurableHTTPProxy.pid_file = {str(d / "proxy.pid")!r}
c.JupyterHub.pid_file = {str(d / "jupyterhub.pid")!r}
c.JupyterHub.db_url = {"sqlite:///" + str(d / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(d / "cookie_secret")!r}
_h = c.JupyterHub
_h.services = (list(_h.services) if "services" in _h else []) + [
    {{"name": "harness", "api_token": {self.token!r}}}
]
_h.load_roles = (list(_h.load_roles) if "load_roles" in _h else []) + [
    {{"name": "harness", "scopes": {HARNESS_SCOPES!r}, "services": ["harness"]}}
]
"""

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTERHUB_", "CONFIGPROXY_"))}
        env["PATH"] = os.pathsep.join([str(NODE_BIN), str(Path(sys.executable).parent), env.get("PATH", "")])
        env.update(self.extra_env)
        key, value = self._marker.split("=", 1)
        env[key] = value
        return env

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, tries: int = 3) -> HubProcess:
        """Start the hub and wait until its API answers. A port taken between `free_port` and the
        hub's bind (another test's server took it: xdist workers share the machine) is not the
        test's failure: the hub is started again on fresh ports, at most `tries` times in all."""
        for attempt in range(tries):
            try:
                return self._start()
            except RuntimeError:
                if attempt == tries - 1 or "Address already in use" not in self.log_tail():
                    raise
                self.port, self.hub_port, self.proxy_api_port = free_port(), free_port(), free_port()
                self.url = f"http://127.0.0.1:{self.port}"
                self.api_url = f"{self.url}/hub/api"
                self.log_path.write_text("")  # the next try's log alone
        raise AssertionError("unreachable")

    def _start(self) -> HubProcess:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_source + self.harness_source())
        self.config_path.chmod(0o600)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(self.config_path)],
                cwd=self.directory,
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def _wait_ready(self) -> None:
        wait_answering(self.proc, lambda: requests.get(f"{self.api_url}/", timeout=2).status_code == 200,
                       self.start_timeout, f"jupyterhub ({self.api_url}/)", self.log_tail)

    def processes(self) -> list[ProcInfo]:
        """The live hub process and everything it started (proxy, servers, kernels)."""
        if self.proc is None:
            return []
        pid = self.proc.pid
        return related_processes(pid, pid, self._marker.encode())

    def stop(self, check: bool = True) -> None:
        """Stop the hub and everything it started; with ``check``, assert none survived."""
        if self.proc is None:
            return
        leftovers = stop_group(self.proc, self.processes, self.stop_timeout, settle_s=10)
        self.proc = None
        if check:
            assert not leftovers, "processes left behind by jupyterhub:\n" + "\n".join(
                f"  {p.pid}: {p.cmdline}" for p in leftovers
            )

    def restart(self, sig: int = signal.SIGTERM) -> HubProcess:
        """Stop only the hub process (with ``cleanup_servers = False`` its servers keep running) and
        start it again on the same ports, database, token and marker, so `stop` still accounts for
        every server either run started. ``sig=signal.SIGKILL``: the hub (and its proxy) crash."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        self.proc.wait(self.stop_timeout)
        self.proc = None
        return self.start()

    def __enter__(self) -> HubProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop(check=exc_info[0] is None)

    # -- helpers -------------------------------------------------------------------------

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        """``{method} {api_url}{path}`` with the harness token (``path`` starts with ``/``)."""
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.api_url + path, headers=headers, **kwargs)

    def wait_for_server(self, user: str, name: str = "", timeout: float = 120) -> dict:
        """Poll the hub API until ``user``'s server ``name`` is ready; returns its model."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.api("GET", f"/users/{user}")
            r.raise_for_status()
            server = r.json().get("servers", {}).get(name)
            if server and server.get("ready"):
                return server
            time.sleep(0.5)
        raise TimeoutError(f"server {user}/{name!r} not ready in {timeout}s:\n{self.log_tail()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
