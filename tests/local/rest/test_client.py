"""`ServerJobs`, the client of the notebook server's own ml/v1 API, against a real server (the
extension on the local backend, the example trainer as real processes); and `kubectl ai-platform`
run in that server's "terminal" (JupyterHub's environment variables), whose jobs are the server's."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time

import pytest

from server_ext.cli.flags import flagged, parse_args
from server_ext.client import RemoteService, ServerJobs, from_environment
from server_ext.errors import JobExists, JobFinished, JobNotFound, UpstreamError, UserInputError
from server_ext.jobs.submission import Package, Submission
from tests.conftest import ROOT
from tests.local.rest.conftest import PROJECT, TRAINER, job_body

pytestmark = pytest.mark.local

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kubectl-ai_platform")


@pytest.fixture
def server(jp_serverapp, http_server, http_server_port, jp_base_url):
    """(base URL, token) of the listening server."""
    return f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}", jp_serverapp.identity_provider.token


async def wait_state(jobs: ServerJobs, job_id: str, states: tuple[str, ...], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while (job := await jobs.get(PROJECT, job_id))["state"] not in states:
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.1)
    return job


def test_create_list_pages_get_cancel(server, run):
    async def go():
        async with ServerJobs(*server) as jobs:
            created = await jobs.create(PROJECT, job_body("long", "--epochs=1000", "--sleep=0.5"))
            assert created["jobId"] == "long" and created["state"] in ("QUEUED", "PREPARING", "RUNNING")
            await jobs.create(PROJECT, {**job_body("quick", "--epochs=1", "--sleep=0"), "labels": {"team": "nlp"}})
            await jobs.create(PROJECT, job_body("third", "--epochs=1", "--sleep=0"))
            seen, token = [], None
            while True:
                page = await jobs.list(PROJECT, page_size=1, page_token=token)
                assert len(page["jobs"]) == 1
                seen += [j["jobId"] for j in page["jobs"]]
                if not (token := page.get("nextPageToken")):
                    break
            assert seen == ["third", "quick", "long"]
            assert [j["jobId"] for j in (await jobs.list(PROJECT, "labels.team=nlp"))["jobs"]] == ["quick"]
            assert (await jobs.get(PROJECT, "long"))["trainingInput"]["args"] == ["--epochs=1000", "--sleep=0.5"]
            await wait_state(jobs, "long", ("RUNNING",))
            assert await jobs.cancel(PROJECT, "long") == {}
            await wait_state(jobs, "long", ("CANCELLED",), timeout=30)
            with pytest.raises(JobFinished) as finished:
                await jobs.cancel(PROJECT, "long")
            assert (finished.value.job_id, finished.value.state) == ("long", "CANCELLED")
    run(go())


def test_every_error_is_the_backends_exception(server, jp_root_dir, run, tmp_path):
    (jp_root_dir / "trainer").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()

    async def go():
        async with ServerJobs(*server) as jobs:
            await jobs.create(PROJECT, job_body("dup", "--epochs=1", "--sleep=0"))
            with pytest.raises(JobExists) as e:
                await jobs.create(PROJECT, job_body("dup"))
            assert (e.value.project, e.value.job_id) == (PROJECT, "dup")
            for call in (jobs.get(PROJECT, "nope"), jobs.cancel(PROJECT, "nope"), anext(jobs.logs(PROJECT, "nope"))):
                with pytest.raises(JobNotFound) as e:
                    await call
                assert (e.value.project, e.value.job_id) == (PROJECT, "nope")
            cases = [
                (jobs.create(PROJECT, {"jobId": "1bad", "trainingInput": {}}), "jobId", 400),
                (jobs.create(PROJECT, {"jobId": "ok", "trainingInput": {"sclaeTier": "BASIC"}}),
                 "trainingInput.sclaeTier", 400),
                (jobs.create(PROJECT, {**job_body("pkg"), "package": {"path": str(outside)}}), "package.path", 400),
                (jobs.list(PROJECT, "state=("), "filter", 400),
                (jobs.list(PROJECT, page_size="many"), "pageSize", 400),
                (jobs.get("bob", "dup"), "project", 403),
                (jobs.create("bob", job_body("x")), "project", 403),
                (anext(jobs.logs("bob", "dup")), "project", 403),
            ]
            for call, field, status in cases:
                with pytest.raises(UserInputError) as e:
                    await call
                assert (e.value.field, e.value.status) == (field, status), e.value
            # through RemoteService (the CLI's), a package field is named in REST terms; the CLI names its flag
            with pytest.raises(UserInputError) as e:
                await RemoteService(jobs).create("ignored", PROJECT, Submission(job_body("pkg"),
                                                                                package=Package(str(outside))))
            assert e.value.field == "package.path" and "root directory" in e.value.message
            args = parse_args(["jobs", "submit", "training", "pkg", "--package-path", str(outside)])
            assert flagged(e.value, args).field == "--package-path"
        async with ServerJobs(server[0], "wrong-token") as refused:
            with pytest.raises(UserInputError) as e:
                await refused.list(PROJECT)
            assert (e.value.field, e.value.status) == ("token", 403)
        async with ServerJobs(server[0] + "no/such/prefix/", server[1]) as elsewhere:
            with pytest.raises(UpstreamError, match="no ml/v1 jobs API"):
                await elsewhere.get(PROJECT, "dup")
        async with ServerJobs("http://127.0.0.1:9/", "t") as closed:
            with pytest.raises(UpstreamError, match="did not answer"):
                await closed.list(PROJECT)
    run(go())


class CuttingProxy:
    """A TCP proxy in front of the server that drops its first connection after `cut` bytes of the
    response body (mid-event, as a flaky network would), and records every request head."""

    def __init__(self, target_port: int, cut: int):
        self.target_port, self.cut = target_port, cut
        self.requests: list[str] = []
        self.connections = 0

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        self.server.close()

    async def _serve(self, reader, writer) -> None:
        first = self.connections == 0
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def upstream() -> None:
            head = b""
            while data := await reader.read(65536):
                if b"\r\n\r\n" not in head:
                    head += data
                    if b"\r\n\r\n" in head:
                        self.requests.append(head.split(b"\r\n\r\n")[0].decode())
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            received = b""
            while data := await up_reader.read(65536):
                if first:
                    received += data
                    head, sep, body = received.partition(b"\r\n\r\n")
                    if sep and len(body) >= self.cut:
                        writer.write(data[: len(data) - (len(body) - self.cut)])
                        await writer.drain()
                        return
                writer.write(data)
                await writer.drain()

        pumps = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            writer.close()
            up_writer.close()


def test_a_followed_log_resumes_after_a_dropped_connection(server, http_server_port, jp_base_url, run):
    async def go():
        proxy = CuttingProxy(http_server_port[-1], cut=200)
        through = await proxy.start()
        async with ServerJobs(*server) as jobs, ServerJobs(f"{through}{jp_base_url}", server[1]) as flaky:
            await jobs.create(PROJECT, job_body("streamed", "--epochs=8", "--sleep=0.1"))
            lines = [line async for line in flaky.logs(PROJECT, "streamed", follow=True)]
            assert (await jobs.get(PROJECT, "streamed"))["state"] == "SUCCEEDED"
            whole = [line async for line in jobs.logs(PROJECT, "streamed")]
            assert lines == whole and [line.seq for line in lines] == list(range(1, len(whole) + 1))
            assert any("epoch 8/8" in line.text for line in lines)
            logs = [r for r in proxy.requests if "/logs?" in r.split("\r\n")[0]]
            assert len(logs) == 2 and proxy.connections == 2, proxy.requests
            resumed = int(next(h.split(":", 1)[1] for h in logs[1].split("\r\n") if h.lower().startswith(
                "last-event-id:")))
            assert 1 <= resumed < len(whole) - 1  # the cut came mid-stream, after some lines
            tail = [line async for line in jobs.logs(PROJECT, "streamed", after=3)]
            assert tail == whole[3:]
        await proxy.close()
    run(go())


def test_kubectl_plugin_in_a_notebook_terminal_uses_the_servers_jobs(server, jp_root_dir, run, tmp_path):
    shutil.copytree(TRAINER, jp_root_dir / "trainer")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLPLATFORM_", "JUPYTERHUB_", "JUPYTER_"))}
    env.update(JUPYTERHUB_SERVICE_URL=server[0], JUPYTERHUB_API_TOKEN=server[1], JUPYTERHUB_USER="alice",
               MLPLATFORM_PROJECT=PROJECT, MLPLATFORM_STATE_DIR=str(tmp_path / "cli-state"), PYTHONPATH=str(ROOT))
    command = [SCRIPT] if os.path.exists(SCRIPT) else [sys.executable, "-m", "server_ext.cli.main"]
    assert from_environment(env).base_url == server[0]

    async def cli(*argv: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(*command, *argv, cwd=jp_root_dir, env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        return proc.returncode, out.decode(), err.decode()

    async def go():
        code, out, err = await cli("jobs", "submit", "training", "j1", "--module-name", "trainer.task",
                                   "--package-path", "trainer", "--stream-logs", "--", "--epochs=2", "--sleep=0")
        assert code == 0, err
        assert err.startswith("Job [j1] submitted successfully.\nINFO\t")
        assert "\tmaster-replica-0\t\tepoch 2/2 loss=" in err and "\tmaster-replica-0\t\tdone: rmse=" in err
        assert "jobId: j1\n" in out and out.endswith("state: SUCCEEDED\n")
        code, out, err = await cli("jobs", "list", "--format", "value(jobId,state)")
        assert (code, out) == (0, "j1\tSUCCEEDED\n"), err
        code, out, err = await cli("jobs", "describe", "j1")
        assert code == 0 and "jobId: j1\n" in out and "  - --epochs=2\n" in out, err
        assert "  - configmap://j1-package/" in out
        code, out, err = await cli("jobs", "submit", "training", "j2", "--module-name", "trainer.task",
                                   "--package-path", str(tmp_path))
        assert (code, out) == (2, "") and err.startswith("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid "
                                                         "value for [--package-path]: must be a directory inside "), err
        code, out, err = await cli("jobs", "submit", "training", "j2", "--module-name", "trainer.task",
                                   "--packages", TRAINER.as_uri(), "--credentials", "nope")
        assert (code, out, err) == (1, "", "ERROR: (kubectl ai-platform.jobs.submit.training) PERMISSION_DENIED: "
                                           "the project 'alice' has no credential 'nope'\n")  # as the local CLI says
        async with ServerJobs(*server) as jobs:  # one backend: the server's
            assert [j["jobId"] for j in (await jobs.list(PROJECT))["jobs"]] == ["j1"]
            assert (await jobs.get(PROJECT, "j1"))["state"] == "SUCCEEDED"

        # the server is the local runtime: --local answers from it too, never from a runtime of its own
        plain = await cli("jobs", "describe", "j1")
        assert await cli("jobs", "describe", "j1", "--local") == plain and plain[0] == 0
        assert await cli("jobs", "list", "--local", "--format", "value(jobId,state)") == (0, "j1\tSUCCEEDED\n", "")
        code, out, err = await cli("jobs", "submit", "training", "j3", "--local", "--module-name", "trainer.task",
                                   "--packages", TRAINER.as_uri(), "--", "--epochs=1", "--sleep=0")
        assert code == 0 and "  $ kubectl ai-platform jobs describe j3\n" in err, err  # works as printed here
        async with ServerJobs(*server) as jobs:
            await wait_state(jobs, "j3", ("SUCCEEDED",))

        # local train runs apart, on a runtime of its own in a fresh directory: not one of the server's jobs
        code, out, err = await cli("local", "train", "--module-name", "trainer.task", "--package-path", "trainer",
                                   "--", "--epochs=1", "--sleep=0")
        assert code == 0 and "epoch 1/1 " in out, err
        async with ServerJobs(*server) as jobs:
            assert [j["jobId"] for j in (await jobs.list(PROJECT))["jobs"]] == ["j3", "j1"]
    run(go())
    state = tmp_path / "cli-state"
    assert [p.name for p in state.iterdir()] == ["local-train"]  # nothing else of the server's state dir
    (run_dir,) = (state / "local-train").iterdir()
    assert run_dir.name.startswith("local_train_") and (run_dir / "jobs.sqlite").exists()
