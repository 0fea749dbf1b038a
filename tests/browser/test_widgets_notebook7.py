"""Smoke test: the notebook widgets render in Notebook 7 (``jupyter notebook``, the ``notebook>=7``
package), offline. A real Notebook 7 server (the platform's server extension on the local job
backend, `tests.harness.lab`), a real ipykernel, Debian's Chromium.

One notebook: a cell submits the example trainer's job with ``client.submit`` and shows
``widgets.jobs()``; the next shows the job's ``JobDetail`` (``job.widget()``). The jobs table must
render the job's row and see it reach SUCCEEDED, and the detail its state, timeline and log lines,
through the DOM hooks of ``server_ext/widgets/protocol.md``. Every request the browser makes must
stay on 127.0.0.1 (the widgets' JavaScript is vendored in the wheel: no CDN). Screenshot:
``artifacts/screenshots/widgets-notebook7.png``.
"""

from __future__ import annotations

import json

import pytest

from tests.harness.lab import NotebookServer
from tests.harness.notebook_ui import (code_notebook, console_errors, copy_trainer, non_loopback_requests,
                                       open_notebook, run_cell, serving, shot, states_of)

pytestmark = pytest.mark.browser

CELLS = [
    "from server_ext import client, widgets\n"
    "job = client.submit(job_id='nb7_1', module_name='trainer.task', package_path='trainer/trainer',\n"
    "                    args=['--epochs=3', '--sleep=0'])\n"
    "widgets.jobs()",
    "job.widget()",
]


@pytest.fixture
def notebook7(tmp_path, request):
    server = NotebookServer(tmp_path / "nb7", app="notebook")
    server.root.mkdir(parents=True)
    copy_trainer(server.root)
    (server.root / "widgets.ipynb").write_text(json.dumps(code_notebook(CELLS)))
    with serving(server.start(), request):
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
    detail = page.locator('.mlp-job-detail[data-job-id="nb7_1"]')
    detail.locator(".mlp-header .mlp-state-SUCCEEDED").wait_for(timeout=120_000)
    detail.locator(".mlp-log-end").filter(has_text="SUCCEEDED").wait_for(timeout=60_000)
    table.locator('tr.mlp-row[data-job-id="nb7_1"][data-state="SUCCEEDED"]').wait_for(timeout=60_000)

    assert table.locator(".mlp-count").inner_text() == "1 of 1 job"
    assert states_of(detail.locator(".mlp-timeline-entry"))[-2:] == ["RUNNING", "SUCCEEDED"]
    lines = detail.locator(".mlp-log-line").all_inner_texts()
    assert any(line.startswith("epoch 3/3 ") for line in lines), lines
    shot(page, table, "widgets-notebook7")

    print("console errors:", errors)
    assert outside == [], f"requests left 127.0.0.1: {outside}"
    assert [e for e in errors if "mlp" in e.lower() or "widget" in e.lower()] == [], errors
