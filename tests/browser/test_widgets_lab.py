"""The notebook widgets end to end in JupyterLab 4: a real ``jupyter lab`` (the platform's server
extension on the local job backend), a real ipykernel, Debian's Chromium.

In one notebook whose cells use the public API (``from server_ext import client, widgets``):

1. the submit form (``widgets.submit()``): every label shown whole, a note saying what a local job
   gets; submitted without a module, it shows the error inline
   next to the module field; with a package path outside the server's root, the server's refusal
   (its ``fieldViolations``) next to the package path field instead; filled in the DOM and
   submitted, the example trainer's job (shipped with ``--package-path``) goes RUNNING →
   SUCCEEDED in the job detail below the form, with its log lines and "log complete"; its Download
   button saves the full log (a real browser download), line for line the log the server's REST
   API serves;
2. a second, slow job through the same form, cancelled with the detail's Cancel button and its
   inline confirmation: CANCELLED; the jobs table (``widgets.jobs()``) shows both jobs' states;
3. a 1-trial sweep through the form's hyperparameter box: a spec with ``minValue`` above
   ``maxValue`` shows the validation error next to that box; the corrected one opens the sweep monitor (not a plain job
   detail) below the form, which sees the sweep succeed with one plot point;
4. a 3-trial sweep (``client.submit`` of an AI Platform hyperparameter config) shown with
   ``widgets.sweep(...)`` by a cell that then keeps the kernel busy (so the view's ``ready`` is
   not read until the cell ends): still, once the sweep has SUCCEEDED, its objective plot has
   exactly one point per finished trial (the SVG hooks of ``server_ext/widgets/protocol.md``),
   one metric curve per trial with a legend entry each, and a plot of the objective against the
   learning rate (log scale) with one point per trial; after the cell ends, a click on a point
   opens that trial's log.

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
from pathlib import Path

import pytest

from server_ext.client.sse import SSEParser

from tests.harness.notebook_ui import (console_errors, fits, non_loopback_requests, open_notebook, run_cell, running,
                                       shot, states_of, wait_cell, widgets_server)

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

FORM_SPEC = """\
goal: MINIMIZE
hyperparameterMetricTag: rmse
params:
- parameterName: learning_rate
  type: DOUBLE
  minValue: {low}
  maxValue: 0.3
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
    with widgets_server(tmp_path / "lab", request, "lab", CELLS, SWEEP) as server:
        yield server


def fill_form(form, job_id: str, args: str, module: str = "trainer.task", package: str = "trainer/trainer") -> None:
    form.locator(".mlp-field-job_id input").fill(job_id)
    form.locator(".mlp-field-module input").fill(module)
    form.locator(".mlp-field-package_path input").fill(package)
    form.locator(".mlp-field-args input").fill(args)
    form.locator("button.mlp-submit").click()


def served_log(lab, job_id: str, task: str = "master-replica-0") -> list[str]:
    """The job's whole log as the server's REST API serves it (Server-Sent Events, not followed)."""
    answer = lab.api("GET", f"ml/v1/projects/{lab.project}/jobs/{job_id}/logs",
                     params={"task": task, "follow": "false"}, headers={"Accept": "text/event-stream"})
    assert answer.status_code == 200, answer.text
    return [json.loads(e.data)["text"] for e in SSEParser().feed(answer.content) if e.type == "message"]


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
    cut = form.locator(".widget-label").evaluate_all(  # every label shown whole ("Package p…" was cut)
        "(ls) => ls.filter((l) => l.offsetParent && l.scrollWidth > l.clientWidth).map((l) => l.textContent)")
    assert cut == [], cut
    assert "Local runtime: a job runs as processes beside this notebook" in \
        form.locator(".mlp-accelerator-note").inner_text()
    fill_form(form, "train_1", "--epochs=8 --sleep=0.5", module="")  # no module: refused, shown inline
    form.locator(".mlp-error-module").filter(has_text="is required").wait_for(timeout=60_000)
    fill_form(form, "train_1", "--epochs=8 --sleep=0.5", package="..")  # the server's refusal
    form.locator(".mlp-error-package_path").filter(has_text="inside the notebook server's root").wait_for()
    assert form.locator(".mlp-error-module").inner_text() == ""  # the new error replaces the old
    assert form.locator(".mlp-submit-result .mlp-job-detail").count() == 0
    shot(page, form, "widgets-lab-1-form-error")
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
    assert form.locator(".mlp-error-module").inner_text() == ""  # cleared by the successful submit
    assert fits(detail)
    shot(page, detail, "widgets-lab-3-job-succeeded")
    with page.expect_download(timeout=60_000) as download:  # the full log, fetched by the browser
        detail.locator("button.mlp-download").click()
    assert download.value.suggested_filename == "train_1-master-replica-0.log"
    saved = Path(download.value.path()).read_text().splitlines()
    assert saved == served_log(lab, "train_1") and len(saved) == len(lines), (len(saved), len(lines))
    detail.locator(".mlp-download-status").filter(has_text=f"{len(saved)} lines saved").wait_for()

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

    # 3. a sweep through the form: the server's error next to the hyperparameter box, then its monitor
    form.locator(".mlp-field-hyperparameters_on input").check()
    form.locator(".mlp-field-hyperparameters textarea").fill(FORM_SPEC.format(low=0.5))  # min > max
    fill_form(form, "form_sweep", "--epochs=1 --sleep=0")
    form.locator(".mlp-error-hyperparameters").filter(has_text="params[0].").wait_for(timeout=60_000)
    form.locator(".mlp-field-hyperparameters textarea").fill(FORM_SPEC.format(low=0.01))
    form.locator("button.mlp-submit").click()
    monitor = form.locator('.mlp-submit-result .mlp-sweep[data-job-id="form_sweep"]')
    monitor.locator(".mlp-header .mlp-state-SUCCEEDED").wait_for(timeout=120_000)
    monitor.locator('svg.mlp-objective-plot circle.mlp-trial-point[data-trial-id="1"]').wait_for(timeout=60_000)
    assert form.locator(".mlp-submit-result .mlp-job-detail").count() == 0
    assert form.locator(".mlp-error-hyperparameters").inner_text() == ""
    shot(page, monitor, "widgets-lab-6-form-sweep")

    # 4. a sweep: one plot point per finished trial, shown by a cell that keeps the kernel busy
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
    assert sweep.locator(".mlp-legend .mlp-legend-item").count() == 3  # which curve is which trial
    hp = sweep.locator('svg.mlp-hp-plot[data-hp="learning_rate"]')  # the objective by hyperparameter
    assert hp.locator("circle.mlp-hp-point").count() == 3 and hp.locator("circle.mlp-best").count() == 1
    assert "learning_rate (log scale)" in hp.locator("text").all_text_contents()

    assert running(page, 2)  # all of the above was drawn while the kernel was busy
    shot(page, sweep.locator("svg.mlp-objective-plot"), "widgets-lab-7-sweep")
    shot(page, sweep.locator(".mlp-hp-plots"), "widgets-lab-7-sweep-by-hyperparameter")
    (lab.root / "release").touch()
    wait_cell(page, 2)

    sweep.locator('circle.mlp-trial-point[data-trial-id="2"]').click()  # opens trial 2's log below
    trial = page.locator(".jp-Notebook .jp-Cell").nth(2).locator('.mlp-job-detail[data-job-id="sweep_1"]')
    trial.locator(".mlp-log-end").filter(has_text="SUCCEEDED").wait_for(timeout=60_000)
    assert trial.locator("select.mlp-task").input_value() == "trial-2"
    assert any(line.startswith("epoch 3/3 ") for line in trial.locator(".mlp-log-line").all_inner_texts())
    assert fits(trial)
    shot(page, trial, "widgets-lab-8-trial-log")

    print("console errors:", errors)
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert [e for e in errors if "mlp" in e.lower() or "widget" in e.lower()] == [], errors
