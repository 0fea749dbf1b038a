"""A client written for Google's ml.v1 works against the notebook server with only the endpoint
changed: googleapiclient built from the bundled discovery document creates, lists, gets and
cancels jobs, and sees Google-shaped errors."""

from __future__ import annotations

import asyncio
import json

import google.oauth2.credentials
import pytest
from googleapiclient.discovery import build_from_document
from googleapiclient.errors import HttpError

from server_ext.jobs.schema import DISCOVERY
from tests.local.rest.conftest import PROJECT, job_body

pytestmark = pytest.mark.local


@pytest.fixture
def ml(jp_serverapp, http_server, http_server_port, jp_base_url):
    token = jp_serverapp.identity_provider.token
    endpoint = f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}ml/"
    return build_from_document(DISCOVERY.read_text(), credentials=google.oauth2.credentials.Credentials(token),
                               client_options={"api_endpoint": endpoint})


def test_googleapiclient_create_list_get_cancel(ml, run):
    jobs = ml.projects().jobs()
    parent = f"projects/{PROJECT}"

    async def call(request):  # the client is synchronous; the server runs on this thread's loop
        return await asyncio.get_running_loop().run_in_executor(None, request.execute)

    async def go():
        created = await call(jobs.create(parent=parent, body=job_body("from_client", "--epochs=1000", "--sleep=0.5")))
        assert created["jobId"] == "from_client"
        listed = await call(jobs.list(parent=parent, filter="labels.team=vision", pageSize=10))
        assert [j["jobId"] for j in listed["jobs"]] == ["from_client"]
        got = await call(jobs.get(name=f"{parent}/jobs/from_client"))
        assert got["trainingInput"]["pythonModule"] == "trainer.task"
        assert await call(jobs.cancel(name=f"{parent}/jobs/from_client", body={})) == {}
        with pytest.raises(HttpError) as e:
            await call(jobs.create(parent=parent, body=job_body("from_client")))
        assert e.value.status_code == 409
        assert json.loads(e.value.content)["error"]["status"] == "ALREADY_EXISTS"
        with pytest.raises(HttpError) as e:
            await call(jobs.get(name=f"{parent}/jobs/missing"))
        assert e.value.status_code == 404
    run(go())
