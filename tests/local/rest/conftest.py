"""jupyter_server's own test fixtures (pytest-jupyter: `jp_fetch`, `jp_serverapp`, …) for this
directory only: its hooks run the tests' coroutines on the server's loop, so they are not
registered for the rest of the suite, which uses pytest-asyncio."""

from pytest_jupyter.jupyter_core import *  # noqa: F401,F403
from pytest_jupyter.jupyter_server import *  # noqa: F401,F403

import json
import pathlib

import pytest

from tests.conftest import ROOT

TRAINER = ROOT / "examples" / "trainer" / "trainer"
PROJECT = "alice"


@pytest.fixture
def jp_server_config(tmp_path):
    """The server with the extension on the local backend; its user may use projects alice and vision."""
    return {"ServerApp": {"jpserver_extensions": {"server_ext": True}},
            "MLPlatformApp": {"state_dir": str(tmp_path / "state"), "projects": [PROJECT, "vision"]}}


@pytest.fixture
def run(jp_asyncio_loop):
    """Run a coroutine on the server's loop (the tests are plain functions: pytest-jupyter's server
    lives on its own loop, not pytest-asyncio's)."""
    return jp_asyncio_loop.run_until_complete


def job_body(job_id: str, *args: str, **training) -> dict:
    """A job of the example trainer, shipped as its package directory."""
    return {"jobId": job_id, "labels": {"team": "vision"},
            "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task",
                              "packageUris": [TRAINER.as_uri()], "args": list(args), **training}}


@pytest.fixture
def api(jp_fetch):
    """JSON calls to ml/v1; answers (status, body) and never raises for HTTP errors."""
    async def call(method: str, *parts: str, body=None, params=None, headers=None):
        kwargs = {"method": method, "raise_error": False, "params": params or {}}
        if headers is not None:
            kwargs["headers"] = headers
        if body is not None:
            kwargs["body"] = json.dumps(body) if not isinstance(body, (str, bytes)) else body
        elif method == "POST":
            kwargs["body"] = b""
        resp = await jp_fetch("ml", "v1", "projects", *parts, **kwargs)
        return resp.code, json.loads(resp.body or b"null")
    return call
