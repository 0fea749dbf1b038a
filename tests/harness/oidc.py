"""A real OpenID Connect provider for tests: ``tests/harness/oidc_provider.mjs`` (npm ``oidc-provider``).

:class:`OIDCProvider` starts ``node`` on a free 127.0.0.1 port in its own process group, with
the given OAuth clients and users, and returns from :meth:`start` once the discovery document
answers. Users live in a JSON file the provider rereads at every login and userinfo call:
:meth:`set_users` changes groups or passwords of a running provider (how a test removes a user
from a group). :meth:`stop` ends the process group and waits for it. Its log (never passwords or
secrets) is :attr:`log_path`.

A user is ``{"password": ..., "claims": {"email": ..., "email_verified": true, "groups": [...]}}``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
from pathlib import Path

import requests

from hub_ext.local.demo import free_port
from tests.harness.hub import wait_answering

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "oidc_provider.mjs"


def client(hub_url: str, client_id: str) -> dict:
    """An OAuth client of the hub at `hub_url`, with a fresh random secret."""
    return {"client_id": client_id, "client_secret": secrets.token_urlsafe(24),
            "redirect_uris": [f"{hub_url}/hub/oauth_callback"]}


class OIDCProvider:
    def __init__(self, directory: Path, clients: list[dict], users: dict, start_timeout: float = 30):
        self.directory = Path(directory)
        self.clients = clients
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.users_path = self.directory / "users.json"
        self.config_path = self.directory / "provider.json"
        self.log_path = self.directory / "provider.log"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self._initial_users = users

    def set_users(self, users: dict) -> None:
        """Replace the provider's users (atomically: a login never reads half a file)."""
        tmp = self.users_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(users))
        os.replace(tmp, self.users_path)

    def start(self) -> OIDCProvider:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.set_users(self._initial_users)
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"port": self.port, "issuer": self.issuer, "users_file": str(self.users_path),
                       "clients": self.clients, "cookie_key": secrets.token_hex(32)}, f)
        node = shutil.which("node") or "node"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([node, str(SCRIPT), str(self.config_path)], cwd=HERE, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_answering(self.proc, lambda: requests.get(f"{self.issuer}/.well-known/openid-configuration",
                                                           timeout=2).status_code == 200,
                           self.start_timeout, "oidc provider", self.log_text, interval=0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> OIDCProvider:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# -- driving a login with plain HTTP, as a browser would ---------------------------------------

def browse(session: requests.Session, method: str, url: str, **kwargs) -> requests.Response:
    """`method url`, then follow redirects while they stay on 127.0.0.1; the last response is
    returned (a redirect off-site is returned, not followed)."""
    from urllib.parse import urljoin, urlsplit

    r = session.request(method, url, allow_redirects=False, timeout=60, **kwargs)
    for _ in range(20):
        if not r.is_redirect:
            return r
        target = urljoin(r.url, r.headers["Location"])
        if urlsplit(target).hostname != "127.0.0.1":
            return r
        r = session.get(target, allow_redirects=False, timeout=60)
    raise AssertionError(f"too many redirects from {url}")


def form_action(response: requests.Response, suffix: str) -> str:
    import re
    from urllib.parse import urljoin

    m = re.search(r'action="([^"]*' + re.escape(suffix) + r')"', response.text)
    assert m, f"no form ending in {suffix} on {response.url} ({response.status_code}):\n{response.text[:2000]}"
    return urljoin(response.url, m.group(1))


def oidc_login(session: requests.Session, start_url: str, login: str, password: str) -> requests.Response:
    """From `start_url` (the hub's /hub/oauth_login…) through the provider's login and consent pages;
    returns the hub's last answer (its redirect target, or its refusal)."""
    r = browse(session, "GET", start_url)
    r = browse(session, "POST", form_action(r, "/login"), data={"login": login, "password": password})
    if 'action="/interaction/' in r.text and "/confirm" in r.text:
        r = browse(session, "POST", form_action(r, "/confirm"))
    return r
