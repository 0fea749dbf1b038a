"""``GET ml/v1/projects``: the projects the server's user may use (the JupyterLab panel's project
switcher), from the same source as the jobs service's project check; the server's token needed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.local


def test_the_projects_the_user_may_use(api, run):
    assert run(api("GET")) == (200, {"projects": [{"name": "alice"}, {"name": "vision"}]})


def test_the_projects_need_the_servers_token(jp_fetch, run):
    resp = run(jp_fetch("ml", "v1", "projects", raise_error=False, headers={"Authorization": "token wrong"}))
    assert resp.code == 403
