"""A real notebook server for browser tests: ``jupyter lab`` or ``jupyter notebook`` (Notebook 7)
of this environment, with the platform's server extension on the local job backend.

:class:`NotebookServer` starts ``sys.executable -m jupyter <app>`` as a subprocess in its own
session and process group. What it guarantees:

- It listens on a free 127.0.0.1 port with a random token; ``root_dir``, the job backend's state,
  and Jupyter's config, data, runtime, settings and workspace directories are all under the
  caller's ``directory``: no user or machine configuration is read, nothing leaks between tests.
- The extension's settings: ``MLPlatformApp.backend = "local"``, ``state_dir`` under
  ``directory``, ``projects = [project]``.
- Its kernels can reach it as a JupyterHub single-user server's kernels can reach theirs: the
  server's environment (which kernels inherit) has ``MLPLATFORM_SERVER_URL`` +
  ``MLPLATFORM_SERVER_TOKEN`` (`server_ext.client.environment`'s first pair) and
  ``MLPLATFORM_PROJECT``; no ``JUPYTERHUB_*`` variable is passed on.
- :meth:`start` returns once ``GET /api/status`` answers 200 with the token, and fails with the
  tail of the server's log if it exits or does not answer in time. The log is :attr:`log_path`.
- :meth:`stop` stops the server's process group and asserts (as `tests.harness.hub` does) that
  nothing it started (kernels, job processes) is left alive; leftovers are killed first.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import requests

from hub_ext.local.demo import free_port
from tests.harness.hub import related_processes, stop_group, wait_answering

MARKER_ENV = "MLPLATFORM_HARNESS_LAB"


class NotebookServer:
    """``app``: ``"lab"`` (JupyterLab) or ``"notebook"`` (Notebook 7)."""

    def __init__(self, directory: Path, *, app: str = "lab", project: str = "demo",
                 start_timeout: float = 90, stop_timeout: float = 30) -> None:
        self.directory = Path(directory)
        self.app, self.project = app, project
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.root = self.directory / "root"
        self.state_dir = self.directory / "state"
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = self.directory / f"jupyter-{app}.log"
        self._marker = (MARKER_ENV, secrets.token_hex(8))
        self.proc: subprocess.Popen | None = None

    def environment(self) -> dict[str, str]:
        d = self.directory
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JUPYTERHUB_", "JUPYTER_", "JUPYTERLAB_", "MLPLATFORM_"))}
        env.update({
            "JUPYTER_CONFIG_DIR": str(d / "config"), "JUPYTER_DATA_DIR": str(d / "data"),
            "JUPYTER_RUNTIME_DIR": str(d / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(d / "lab-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(d / "lab-workspaces"), "JUPYTER_PLATFORM_DIRS": "1",
            "MLPLATFORM_BACKEND": "local", "MLPLATFORM_STATE_DIR": str(self.state_dir),
            "MLPLATFORM_SERVER_URL": self.url, "MLPLATFORM_SERVER_TOKEN": self.token,
            "MLPLATFORM_PROJECT": self.project, "PYTHONUNBUFFERED": "1",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        })
        env[self._marker[0]] = self._marker[1]
        return env

    def config(self) -> dict:
        return {
            "ServerApp": {"ip": "127.0.0.1", "port": self.port, "port_retries": 0, "open_browser": False,
                          "root_dir": str(self.root), "jpserver_extensions": {"server_ext": True},
                          "allow_root": os.geteuid() == 0},
            "IdentityProvider": {"token": self.token},
            "LanguageServerManager": {"autodetect": False},
            "LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
                       "extension_manager": "readonly"},
            "MLPlatformApp": {"backend": "local", "state_dir": str(self.state_dir), "projects": [self.project]},
        }

    def start(self) -> "NotebookServer":
        for sub in ("root", "state", "config", "data", "runtime"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        (self.directory / "config" / "jupyter_server_config.json").write_text(json.dumps(self.config(), indent=1))
        news = self.directory / "lab-settings" / "@jupyterlab" / "apputils-extension"
        news = news / "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True, exist_ok=True)
        news.write_text(json.dumps({"fetchNews": "false"}))  # no "news?" toast over the page
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "jupyter", self.app], cwd=self.root,
                                         env=self.environment(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop(check=False)
            raise
        return self

    def _wait_ready(self) -> None:
        wait_answering(self.proc, lambda: self.api("GET", "api/status", timeout=2).status_code == 200,
                       self.start_timeout, f"jupyter {self.app}", self.log_tail)

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        """``{method} {url}{path}`` with the token (``path`` relative to the base URL)."""
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        kwargs.setdefault("timeout", 30)
        return requests.request(method, self.url + path, headers=headers, **kwargs)

    def page_url(self, path: str) -> str:
        """A browser URL of the app's page for `path` (e.g. a notebook), logging in with the token."""
        kind = "lab/tree" if self.app == "lab" else "notebooks"
        return f"{self.url}{kind}/{path}?token={self.token}"

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def processes(self):
        if self.proc is None:
            return []
        return related_processes(self.proc.pid, self.proc.pid, "=".join(self._marker).encode())

    def stop(self, check: bool = True) -> None:
        """Stop the server and everything it started; with ``check``, assert none survived."""
        if self.proc is None:
            return
        leftovers = stop_group(self.proc, self.processes, self.stop_timeout, settle_s=15)
        self.proc = None
        if check:
            assert not leftovers, f"processes left behind by jupyter {self.app}:\n" + "\n".join(
                f"  {p.pid}: {p.cmdline}" for p in leftovers)

    def __enter__(self) -> "NotebookServer":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop(check=exc_info[0] is None)
