"""A gcloud submit script's command line in a notebook terminal: ``kubectl ai-platform`` as a
subprocess beside a real notebook server (the local runtime; no region table, so the platform is
one cluster). ``--region`` keeps the command on the server's jobs, with one note on stderr per
command, and the job records the region; ``describe``/``list`` with ``--region`` (as scripts
follow a submit) find the job; an unknown flag is answered with the command's closest flag."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys

import pytest

from server_ext.client import ServerJobs
from tests.conftest import ROOT
from tests.local.rest.conftest import PROJECT, TRAINER
from tests.local.rest.test_client import server, wait_state  # noqa: F401  (the fixture)

pytestmark = pytest.mark.local

SCRIPT = os.path.join(os.path.dirname(sys.executable), "kubectl-ai_platform")
NOTE = ("note: --region us-central1 is accepted: no region table is configured, so this platform's one cluster "
        "serves every region\n")


def test_a_gcloud_script_line_with_region_runs_on_the_notebook_servers_jobs(server, jp_root_dir, run,  # noqa: F811
                                                                           tmp_path):
    shutil.copytree(TRAINER, jp_root_dir / "trainer")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLPLATFORM_", "JUPYTERHUB_", "JUPYTER_"))}
    env.update(JUPYTERHUB_SERVICE_URL=server[0], JUPYTERHUB_API_TOKEN=server[1], JUPYTERHUB_USER="alice",
               MLPLATFORM_PROJECT=PROJECT, MLPLATFORM_CONFIG=str(tmp_path / "no-settings.yaml"),
               KUBECONFIG=str(tmp_path / "no-kubeconfig"), PYTHONPATH=str(ROOT))
    command = [SCRIPT] if os.path.exists(SCRIPT) else [sys.executable, "-m", "server_ext.cli.main"]

    async def cli(*argv: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(*command, *argv, cwd=jp_root_dir, env=env,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        return proc.returncode, out.decode(), err.decode()

    async def go():
        # as a quickstart script writes it: JOB_NAME with a date, --region, --package-path, --stream-logs
        code, out, err = await cli("jobs", "submit", "training", "census_20261204_031500", "--package-path=trainer",
                                   "--module-name", "trainer.task", "--region", "us-central1",
                                   "--scale-tier", "BASIC", "--stream-logs", "--", "--epochs=1", "--sleep=0")
        assert code == 0, err
        assert err.startswith(NOTE + "Job [census_20261204_031500] submitted successfully.\n") and err.count(NOTE) == 1
        assert out.endswith("state: SUCCEEDED\n")
        async with ServerJobs(*server) as jobs:  # the server's job, not a cluster's
            job = await jobs.get(PROJECT, "census_20261204_031500")
            assert job["state"] == "SUCCEEDED" and job["trainingInput"]["region"] == "us-central1"

        code, out, err = await cli("jobs", "submit", "training", "census_async", "--module-name", "trainer.task",
                                   "--packages", TRAINER.as_uri(), "--region", "us-central1")
        assert code == 0, err
        assert "  $ kubectl ai-platform jobs describe census_async\n" in err  # the server's job: no flag needed
        async with ServerJobs(*server) as jobs:
            await wait_state(jobs, "census_async", ("SUCCEEDED", "FAILED"))
        code, out, err = await cli("jobs", "describe", "census_async", "--region", "us-central1")  # as a script does
        assert code == 0 and "jobId: census_async\n" in out and err == NOTE, err
        code, out, err = await cli("jobs", "list", "--region", "us-central1", "--format", "value(jobId)")
        assert (code, sorted(out.split()), err) == (0, ["census_20261204_031500", "census_async"], NOTE)

        code, out, err = await cli("jobs", "submit", "training", "j9", "--module-nme", "trainer.task",
                                   "--region", "us-central1")
        assert (code, out) == (2, "")
        assert err == ("ERROR: (kubectl ai-platform.jobs.submit.training) unrecognized arguments: --module-nme "
                       "(did you mean '--module-name'?) trainer.task\n")
    run(go())
