"""On the local runtime a running job keeps its notebook server active (`MLPlatformApp.
running_jobs_are_activity`): its processes are the server's, so an idle culler stopping the server
in the middle of a job would kill it. While a job runs, jupyter_server's ``api_last_activity``
moves every ``activity_interval`` seconds with no request at all; once it has ended, it stays."""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest

from tests.local.rest.conftest import PROJECT, job_body

pytestmark = pytest.mark.local

LONG_AGO = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["MLPlatformApp"]["activity_interval"] = 0.2
    return jp_server_config


def test_a_running_local_job_keeps_the_server_active_and_an_ended_one_does_not(api, run, jp_serverapp):
    settings = jp_serverapp.web_app.settings

    def moved_by_itself(seconds: float = 1.0) -> bool:
        settings["api_last_activity"] = LONG_AGO
        run(asyncio.sleep(seconds))
        return settings["api_last_activity"] != LONG_AGO

    code, job = run(api("POST", PROJECT, "jobs", body=job_body("runs_a_while", "--epochs=1000", "--sleep=0.2")))
    assert code == 200, job
    assert moved_by_itself(), "a running job did not keep the server active"
    code, _ = run(api("POST", PROJECT, "jobs", "runs_a_while:cancel"))
    assert code == 200
    deadline = time.monotonic() + 30
    while run(api("GET", PROJECT, "jobs", "runs_a_while"))[1]["state"] != "CANCELLED":
        assert time.monotonic() < deadline
        run(asyncio.sleep(0.2))
    assert not moved_by_itself(), "an ended job still keeps the server active"

