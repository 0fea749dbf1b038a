"""The notebook widgets end to end in JupyterLab 4: a real ``jupyter lab`` (the platform's server
extension on the local job backend), a real ipykernel, Debian's Chromium.

In one notebook whose cells use the public API (``from server_ext import client, widgets``):

1. the submit form (``widgets.submit()``): fill its fields in the DOM, click Submit; the example
   trainer's job (shipped with ``--package-path``) goes RUNNING → SUCCEEDED in the job detail
   below the form, with its log lines and "log complete";
2. a second, slow job through the same form, cancelled with the detail's Cancel button and its
   inline confirmation: CANCELLED; the jobs table (``widgets.jobs()``) shows both jobs' states;
3. a 3-trial sweep (``client.submit`` of an AI Platform hyperparameter config) shown with
   ``widgets.sweep(...)`` by a cell that then keeps the kernel busy (so the view's ``ready`` is
   not read until the cell ends): still, once the sweep has SUCCEEDED, its objective plot has
   exactly one point per finished trial (the SVG hooks of ``server_ext/widgets/protocol.md``),
   and one metric curve per trial; after the cell ends, a click on a point opens that trial's log.

Offline: every request the browser makes is recorded, and the test fails if any went anywhere
but the server on 127.0.0.1 (no CDN: the widgets' JavaScript is in the wheel). Screenshots of each
step go to ``artifacts/screenshots/widgets-lab-*.png``.

Why a plain ``jupyter lab`` and not the demo hub: the kernel reaches its server the same way in
both (the server's URL and token inherited from the server's environment, `server_ext.client.
environment`: the hub gives ``JUPYTERHUB_SERVICE_URL`` + ``JUPYTERHUB_API_TOKEN``, this server
``MLPLATFORM_SERVER_URL`` + ``MLPLATFORM_SERVER_TOKEN``), and the server, REST API, kernel and
widgets under test are the same processes and code; the hub adds login and spawn (covered by
``test_demo_login.py``), a proxy hop and a minute of runtime on a small machine, nothing the
widgets depend on.
"""

from __future__ import annotations

import json

import pytest

from tests.harness.lab import NotebookServer
from tests.harness.notebook_ui import (code_notebook, console_errors, copy_trainer, fits, non_loopback_requests,
                                       open_notebook, run_cell, running, serving, shot, states_of,
                                       wait_cell)

pytestmark = pytest.mark.browser

SWEEP = """\
trainingInput:
  args: ["--epochs=3", "--sleep=0"]
  hyperparameters:
    goal: MINIMIZE
    hyperparameterMetricTag: rmse
    maxTrials: 3
    maxParallelTrials: 1
    algorithm: RANDOM_SEARCH
    params:
    - parameterName: learning_rate
      type: DOUBLE
      minValue: 0.01
      maxValue: 0.3
      scaleType: UNIT_LOG_SCALE
"""

CELLS = [
    "from server_ext import client, widgets\nform = widgets.submit()\nform",
    "widgets.jobs()",
    "sweep = client.submit('sweep.yaml', job_id='sweep_1', module_name='trainer.task',\n"
    "                      package_path='trainer/trainer')\n"
    "display(widgets.sweep(sweep.id))\n"
    "import os, time\n"
    "while not os.path.exists('release'):  # the kernel stays busy: it reads no widget message meanwhile\n"
    "    time.sleep(0.2)",
]


@pytest.fixture
def lab(tmp_path, request):
    server = NotebookServer(tmp_path / "lab", app="lab")
    server.root.mkdir(parents=True)
    copy_trainer(server.root)
    (server.root / "sweep.yaml").write_text(SWEEP)
    (server.root / "widgets.ipynb").write_text(json.dumps(code_notebook(CELLS)))
    with serving(server.start(), request):
        yield server


def fill_form(form, job_id: str, args: str) -> None:
    form.locator(".mlp-field-job_id input").fill(job_id)
    form.locator(".mlp-field-module input").fill("trainer.task")
    form.locator(".mlp-field-package_path input").fill("trainer/trainer")
    form.locator(".mlp-field-args input").fill(args)
    form.locator("button.mlp-submit").click()


def test_submit_watch_cancel_and_sweep_in_jupyterlab(lab, browser_page):
    page = browser_page
    outside = non_loopback_requests(page.context)
    errors = console_errors(page)
    open_notebook(page, lab.page_url("widgets.ipynb"))

    # 1. the form: the example job, RUNNING → SUCCEEDED with its log
    run_cell(page, 0)
    form = page.locator(".mlp-submit-form")
    form.wait_for(timeout=60_000)
    shot(page, form, "widgets-lab-1-form")
    fill_form(form, "train_1", "--epochs=8 --sleep=0.5")
    detail = form.locator('.mlp-submit-result .mlp-job-detail[data-job-id="train_1"]')
    detail.wait_for(timeout=120_000)
    detail.locator('.mlp-timeline-entry[data-state="RUNNING"]').wait_for(timeout=120_000)
    shot(page, detail, "widgets-lab-2-job-running")
    detail.locator(".mlp-header .mlp-state-SUCCEEDED").wait_for(timeout=120_000)
    detail.locator(".mlp-log-end").filter(has_text="SUCCEEDED").wait_for(timeout=60_000)
    timeline = states_of(detail.locator(".mlp-timeline-entry"))
    assert timeline[-2:] == ["RUNNING", "SUCCEEDED"], timeline
    lines = detail.locator(".mlp-log-line").all_inner_texts()
    assert any(line.startswith("epoch 8/8 ") for line in lines), lines
    assert any(line.startswith("done: rmse=") for line in lines), lines
    assert "train_1" in form.locator(".mlp-form-message").inner_text()
    assert fits(detail)
    shot(page, detail, "widgets-lab-3-job-succeeded")

    # 2. a slow job, cancelled from its detail with confirmation
    fill_form(form, "slow_1", "--epochs=1000 --sleep=1")
    detail = form.locator('.mlp-submit-result .mlp-job-detail[data-job-id="slow_1"]')
    detail.locator(".mlp-header .mlp-state-RUNNING").wait_for(timeout=120_000)
    detail.locator(".mlp-log-line").first.wait_for(timeout=60_000)
    detail.locator("button.mlp-cancel").click()
    box = detail.locator(".mlp-cancel-box")
    box.wait_for(state="visible")
    assert "slow_1" in box.locator(".mlp-cancel-message").inner_text()
    shot(page, box, "widgets-lab-4-cancel-confirmation")
    box.locator("button.mlp-cancel-confirm").click()
    detail.locator('.mlp-cancel-result[data-ok="true"]').wait_for()
    detail.locator(".mlp-header .mlp-state-CANCELLED").wait_for(timeout=60_000)
    assert detail.locator("button.mlp-cancel").is_disabled()

    run_cell(page, 1)
    jobs_cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
    table = jobs_cell.locator(".mlp-jobs")
    table.locator('tr.mlp-row[data-job-id="slow_1"][data-state="CANCELLED"]').wait_for(timeout=60_000)
    table.locator('tr.mlp-row[data-job-id="train_1"][data-state="SUCCEEDED"]').click()
    opened = jobs_cell.locator('.mlp-job-detail[data-job-id="train_1"]')  # a row click opens its detail below
    opened.locator(".mlp-log-end").filter(has_text="SUCCEEDED").wait_for(timeout=60_000)
    assert any(line.startswith("done: rmse=") for line in opened.locator(".mlp-log-line").all_inner_texts())
    assert fits(opened)
    shot(page, table, "widgets-lab-5-cancelled-and-table")

    # 3. a sweep: one plot point per finished trial, shown by a cell that keeps the kernel busy
    run_cell(page, 2, wait=False)
    sweep = page.locator('.mlp-sweep[data-job-id="sweep_1"]')
    sweep.locator(".mlp-header .mlp-state-SUCCEEDED").wait_for(timeout=240_000)
    points = sweep.locator("svg.mlp-objective-plot circle.mlp-trial-point")
    finished = sweep.locator('table.mlp-trials tr.mlp-trial[data-state="SUCCEEDED"]')
    page.wait_for_function(  # the trials and the plot are drawn from the same message
        """(root) => root.querySelectorAll('table.mlp-trials tr.mlp-trial[data-state="SUCCEEDED"]').length === 3""",
        arg=sweep.element_handle(), timeout=60_000)
    point_ids = sorted(points.evaluate_all("(ps) => ps.map((p) => p.dataset.trialId)"))
    trial_ids = sorted(finished.evaluate_all("(rs) => rs.map((r) => r.dataset.trialId)"))
    assert point_ids == trial_ids == ["1", "2", "3"]
    assert sweep.locator("svg.mlp-objective-plot circle.mlp-trial-point.mlp-best").count() == 1
    assert sweep.locator("svg.mlp-curves-plot path.mlp-trial-curve").count() == 3

    assert running(page, 2)  # all of the above was drawn while the kernel was busy
    shot(page, sweep.locator("svg.mlp-objective-plot"), "widgets-lab-6-sweep")
    (lab.root / "release").touch()
    wait_cell(page, 2)

    sweep.locator('circle.mlp-trial-point[data-trial-id="2"]').click()  # opens trial 2's log below
    trial = page.locator(".jp-Notebook .jp-Cell").nth(2).locator('.mlp-job-detail[data-job-id="sweep_1"]')
    trial.locator(".mlp-log-end").filter(has_text="SUCCEEDED").wait_for(timeout=60_000)
    assert trial.locator("select.mlp-task").input_value() == "trial-2"
    assert any(line.startswith("epoch 3/3 ") for line in trial.locator(".mlp-log-line").all_inner_texts())
    assert fits(trial)
    shot(page, trial, "widgets-lab-7-trial-log")

    print("console errors:", errors)
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert [e for e in errors if "mlp" in e.lower() or "widget" in e.lower()] == [], errors
