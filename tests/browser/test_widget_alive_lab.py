"""The views' liveness in a real JupyterLab (`tests.harness.lab`, the platform's extension on the
local job backend), a real ipykernel and Debian's Chromium: a jobs table shown by a cell that
has ended keeps updating while its page is visible, long after the kernel's quiet delay (the
view's ``alive`` messages reach the kernel through JupyterLab's widget manager), stops updating
once the page is hidden (the kernel has gone quiet: a job submitted meanwhile does not appear),
and shows that job within seconds of the page being shown again.

The kernel's quiet delay is shortened to 15 s (``liveness.QUIET_AFTER_S``; 30 s by default;
the views say ``alive`` every 10 s). Headless Chromium never hides a page, so hiding is emulated
where the module reads it: ``document.visibilityState`` and a ``visibilitychange`` event."""

from __future__ import annotations

import time

import pytest

from tests.conftest import ROOT
from tests.harness.notebook_ui import open_notebook, run_cell, widgets_server

pytestmark = pytest.mark.browser

QUIET_S = 15
TRAINER = ROOT / "examples" / "trainer" / "trainer"
CELLS = [
    "from server_ext import widgets\n"
    "from server_ext.widgets import liveness\n"
    f"liveness.QUIET_AFTER_S = {QUIET_S}\n"
    "widgets.jobs()",
]

VISIBILITY = """(state) => {
  Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
  Object.defineProperty(document, "hidden", { configurable: true, get: () => state === "hidden" });
  document.dispatchEvent(new Event("visibilitychange"));
}"""


@pytest.fixture
def lab(tmp_path, request):
    with widgets_server(tmp_path / "lab", request, "lab", CELLS, "") as server:
        yield server


def submit(lab, job_id: str) -> None:
    body = {"jobId": job_id, "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task",
                                               "packageUris": [TRAINER.as_uri()], "args": ["--epochs=1", "--sleep=0"]}}
    r = lab.api("POST", f"ml/v1/projects/{lab.project}/jobs", json=body)
    assert r.status_code == 200, r.text


def test_a_visible_view_keeps_its_widget_awake_and_a_hidden_one_lets_it_go_quiet(lab, browser_page):
    page = browser_page
    open_notebook(page, lab.page_url("widgets.ipynb"))
    run_cell(page, 0)
    table = page.locator(".mlp-jobs").first
    table.wait_for()
    row = lambda job_id: table.locator(f'tr.mlp-row[data-job-id="{job_id}"]')  # noqa: E731

    # visible: well past the quiet delay, the table still follows the project
    time.sleep(QUIET_S + 10)
    submit(lab, "while_visible")
    row("while_visible").wait_for(timeout=10_000)

    # hidden: no more alive; once the kernel has gone quiet, a new job does not show up
    page.evaluate(VISIBILITY, "hidden")
    time.sleep(QUIET_S + 12)  # the last alive may have come just before
    submit(lab, "while_hidden")
    time.sleep(6)  # three polls' worth
    assert row("while_hidden").count() == 0, "the kernel kept polling and sending while no view was visible"

    # shown again: the view says so at once, the kernel polls and sends the new row
    shown = time.monotonic()
    page.evaluate(VISIBILITY, "visible")
    row("while_hidden").wait_for(timeout=8_000)
    assert time.monotonic() - shown < 8
