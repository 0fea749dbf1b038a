"""The submit form against a real notebook server (the extension on the local backend): a job
given an accelerator is submitted as CUSTOM and the scale-tier box shows the tier the server
recorded; the form's own checks find every mistake at once and send nothing, and what only the
server can check comes back next to its field (issue 20, item 6)."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from server_ext.client.notebook import Client
from server_ext.widgets.form import SubmitForm
from tests.local.rest.conftest import PROJECT, TRAINER

pytestmark = pytest.mark.local


@pytest.fixture
def client(jp_serverapp, http_server, http_server_port, jp_base_url):
    client = Client(f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}", jp_serverapp.identity_provider.token,
                    project=PROJECT)
    yield client
    client.close()


def test_the_tier_box_shows_the_submitted_jobs_tier_and_mistakes_come_together(client, jp_root_dir, run):
    shutil.copytree(TRAINER.parent, jp_root_dir / "trainer")  # cp -r $MLPLATFORM_EXAMPLES/trainer .
    form = SubmitForm(client, info={}, env={})  # no hub: the built-in catalogue; the local runtime
    f = form.fields

    def go():
        f["job_id"].value, f["module"].value, f["args"].value = "bad-id", "trainer/task.py", "--epochs=1 'x"
        f["package_path"].value = "/elsewhere"
        first = form.submit()  # the form's own checks: three mistakes, nothing sent
        own = {name for name, label in form.errors.items() if label.value}
        assert client.jobs_list() == []  # nothing was sent
        f["job_id"].value, f["module"].value, f["args"].value = "ux_custom", "trainer.task", "--epochs=1 --sleep=0"
        second = form.submit()  # the server's: the package outside its root
        server = {name for name, label in form.errors.items() if label.value}
        f["package_path"].value = str(jp_root_dir / "trainer" / "trainer")  # the kernel runs in the root
        f["accelerator"].value = "NVIDIA_A100_1G_5GB"
        f["scale_tier"].value = "CUSTOM"
        f["scale_tier"].value = "BASIC_GPU"  # another tier: the accelerator goes
        cleared = f["accelerator"].value
        f["accelerator"].value = "NVIDIA_A100_1G_5GB"  # and back: CUSTOM again
        job = form.submit()
        assert job is not None, ({n: l.value for n, l in form.errors.items() if l.value}, form.message.value)
        job.wait(timeout=120)
        form.close()
        return first, own, second, server, cleared, job

    first, own, second, server, cleared, job = run(asyncio.to_thread(go))
    assert first is None and own == {"job_id", "module", "args"}
    assert second is None and server == {"package_path"}
    assert cleared == ""
    training = job.job["trainingInput"]
    assert training["scaleTier"] == "CUSTOM" == f["scale_tier"].value
    assert training["masterConfig"]["acceleratorConfig"] == {"type": "NVIDIA_A100_1G_5GB", "count": "1"}
    assert job.state == "SUCCEEDED"
