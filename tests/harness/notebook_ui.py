"""Driving notebooks in Chromium for the widget tests: a notebook file of code cells, opening it in
JupyterLab or Notebook 7 once its kernel is idle, running one cell, and the offline check.

Guarantees:

- `non_loopback_requests(context)` is a list that collects, from that moment on, the URL of every
  request (Playwright's context ``request`` event: pages, their frames and workers) and every
  WebSocket of the browser context's pages that goes to a host other than ``127.0.0.1``/
  ``localhost`` (``data:``, ``blob:`` and ``about:`` URLs are not network requests); the test
  asserts it is empty.
- `serving(server, request)` stops the server at the end of the test and asserts nothing it
  started survived, or, if the test failed, prints the tail of its log and kills what is left.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import time
from urllib.parse import unquote, urlsplit

from tests.cluster.kubelet_identity import chown_tree
from tests.harness.browser import PROJECT_ROOT, screenshot
from tests.harness.fixtures import _failed

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
KERNEL_TIMEOUT_MS = 120_000


def code_notebook(cells: list[str]) -> dict:
    """An nbformat 4 notebook of these code cells, on the ``python3`` kernel."""
    return {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"cell{i}", "metadata": {}, "outputs": [],
                   "source": source.splitlines(keepends=True)} for i, source in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }


def copy_trainer(root) -> None:
    """The example trainer project (``examples/trainer``) as ``<root>/trainer``: its package is
    ``trainer/trainer`` (a ``--package-path`` inside the server's root)."""
    shutil.copytree(PROJECT_ROOT / "examples" / "trainer", root / "trainer",
                    ignore=shutil.ignore_patterns("__pycache__", "dist", "build", "*.egg-info"))
    owner = pathlib.Path(root).stat()
    if owner.st_uid != os.getuid():  # the server's own user's, as a copy it made itself would be
        chown_tree(root / "trainer", owner.st_uid, owner.st_gid)


def open_submit_form(page, tree_url: str):
    """The file browser at `tree_url` (the example trainer's package), "Submit as training job" from
    task.py's context menu; the form once the server's choices (accelerators) have come."""
    page.goto(tree_url)
    item = page.locator('.jp-DirListing-item[title*="task.py"], .jp-DirListing-item:has-text("task.py")').first
    item.wait_for(timeout=120_000)
    item.click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Submit as training job").click()
    form = page.locator(".mlp-submit-form")
    form.wait_for()
    form.locator(".mlp-field-accelerator option").first.wait_for(state="attached")
    return form


def console_errors(page) -> list[str]:
    """The page's console errors and uncaught exceptions, collected from now on."""
    found: list[str] = []
    page.on("console", lambda m: found.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: found.append(f"uncaught: {e}"))
    return found


def shot(page, locator, name: str) -> None:
    """A screenshot (`tests.harness.browser.screenshot`) with `locator` scrolled into view."""
    locator.scroll_into_view_if_needed()
    screenshot(page, name)


def non_loopback_requests(context) -> list[str]:
    found: list[str] = []

    def seen(url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss", "ftp") and (parts.hostname or "") not in LOOPBACK:
            found.append(url)

    def watch(page) -> None:
        page.on("websocket", lambda ws: seen(ws.url))

    context.on("request", lambda request: seen(request.url))
    for page in context.pages:
        watch(page)
    context.on("page", watch)
    return found


# The page's own sessions as its server lists them: JupyterLab's page config names the base URL
# (a hub's single-user servers live under /user/<name>/), and the page's cookie authenticates.
_SESSIONS_JS = """async () => {
    const config = JSON.parse(document.getElementById('jupyter-config-data').textContent);
    const response = await fetch(config.baseUrl + 'api/sessions', {credentials: 'same-origin'});
    return response.ok ? await response.json() : [];
}"""


def kernel_ready(page, notebook: str) -> bool:
    """Whether the server has a kernel for the notebook named `notebook` (a file name), idle, with
    the page's websocket on it, and the page's execution indicator says idle. The indicator alone
    is not enough: JupyterLab 4 and Notebook 7 draw it as idle before any kernel exists (its
    initial state), and a cell run then opens a "Select Kernel" dialog (seen in CI under load)."""
    sessions = page.evaluate(_SESSIONS_JS)
    kernels = [s["kernel"] for s in sessions if s.get("path", "").split("/")[-1] == notebook and s.get("kernel")]
    return len(kernels) == 1 and kernels[0].get("execution_state") == "idle" \
        and kernels[0].get("connections", 0) >= 1 \
        and page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]').count() > 0


def wait_kernel_idle(page, notebook: str) -> None:
    """Until `kernel_ready` (the notebook's one kernel is up, idle and attached to the page)."""
    if not _poll(lambda: kernel_ready(page, notebook), KERNEL_TIMEOUT_MS / 1000):
        raise TimeoutError(f"the kernel of {notebook} did not come up: sessions {page.evaluate(_SESSIONS_JS)}")


def open_notebook(page, url: str) -> None:
    """Open a notebook (JupyterLab or Notebook 7) and wait for its cells and its idle kernel."""
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=KERNEL_TIMEOUT_MS)
    wait_kernel_idle(page, _notebook_name(url))


def _notebook_name(url: str) -> str:
    """The notebook's file name in its page's URL (JupyterLab ``…/lab/tree/a.ipynb``, Notebook 7
    ``…/notebooks/a.ipynb``)."""
    return unquote(urlsplit(url).path.rstrip("/").split("/")[-1])


def run_cell(page, index: int, timeout_ms: int = KERNEL_TIMEOUT_MS, wait: bool = True) -> None:
    """Run the `index`-th cell (click into it, Shift+Enter) and wait until it has run (its prompt
    shows an execution count; with ``wait=False`` only until it has started). A run that has not
    started (``[*]``) after a few seconds is asked again. A "Select Kernel" dialog (the run came
    before the front end attached its kernel) is dismissed, not answered: answering starts another
    kernel, and the kernel change ends a run already sent to the first (in CI: a job submitted
    twice and the cell's prompt left blank); the run is asked again once the page's kernel is
    ready (`kernel_ready`). The wait
    before asking again is long (15 s): on a loaded machine the prompt can take seconds to show a
    run that did start, and asking again runs the cell twice (a job submitted twice: 409)."""
    prompt = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-prompt")
    started = re.compile(r"\[(\d+|\*)\]")
    select_kernel = page.locator(".jp-Dialog").filter(has_text="Select Kernel")
    for _ in range(5):
        page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        if _poll(lambda: started.search(prompt.inner_text()) or select_kernel.count(), 15.0) \
                and not select_kernel.count():
            break
        if select_kernel.count():
            select_kernel.locator("button.jp-mod-reject").click()
            select_kernel.wait_for(state="detached")
            wait_kernel_idle(page, _notebook_name(page.url))
    if wait:
        wait_cell(page, index, timeout_ms)


def running(page, index: int) -> bool:
    """Whether the `index`-th cell is running now (its prompt is ``[*]``)."""
    return "[*]" in page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-prompt").inner_text()


def wait_cell(page, index: int, timeout_ms: int = KERNEL_TIMEOUT_MS) -> None:
    """Until the `index`-th cell has run (its prompt shows an execution count)."""
    prompt = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-prompt")
    done = re.compile(r"\[\d+\]")
    if not _poll(lambda: done.search(prompt.inner_text()), timeout_ms / 1000):
        raise TimeoutError(f"cell {index} did not run: its prompt is {prompt.inner_text()!r}")


def _poll(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)



def fits(locator) -> bool:
    """Whether the element is no wider than the output area it is shown in (long log lines scroll
    inside the log, they do not widen the widget past the notebook)."""
    return locator.evaluate(
        "(e) => e.getBoundingClientRect().width <= e.closest('.jp-OutputArea-output').clientWidth + 1")


def states_of(entries) -> list[str]:
    """The ``data-state`` of each element of a locator, in document order."""
    return entries.evaluate_all("(es) => es.map((e) => e.dataset.state)")


@contextlib.contextmanager
def serving(server, request):
    try:
        yield server
    finally:
        failed = _failed(request)
        if failed:
            print(f"--- {server.log_path} (tail) ---\n{server.log_tail(200)}")
        server.stop(check=not failed)


@contextlib.contextmanager
def widgets_server(root, request, app: str, cells: list[str], sweep: str):
    """A started `NotebookServer` (`app` "lab" or "notebook") at `root` holding the example trainer,
    ``sweep.yaml`` and ``widgets.ipynb`` of `cells`; stopped (its log shown on failure) after."""
    import json

    from tests.harness.lab import NotebookServer

    server = NotebookServer(root, app=app)
    server.root.mkdir(parents=True)
    copy_trainer(server.root)
    (server.root / "sweep.yaml").write_text(sweep)
    (server.root / "widgets.ipynb").write_text(json.dumps(code_notebook(cells)))
    with serving(server.start(), request):
        yield server
