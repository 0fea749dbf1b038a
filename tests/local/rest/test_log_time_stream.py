"""A trainer writing to stdout and stderr on the local runtime, beside a real notebook server: the
log keeps each line's time and stream through the REST API's SSE events into the client, and
``kubectl ai-platform jobs stream-logs`` in a notebook terminal prints gcloud's records with the
line's real time and ERROR for what the trainer wrote to stderr, in the order written (issue 20,
item 6). Fails before the runtime kept them: stderr was merged into stdout, with no time."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys

import pytest

from server_ext.client import ServerJobs
from tests.conftest import ROOT
from tests.local.rest.conftest import PROJECT
from tests.local.rest.test_client import server, wait_state  # noqa: F401  (the fixture)

pytestmark = pytest.mark.local

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kubectl-ai_platform")
# A trainer as users write them: progress on stdout, warnings and the traceback on stderr (a pause
# between writes, as a training step takes).
TASK = '''import sys, time
print("loading the census data", flush=True)
time.sleep(0.3)
print("UserWarning: learning rate 0.9 is high", file=sys.stderr, flush=True)
time.sleep(0.3)
print("epoch 1/1 loss=0.52", flush=True)
time.sleep(0.3)
sys.stderr.write("Traceback (most recent call last):\\nValueError: NaN loss")
'''
SHOWN = [("INFO", "loading the census data"), ("ERROR", "UserWarning: learning rate 0.9 is high"),
         ("INFO", "epoch 1/1 loss=0.52"), ("ERROR", "Traceback (most recent call last):"),
         ("ERROR", "ValueError: NaN loss")]


def test_stream_logs_shows_each_lines_time_and_stderr_as_error(server, jp_root_dir, run, tmp_path):  # noqa: F811
    package = tmp_path / "noisy" / "noisy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(TASK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLPLATFORM_", "JUPYTERHUB_", "JUPYTER_"))}
    env.update(JUPYTERHUB_SERVICE_URL=server[0], JUPYTERHUB_API_TOKEN=server[1], JUPYTERHUB_USER="alice",
               MLPLATFORM_PROJECT=PROJECT, MLPLATFORM_CONFIG=str(tmp_path / "no-settings.yaml"),
               KUBECONFIG=str(tmp_path / "no-kubeconfig"), PYTHONPATH=str(ROOT), TZ="UTC")
    command = [SCRIPT] if os.path.exists(SCRIPT) else [sys.executable, "-m", "server_ext.cli.main"]

    async def go():
        before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        async with ServerJobs(*server) as jobs:
            await jobs.create(PROJECT, {"jobId": "noisy_1", "trainingInput": {
                "scaleTier": "BASIC", "pythonModule": "noisy.task", "packageUris": [package.as_uri()]}})
            await wait_state(jobs, "noisy_1", ("SUCCEEDED",))
            lines = [line async for line in jobs.logs(PROJECT, "noisy_1")]
        after = dt.datetime.now(dt.timezone.utc)
        mine = [line for line in lines if line.stream is not None]
        assert [(line.stream, line.text) for line in mine] == [
            ({"INFO": "stdout", "ERROR": "stderr"}[severity], text) for severity, text in SHOWN]
        times = [dt.datetime.fromisoformat(line.time.replace("Z", "+00:00")) for line in mine]
        assert all(line.time.endswith("Z") for line in mine) and times == sorted(times)
        assert before <= times[0] and times[-1] <= after and times[2] - times[0] >= dt.timedelta(seconds=0.5)

        proc = await asyncio.create_subprocess_exec(*command, "jobs", "stream-logs", "noisy_1", cwd=jp_root_dir,
                                                    env=env, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()
        records = [row.split("\t") for row in out.decode().splitlines()]
        shown = [r for r in records if r[4] in {text for _, text in SHOWN}]
        assert [(r[0], r[4]) for r in shown] == SHOWN  # in the order written, stderr as ERROR
        assert all(r[2:4] == ["master-replica-0", ""] for r in shown)
        assert [r[1] for r in shown] == [t.strftime("%Y-%m-%d %H:%M:%S +0000") for t in times]

    run(go())
