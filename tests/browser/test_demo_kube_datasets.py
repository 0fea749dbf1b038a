"""The seed platform's dataset story in `make demo-kube` (issue 39.8), in Chromium as a newcomer
follows it: the spawn form says where credentials and datasets come from while there are none;
alice adds the S3 emulator's sample key pair on the Credentials page and the sample bucket as a
dataset on the Datasets page; the real operator's loader (a Job of the process-mode kubelet) copies
it into the dataset's volume; the spawn form offers it; her server starts with it mounted at
``/datasets/sample``, where the emulator's objects are, byte for byte.

The demo is `python -m tests.harness.demo_kube` started as `make demo-kube` starts it (the same
launcher as `test_demo_kube_sweep`); the key pair is read from its banner, as a user reads it.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from tests.browser.test_demo_kube_sweep import demo, log_in, server_pod, start_in_lab  # noqa: F401  (`demo`: a fixture)
from tests.harness.browser import screenshot
from tests.harness.demo_kube import SAMPLE

pytestmark = pytest.mark.browser

USER, PROJECT = "alice", "user-alice"


def banner_store(output: str) -> tuple[str, str, str]:
    """(access key, secret, bucket) as the banner shows them."""
    keys = re.search(r"access key (\S+)\s+secret (\S+)", output)
    bucket = re.search(r"the dataset s3://([^/\s]+)/sample/", output)
    assert keys and bucket, output
    return keys.group(1), keys.group(2), bucket.group(1)


def test_demo_kube_a_dataset_from_s3_mounted_in_a_server(demo, browser_page):  # noqa: F811
    url, password = demo.login()
    key_id, secret, bucket = banner_store(demo.output())
    page = browser_page
    log_in(page, url, password)
    hint = page.locator(".mlplatform-no-mounts")
    assert "Nothing to mount from" in hint.inner_text()
    screenshot(page, "demo-kube-spawn-form-no-mounts")

    hint.get_by_role("link", name="Credentials").click()
    page.wait_for_url(re.compile(r"/hub/mlplatform/credentials"))
    page.select_option("#credential-project", PROJECT)
    page.fill("#credential-name", "demo-s3")
    page.select_option("#credential-type", "aws-credential")
    page.fill("#credential-aws-key-id", key_id)
    page.fill("#credential-aws-secret", secret)
    page.click("#add-credential button[type=submit]")
    page.locator('tr[data-credential="demo-s3"]').wait_for(timeout=30_000)
    assert secret not in page.content()  # shown once in the terminal, never by the hub

    page.goto(f"{url}/hub/mlplatform/datasets")
    page.select_option("#dataset-project", PROJECT)
    page.fill("#dataset-name", "sample")
    page.fill("#dataset-source", f"s3://{bucket}/sample/")
    page.select_option("#dataset-credential", "demo-s3")
    page.fill("#dataset-size", "1Gi")
    page.click("#add-dataset button[type=submit]")
    row = page.locator('tr[data-dataset="sample"]')
    row.wait_for(timeout=30_000)
    for _ in range(120):  # the operator's loader copies it; the page shows the state
        state = row.get_attribute("data-state")
        if state in ("ready", "failed"):
            break
        page.wait_for_timeout(1000)
        page.reload()
        row = page.locator('tr[data-dataset="sample"]')
        row.wait_for(timeout=30_000)
    screenshot(page, "demo-kube-datasets-page")
    assert state == "ready", row.inner_text()

    page.goto(f"{url}/hub/spawn")
    page.get_by_label("CPU only").check()
    page.check(f"#project-{PROJECT}")
    page.check(f"#credential--{PROJECT}--demo-s3")
    page.check(f"#dataset--{PROJECT}--sample")
    screenshot(page, "demo-kube-spawn-form-mounts")
    start_in_lab(page)

    core, pod = server_pod(demo.workdir, PROJECT)
    mounts = {m.mount_path: m.name for c in pod.spec.containers for m in c.volume_mounts or []}
    assert "/datasets/sample" in mounts, mounts
    claim = next(v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.name == mounts["/datasets/sample"])
    volume = core.read_namespaced_persistent_volume_claim(claim, PROJECT).spec.volume_name
    where = pathlib.Path(core.read_persistent_volume(volume).spec.host_path.path)  # the provisioner's volume
    for key, body in SAMPLE.items():
        assert (where / key.removeprefix("sample/")).read_bytes() == body, key
    assert demo.stop() == 0, demo.output()
