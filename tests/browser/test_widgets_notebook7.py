"""Smoke test: the notebook widgets render in Notebook 7 (``jupyter notebook``, the ``notebook>=7``
package), offline. A real Notebook 7 server (the platform's server extension on the local job
backend, `tests.harness.lab`), a real ipykernel, Debian's Chromium.

One notebook: a cell submits the example trainer's job and a 1-trial sweep with ``client.submit``
and shows ``widgets.jobs()``; the next cells show the job's ``JobDetail`` (``widgets.job(id)``),
the sweep's monitor (``sweep.widget()``: a sweep handle's widget is its ``SweepMonitor``) and the
submit form (``widgets.submit()``). The jobs table must render both rows and see them reach
SUCCEEDED, the detail its state, timeline, log lines and the trainer's last progress report (100%, with its metrics), the monitor its trial's plot point, and
the form its fields, through the DOM hooks of ``server_ext/widgets/protocol.md``. Every request the browser makes must
stay on 127.0.0.1 (the widgets' JavaScript is vendored in the wheel: no CDN). Screenshot:
``artifacts/screenshots/widgets-notebook7.png``.
"""

from __future__ import annotations

import pytest

from tests.harness.notebook_ui import (console_errors, non_loopback_requests, open_notebook, run_cell, shot, states_of,
                                       widgets_server)

pytestmark = pytest.mark.browser

SWEEP = """\
trainingInput:
  hyperparameters:
    goal: MINIMIZE
    hyperparameterMetricTag: rmse
    params:
    - {parameterName: learning_rate, type: DOUBLE, minValue: 0.01, maxValue: 0.3}
"""

CELLS = [
    "from server_ext import client, widgets\n"
    "job = client.submit(job_id='nb7_1', module_name='trainer.task', package_path='trainer/trainer',\n"
    "                    args=['--epochs=3', '--sleep=0'])\n"
    "sweep = client.submit('sweep.yaml', job_id='nb7_sweep', module_name='trainer.task',\n"
    "                      package_path='trainer/trainer', args=['--epochs=1', '--sleep=0'])\n"
    "widgets.jobs()",
    "widgets.job('nb7_1')",
    "sweep.widget()",
    "widgets.submit()",
]


@pytest.fixture
def notebook7(tmp_path, request):
    with widgets_server(tmp_path / "nb7", request, "notebook", CELLS, SWEEP) as server:
        yield server


def test_widgets_render_in_notebook7(notebook7, browser_page):
    page = browser_page
    outside = non_loopback_requests(page.context)
    errors = console_errors(page)
    open_notebook(page, notebook7.page_url("widgets.ipynb"))
    assert page.locator("#jp-NotebookPanel, .jp-NotebookPanel").first.is_visible()
    assert "/lab" not in page.url  # Notebook 7's own page, not JupyterLab

    run_cell(page, 0)
    table = page.locator(".mlp-jobs")
    table.locator('tr.mlp-row[data-job-id="nb7_1"]').wait_for(timeout=60_000)
    run_cell(page, 1)
    run_cell(page, 2)
    run_cell(page, 3)
    form = page.locator(".mlp-submit-form")
    form.locator(".mlp-field-module input").wait_for(timeout=60_000)
    form.locator("button.mlp-submit").wait_for()
    detail = page.locator('.mlp-job-detail[data-job-id="nb7_1"]')
    detail.locator(".mlp-header .mlp-state-SUCCEEDED").wait_for(timeout=120_000)
    detail.locator(".mlp-log-end").filter(has_text="SUCCEEDED").wait_for(timeout=60_000)
    # the trainer's progress reports (issue 31.4): the last, 3 of 3 epochs, with its metrics
    detail.locator('.mlp-train-progress[data-percent="100"]').wait_for(timeout=60_000)
    assert detail.locator(".mlp-progress-bar").get_attribute("value") == "100"
    assert detail.locator('.mlp-progress-metric[data-name="rmse"]').text_content().startswith("rmse ")
    monitor = page.locator('.mlp-sweep[data-job-id="nb7_sweep"]')
    monitor.locator(".mlp-header .mlp-state-SUCCEEDED").wait_for(timeout=120_000)
    monitor.locator('svg.mlp-objective-plot circle.mlp-trial-point[data-trial-id="1"]').wait_for(timeout=60_000)
    for job_id in ("nb7_1", "nb7_sweep"):
        table.locator(f'tr.mlp-row[data-job-id="{job_id}"][data-state="SUCCEEDED"]').wait_for(timeout=60_000)

    # Notebook 7 (its windowed notebook) may skip rendering an output, whose innerText is then empty
    # while it holds its text: read the text the widget wrote
    assert table.locator(".mlp-count").text_content() == "2 of 2 jobs"
    assert states_of(detail.locator(".mlp-timeline-entry"))[-2:] == ["RUNNING", "SUCCEEDED"]
    lines = detail.locator(".mlp-log-line").all_inner_texts()
    assert any(line.startswith("epoch 3/3 ") for line in lines), lines
    shot(page, table, "widgets-notebook7")
    shot(page, monitor, "widgets-notebook7-sweep-and-form")

    print("console errors:", errors)
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert [e for e in errors if "mlp" in e.lower() or "widget" in e.lower()] == [], errors
