"""The "Training jobs" side panel (labextension/) in a real JupyterLab (`tests.harness.lab`, the
platform's server extension on the local job backend) and Debian's Chromium.

- The extension loads from where the wheel puts it (``share/jupyter/labextensions``; the venv links
  the `make` build there) with no request off this machine.
- Opened from the command palette, the panel lists a job submitted through the REST API, follows it
  to SUCCEEDED, and its detail view follows the log to the last line; the status bar counts the
  running job meanwhile.
- Cancel asks for confirmation, then the job ends CANCELLED.
- Reloading the page brings back the open panel and the selected job (layout restorer, state DB).
- axe-core (from labextension/node_modules, injected from disk) finds no serious or critical
  violation in the panel, in its list and its detail view.
Screenshots go to the test's tmp dir and to the artifacts (`tests.harness.browser.screenshot`).
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.conftest import ROOT
from tests.harness.browser import screenshot
from tests.harness.lab import NotebookServer
from tests.harness.notebook_ui import console_errors, copy_trainer, non_loopback_requests, serving

pytestmark = pytest.mark.browser

AXE = ROOT / "labextension" / "node_modules" / "axe-core" / "axe.min.js"
PANEL = "#mlplatform-jobs"


@pytest.fixture
def lab(tmp_path, request):
    server = NotebookServer(tmp_path / "lab", app="lab")
    server.root.mkdir(parents=True)
    copy_trainer(server.root)
    with serving(server.start(), request):
        yield server


def submit(lab, job_id: str, *args: str) -> None:
    body = {"jobId": job_id, "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task",
                                               "packageUris": [(lab.root / "trainer" / "trainer").as_uri()],
                                               "args": list(args)}}
    r = lab.api("POST", f"ml/v1/projects/{lab.project}/jobs", json=body)
    assert r.status_code == 200, r.text


def shoot(page, tmp_path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"))
    screenshot(page, f"lab_panel-{name}")


def open_panel(page, lab) -> None:
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.locator(".jp-LabShell").wait_for(timeout=120_000)
    palette = page.locator("#command-palette .lm-CommandPalette-input")
    item = page.locator("#command-palette .lm-CommandPalette-item", has_text="Training jobs").first
    # the shell shows before its key bindings (and the panel's command) are in place, and its layout
    # restore may still hand the left area to the file browser after the panel opened (seen under
    # load in CI): open it again until it stays open
    for _ in range(30):
        page.keyboard.press("Control+Shift+c")
        try:
            palette.wait_for(state="visible", timeout=2000)
            palette.fill("Training jobs")
            item.wait_for(state="visible", timeout=2000)
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            continue
        page.keyboard.press("Enter")
        try:
            page.locator(PANEL).wait_for(state="visible", timeout=5000)
        except PlaywrightTimeout:
            continue
        page.wait_for_timeout(1500)
        if page.locator(PANEL).is_visible():
            break
    page.locator(PANEL).wait_for(state="visible")


def row(page, job_id: str):
    return page.locator(f'{PANEL} li.mlp-row[data-job-id="{job_id}"]')


def axe_violations(page) -> list[dict]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async (sel) => {
        const r = await axe.run(document.querySelector(sel), {resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.map(n => n.target.join(' '))}));
    }""", PANEL)
    return [v for v in found if v["impact"] in ("serious", "critical")]


def test_the_panel_lists_follows_and_cancels_jobs(lab, browser_page, tmp_path):
    page = browser_page
    offsite = non_loopback_requests(page.context)
    errors = console_errors(page)
    open_panel(page, lab)
    assert page.locator(f"{PANEL} .mlp-empty").inner_text().startswith("No jobs yet")

    # a job submitted elsewhere appears, runs (the status bar counts it), and finishes
    submit(lab, "panel_job", "--epochs=20", "--sleep=1")
    row(page, "panel_job").wait_for(timeout=20_000)
    page.locator(".mlp-status", has_text="1 job running").wait_for(timeout=30_000)
    row(page, "panel_job").click()
    detail = page.locator(f"{PANEL} .mlp-detail-view")
    detail.locator(".mlp-detail-title", has_text="panel_job").wait_for()
    detail.locator(".mlp-log-line").first.wait_for(timeout=30_000)
    # the trainer's progress (issue 31.4): a bar, the time left while it runs, 100% at the end
    detail.locator(".mlp-train-progress", has_text="left").wait_for(timeout=30_000)
    shoot(page, tmp_path, "detail-running")
    detail.locator(".mlp-badge", has_text="SUCCEEDED").wait_for(timeout=60_000)
    detail.locator(".mlp-train-progress", has_text="100% · loss").wait_for(timeout=20_000)
    assert detail.locator(".mlp-train-progress .mlp-progress-bar").get_attribute("value") == "100"
    log = detail.locator(".mlp-log-viewport")
    lines = lab.api("GET", f"ml/v1/projects/{lab.project}/jobs/panel_job/logs").text.count("\ndata: ")
    page.wait_for_function("([sel, n]) => document.querySelector(sel).textContent.startsWith(n + ' lines')",
                           arg=[f"{PANEL} .mlp-log-status", lines - 1], timeout=20_000)  # less the end event
    last = log.locator(".mlp-log-line").last.inner_text()
    assert "epoch" in last.lower() or last, last
    assert detail.locator(".mlp-cancel").is_disabled()
    # ...and looks it: not JupyterLab's bright warn red of an active "Cancel job"
    looks = detail.locator(".mlp-cancel").evaluate("b => getComputedStyle(b).backgroundColor")
    warn = page.evaluate("() => { const b = document.createElement('button'); b.className = 'jp-mod-styled jp-mod-warn';"
                         " document.body.append(b); const c = getComputedStyle(b).backgroundColor; b.remove(); return c; }")
    assert looks != warn, (looks, warn)
    assert axe_violations(page) == []

    # the search finds a line; the download link is the whole log, not followed
    detail.locator(".mlp-log-search").fill("epoch")
    assert "matches" in detail.locator(".mlp-log-status").inner_text()
    href = detail.locator(".mlp-log-download").get_attribute("href")
    assert "follow=false" in href and "panel_job/logs" in href

    # reload: the panel is open again on the same job
    page.reload()
    page.locator(f"{PANEL} .mlp-detail-title", has_text="panel_job").wait_for(timeout=120_000)

    # cancel, with confirmation
    page.locator(f"{PANEL} .mlp-back").click()
    submit(lab, "to_cancel", "--epochs=100", "--sleep=1")
    row(page, "to_cancel").wait_for(timeout=20_000)
    row(page, "to_cancel").focus()
    page.keyboard.press("Enter")
    cancel = page.locator(f"{PANEL} .mlp-cancel")
    page.wait_for_function("(sel) => !document.querySelector(sel).disabled", arg=f"{PANEL} .mlp-cancel")
    cancel.click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for()
    shoot(page, tmp_path, "cancel-dialog")
    dialog.locator("button.jp-mod-warn").click()
    page.locator(f"{PANEL} .mlp-detail-view .mlp-badge", has_text="CANCELLED").wait_for(timeout=60_000)
    assert lab.api("GET", f"ml/v1/projects/{lab.project}/jobs/to_cancel").json()["state"] == "CANCELLED"

    # the list: filters, keyboard, accessibility
    page.locator(f"{PANEL} .mlp-back").click()
    page.locator(f"{PANEL} .mlp-state-filter").select_option("CANCELLED")
    assert [e.get_attribute("data-job-id") for e in page.locator(f"{PANEL} li.mlp-row").all()] == ["to_cancel"]
    page.locator(f"{PANEL} .mlp-state-filter").select_option("")
    page.locator(f"{PANEL} .mlp-text-filter").fill("panel")
    assert [e.get_attribute("data-job-id") for e in page.locator(f"{PANEL} li.mlp-row").all()] == ["panel_job"]
    page.locator(f"{PANEL} .mlp-text-filter").fill("")
    shoot(page, tmp_path, "list")
    assert axe_violations(page) == []
    assert offsite == [], f"requests off this machine: {offsite}"
    assert not [e for e in errors if "mlplatform" in e.lower()], errors


def test_the_extension_is_installed_enabled_and_ok(lab):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True,
                         env=lab.environment(), check=True)
    text = out.stdout + out.stderr
    line = next((ln for ln in text.splitlines() if "jupyterhub-mlplatform" in ln), "")
    assert "enabled" in line and "OK" in line, text
    settings = lab.api("GET", "lab/api/settings/jupyterhub-mlplatform:plugin")
    assert settings.status_code == 200, settings.text
    schema = settings.json()["schema"]["properties"]
    assert {"refresh", "defaultProject", "logLines"} <= set(schema), json.dumps(schema)


def test_a_sweeps_plot_grows_and_its_trials_sort(lab, browser_page, tmp_path):
    """The plot grows one finished trial at a time and each trial's line step by step. Each trial
    holds after its first epoch (the trainer's ``--wait_for``) until the test has seen it in the
    panel, running with one point, beside the points of the trials before it; only then does the
    test let it go on. So the panel is seen at 0, 1 and 2 finished trials however slow the machine
    (it once missed them under load, when the sweep ran ahead of the page), with no timing."""
    page = browser_page
    gates = tmp_path / "gates"
    gates.mkdir()
    body = {"jobId": "panel_sweep", "trainingInput": {
        "scaleTier": "BASIC", "pythonModule": "trainer.task",
        "packageUris": [(lab.root / "trainer" / "trainer").as_uri()],
        "args": ["--epochs=4", "--sleep=0.2", f"--wait_for={gates}/{{trial}}"],
        "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "rmse", "maxTrials": 3,
                            "maxParallelTrials": 1, "algorithm": "GRID_SEARCH",
                            "params": [{"parameterName": "learning_rate", "type": "DISCRETE",
                                        "discreteValues": [0.01, 0.1, 0.3]}]}}}
    r = lab.api("POST", f"ml/v1/projects/{lab.project}/jobs", json=body)
    assert r.status_code == 200, r.text
    open_panel(page, lab)
    row(page, "panel_sweep").click()
    svg = page.locator(f"{PANEL} .mlp-plot-svg")
    svg.wait_for(timeout=30_000)
    series = page.locator(f"{PANEL} .mlp-series-svg")
    held = []  # (trial, finished trials plotted, its line's points) while each trial was held
    for finished in range(3):  # trial n+1 runs (1 report, held) while n trials are plotted
        trial = str(finished + 1)
        line = page.locator(f'{PANEL} polyline.mlp-series[data-trial-id="{trial}"]')
        line.wait_for(state="attached", timeout=60_000)  # a one-point line has no size: "hidden"
        page.wait_for_function("([sel, n]) => document.querySelector(sel).dataset.points === String(n)",
                               arg=[f"{PANEL} .mlp-plot-svg", finished], timeout=60_000)
        held.append((trial, int(svg.get_attribute("data-points")), int(line.get_attribute("data-points"))))
        (gates / trial).touch()  # go on
    assert held == [("1", 0, 1), ("2", 1, 1), ("3", 2, 1)], held
    page.locator(f"{PANEL} .mlp-detail-view .mlp-badge", has_text="SUCCEEDED").wait_for(timeout=60_000)
    trials = page.locator(f"{PANEL} tr.mlp-trial")
    assert trials.count() == 3
    # every trial's whole series (its 4 epochs), the best trial's line marked
    page.wait_for_function("(sel) => document.querySelector(sel).dataset.points === '12'",
                           arg=f"{PANEL} .mlp-series-svg", timeout=20_000)
    assert series.get_attribute("data-lines") == "3"
    best = page.locator(f"{PANEL} polyline.mlp-series-best")
    assert best.count() == 1
    assert best.get_attribute("data-trial-id") == trials.first.locator("td").first.inner_text()
    for plot in (svg, series):  # axes with round values on them, as the widgets' plots have
        assert plot.locator(".mlp-axis").count() == 2, plot
        assert plot.locator(".mlp-tick-y").count() >= 1 and plot.locator(".mlp-tick-x").count() >= 1, plot
    metric = [float(t.locator("td").nth(2).inner_text()) for t in trials.all()]
    assert metric == sorted(metric)  # best first (MINIMIZE)
    page.locator(f'{PANEL} th[data-column="learning_rate"] button').click()
    rates = [float(t.locator("td").nth(3).inner_text()) for t in page.locator(f"{PANEL} tr.mlp-trial").all()]
    assert rates == [0.01, 0.1, 0.3]
    page.locator(f'{PANEL} th[data-column="learning_rate"] button').click()
    rates = [float(t.locator("td").nth(3).inner_text()) for t in page.locator(f"{PANEL} tr.mlp-trial").all()]
    assert rates == [0.3, 0.1, 0.01]
    assert page.locator(f'{PANEL} th[data-column="learning_rate"]').get_attribute("aria-sort") == "descending"
    # a trial's log opens below the table (issue 39.5: it could not be opened)
    assert "Log button" in page.locator(f"{PANEL} .mlp-log-hint").inner_text()
    first = page.locator(f"{PANEL} tr.mlp-trial").first
    trial_id = first.get_attribute("data-trial-id")
    first.locator("button.mlp-trial-log").click()
    page.locator(f"{PANEL} .mlp-log-title", has_text=f"Log (trial-{trial_id})").wait_for()
    page.locator(f"{PANEL} .mlp-log-line", has_text="epoch 4/4").first.wait_for(timeout=30_000)
    shoot(page, tmp_path, "sweep")
    assert axe_violations(page) == []
