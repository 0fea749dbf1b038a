"""``GET …/jobs:watch`` (server_ext/rest/watch.py): the listing at once, again when a job is
created or changes, as Server-Sent Events; a project not the user's is refused before any byte."""

from __future__ import annotations

import asyncio
import json

import pytest
from tornado.httpclient import HTTPClientError

from tests.local.rest.conftest import PROJECT, job_body

pytestmark = pytest.mark.local


def test_the_listing_comes_at_once_and_on_every_change(jp_fetch, api, run):
    async def go():
        events: list[dict] = []
        buffer = ""

        def chunk(data: bytes) -> None:
            nonlocal buffer
            buffer += data.decode()
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                if block.startswith("event: jobs"):
                    events.append(json.loads(block.split("data: ", 1)[1]))

        watching = asyncio.ensure_future(jp_fetch("ml", "v1", "projects", PROJECT, "jobs:watch",
                                                  streaming_callback=chunk, request_timeout=60))

        async def until(check, timeout=30.0):
            for _ in range(int(timeout * 20)):
                if check():
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"not seen in {timeout} s: {events}")

        try:
            await until(lambda: events and events[0] == {"jobs": []})
            code, _ = await api("POST", PROJECT, "jobs", body=job_body("watched", "--epochs=1", "--sleep=0"))
            assert code == 200
            await until(lambda: any(j["jobId"] == "watched" and j["state"] == "SUCCEEDED"
                                    for e in events for j in e["jobs"]), 60)
            states = [e["jobs"][0]["state"] for e in events[1:]]
            assert len(states) == len(set(states)), states  # sent only when it changes
        finally:
            watching.cancel()

    run(go())


def test_a_project_not_the_users_is_refused(jp_fetch, run):
    with pytest.raises(HTTPClientError) as e:
        run(jp_fetch("ml", "v1", "projects", "nobody", "jobs:watch"))
    assert e.value.code == 403
