"""Every request handler the server extension registers refuses a request without credentials,
for every HTTP method, whatever the route (style: "every HTTP method authenticated").

The notebook server is booted in this process with the extension and
``allow_unauthenticated_access=False`` and no socket (``new_httpserver=False``); any
`JupyterServerAuthWarning` (a handler method without ``@web.authenticated``) fails the test. The
handlers are enumerated from the web application's routing table (every rule whose handler class
comes from ``server_ext``), not from a list written here; for each, a path its pattern matches is
generated from the pattern itself (`sample_path`) and every method is sent through the app with no
token and no cookie (but a matching XSRF pair, so a refusal is the authentication's, not the XSRF
check's). A control request with the token reaches the same handlers (``GET ml/v1/projects`` 200).
"""

from __future__ import annotations

import asyncio
import re
import warnings
from types import SimpleNamespace

import pytest
from tornado import httputil
from tornado.routing import PathMatches, Router
from tornado.web import RequestHandler

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

TOKEN = "unit-test-token"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
SAMPLES = {"project": "demo", "job_id": "job1", "trial_id": "1"}  # by group name; others generated


def sample_path(pattern: re.Pattern) -> str:
    """One path `pattern` matches: the shortest choice at each repeat, the first of each branch or
    set (a negated set: a letter), named groups by `SAMPLES`."""
    names = {v: k for k, v in pattern.groupindex.items()}

    def gen(items) -> str:
        out = []
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "SUBPATTERN":
                group = arg[0]
                if group in names and names[group] in SAMPLES:
                    out.append(SAMPLES[names[group]])
                else:
                    out.append(gen(arg[-1]))
            elif name == "BRANCH":
                out.append(gen(arg[1][0]))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                out.append(gen(arg[2]) * arg[0])
            elif name == "IN":
                out.append(_one_of(arg))
            elif name == "ANY":
                out.append("a")
            elif name == "AT":
                pass
            else:
                raise AssertionError(f"sample_path: {name} in {pattern.pattern!r}")
        return "".join(out)

    path = gen(sre_parse.parse(pattern.pattern))
    assert pattern.match(path), (pattern.pattern, path)
    return path


def _one_of(items) -> str:
    if str(items[0][0]) == "NEGATE":
        return "a"
    op, arg = items[0]
    if str(op) == "LITERAL":
        return chr(arg)
    if str(op) == "RANGE":
        return chr(arg[0])
    if str(op) == "CATEGORY":
        return "1" if "DIGIT" in str(arg) else "a"
    raise AssertionError(f"sample_path: set {items}")


def extension_routes(router) -> list[tuple[PathMatches, type]]:
    """(matcher, handler class) of every rule under `router` whose class is the extension's."""
    found = []
    for rule in getattr(router, "rules", []):
        target = rule.target
        if isinstance(target, Router) or hasattr(target, "rules"):
            found += extension_routes(target)
        elif isinstance(target, type) and issubclass(target, RequestHandler) \
                and target.__module__.startswith("server_ext."):
            found.append((rule.matcher, target))
    return found


class _Connection(httputil.HTTPConnection):
    """Takes one response in memory (no socket)."""

    def __init__(self) -> None:
        self.context = SimpleNamespace(remote_ip="127.0.0.1", protocol="http", address=("127.0.0.1", 0),
                                       trusted_downstream=set())
        self.code: int | None = None
        self.body = b""
        self.done = asyncio.Event()

    def set_close_callback(self, callback) -> None:
        pass

    def _ok(self):
        f = asyncio.get_running_loop().create_future()
        f.set_result(None)
        return f

    def write_headers(self, start_line, headers, chunk=None):
        self.code = start_line.code
        self.body += chunk or b""
        return self._ok()

    def write(self, chunk, callback=None):
        self.body += chunk
        return self._ok()

    def finish(self) -> None:
        self.done.set()


async def send(web_app, method: str, path: str, headers: dict[str, str]) -> _Connection:
    conn = _Connection()
    body = b"{}" if method in ("POST", "PUT", "PATCH") else b""
    request = httputil.HTTPServerRequest(start_line=httputil.RequestStartLine(method, path, "HTTP/1.1"),
                                         headers=httputil.HTTPHeaders(
        {"Host": "127.0.0.1:8888", "Cookie": "_xsrf=abc", "X-XSRFToken": "abc", **headers}),
        body=body, connection=conn)
    delegate = web_app.find_handler(request)
    delegate.execute()
    await asyncio.wait_for(conn.done.wait(), 30)
    return conn


@pytest.fixture
def server(tmp_path, monkeypatch):
    from jupyter_server.serverapp import ServerApp
    from jupyter_server.utils import JupyterServerAuthWarning
    from traitlets.config import Config

    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    for var in ("JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN", "MLPLATFORM_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "root").mkdir()
    config = Config({
        "ServerApp": {"jpserver_extensions": {"server_ext": True}, "root_dir": str(tmp_path / "root"),
                      "allow_unauthenticated_access": False, "open_browser": False, "allow_root": True},
        "IdentityProvider": {"token": TOKEN},
        "MLPlatformApp": {"backend": "local", "state_dir": str(tmp_path / "state"), "projects": ["demo"]},
    })
    app = ServerApp(config=config)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JupyterServerAuthWarning)
        app.initialize(argv=[], find_extensions=False, new_httpserver=False)
    yield app
    ServerApp.clear_instance()


async def test_every_extension_handler_refuses_unauthenticated_requests(server):
    routes = extension_routes(server.web_app.default_router)
    classes = {cls.__name__ for _, cls in routes}
    assert len(routes) >= 5 and "NotFoundHandler" in classes, \
        f"the extension registered {classes or 'no handler'} (did it fail to load? its log says why)"

    refused, answered = [], []
    for matcher, cls in routes:
        path = sample_path(matcher.regex)
        for method in METHODS:
            conn = await send(server.web_app, method, path, {})
            seen = f"{method} {path} ({cls.__name__}): {conn.code} {conn.body[:200]!r}"
            (refused if conn.code in (401, 403) and b"XSRF" not in conn.body else answered).append(seen)
    assert not answered, "not refused by authentication:\n" + "\n".join(answered)
    assert len(refused) == len(routes) * len(METHODS)

    # the control: with the token the same app answers
    ok = await send(server.web_app, "GET", "/ml/v1/projects", {"Authorization": f"token {TOKEN}"})
    assert ok.code == 200, ok.body
    assert b'"demo"' in ok.body


def test_sample_paths_match_their_patterns():
    assert sample_path(re.compile(r"/ml/v1/projects/(?P<project>[^/]+)/jobs/(?P<job_id>[A-Za-z][A-Za-z0-9_]*)"
                                  r"(?::|%3[Aa])cancel$")) == "/ml/v1/projects/demo/jobs/job1:cancel"
    assert sample_path(re.compile(r"/ml/v1(?:/.*)?$")) == "/ml/v1"
