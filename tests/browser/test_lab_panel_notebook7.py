"""The "Training jobs" panel in Notebook 7 (``jupyter notebook``, the ``notebook>=7`` package, 7.6 here),
where it has a sidebar: Notebook 7's pages have a left side area (the file browser's ``/tree`` page and
a notebook's page both), shown when a panel in it is activated. A real Notebook 7 server (the
platform's server extension on the local job backend, `tests.harness.lab`) and Debian's Chromium.

On the ``/tree`` page the panel opens from Notebook 7's command palette (Ctrl+Shift+C) in the left
side area, lists a job submitted through the REST API, and its detail view follows the job to
SUCCEEDED with its log; on a notebook's page it opens the same way and lists the job. Notebook 7
has no status bar, so the running-jobs count is JupyterLab's only. Every request stays on this
machine. Screenshots: ``artifacts/screenshots/lab_panel-notebook7-tree.png``, ``…-notebook.png``.
"""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.harness.browser import screenshot
from tests.harness.lab import NotebookServer
from tests.harness.notebook_ui import code_notebook, console_errors, copy_trainer, non_loopback_requests, serving

pytestmark = pytest.mark.browser

PANEL = "#mlplatform-jobs"


@pytest.fixture
def notebook7(tmp_path, request):
    server = NotebookServer(tmp_path / "nb7", app="notebook")
    server.root.mkdir(parents=True)
    copy_trainer(server.root)
    (server.root / "empty.ipynb").write_text(json.dumps(code_notebook(["1 + 1"])))
    with serving(server.start(), request):
        yield server


def open_from_palette(page) -> None:
    """Open the panel from Notebook 7's command palette and wait until it shows in the left area. The
    page shows before its key bindings, the panel's command and the restored layout are in place,
    each of which can swallow a try: tried again until the panel is visible."""
    palette = page.locator(".lm-CommandPalette-input")
    item = page.locator(".lm-CommandPalette-item", has_text="Training jobs").first
    panel = page.locator(f"#jp-left-stack {PANEL}")
    for _ in range(20):
        page.keyboard.press("Control+Shift+c")
        try:
            palette.wait_for(state="visible", timeout=2000)
            palette.fill("Training jobs")
            item.wait_for(state="visible", timeout=2000)
            page.keyboard.press("Enter")
            panel.wait_for(state="visible", timeout=5000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    panel.wait_for(state="visible", timeout=5000)


def test_the_panel_works_in_notebook7s_sidebar(notebook7, browser_page, tmp_path):
    page = browser_page
    offsite = non_loopback_requests(page.context)
    errors = console_errors(page)
    body = {"jobId": "nb7_panel", "trainingInput": {
        "scaleTier": "BASIC", "pythonModule": "trainer.task",
        "packageUris": [(notebook7.root / "trainer" / "trainer").as_uri()], "args": ["--epochs=3", "--sleep=0.5"]}}
    r = notebook7.api("POST", f"ml/v1/projects/{notebook7.project}/jobs", json=body)
    assert r.status_code == 200, r.text

    # the file browser's page
    page.goto(f"{notebook7.url}tree?token={notebook7.token}")
    page.locator(".jp-DirListing").first.wait_for(timeout=120_000)
    assert "/lab" not in page.url  # Notebook 7's own page, not JupyterLab
    open_from_palette(page)
    panel = page.locator(f"#jp-left-stack {PANEL}")
    row = panel.locator('li.mlp-row[data-job-id="nb7_panel"]')
    row.wait_for(timeout=30_000)
    row.click()
    detail = panel.locator(".mlp-detail-view")
    detail.locator(".mlp-badge", has_text="SUCCEEDED").wait_for(timeout=60_000)
    detail.locator(".mlp-log-line").first.wait_for(timeout=30_000)
    page.screenshot(path=str(tmp_path / "notebook7-tree.png"))
    screenshot(page, "lab_panel-notebook7-tree")

    # a notebook's page
    page.goto(notebook7.page_url("empty.ipynb"))
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=120_000)
    open_from_palette(page)
    panel = page.locator(f"#jp-left-stack {PANEL}")
    if panel.locator(".mlp-back").is_visible():
        panel.locator(".mlp-back").click()
    panel.locator('li.mlp-row[data-job-id="nb7_panel"][data-state="SUCCEEDED"]').wait_for(timeout=30_000)
    page.screenshot(path=str(tmp_path / "notebook7-notebook.png"))
    screenshot(page, "lab_panel-notebook7-notebook")
    assert offsite == [], f"requests off this machine: {offsite}"
    assert not [e for e in errors if "mlplatform" in e.lower()], errors
    # the notebook's page started its kernel: let it come up before the server stops (one stopped
    # while it still imports held jupyter-server's shutdown until the harness killed it, 30 s later)
    deadline = time.monotonic() + 60
    while kernel_states(notebook7) - {"idle"}:
        assert time.monotonic() < deadline, notebook7.api("GET", "api/kernels").text
        time.sleep(0.2)


def kernel_states(server) -> set[str]:
    """The execution states of the server's kernels; ``{"unknown"}`` while its answer is not a list
    (in CI once an error object, under load, while the page's kernel was starting)."""
    answer = server.api("GET", "api/kernels")
    body = answer.json() if answer.ok else None
    return {k.get("execution_state") for k in body} if isinstance(body, list) else {"unknown"}
