"""Benchmark (prints figures, asserts nothing, exits 0) of P9 in the JupyterLab panel, beside the
notebook widget in one run: the time from clicking Submit in the panel's "Submit as training job"
form to the job's first log line shown in the panel's log viewer (goal ≤ 1 s), on the local
runtime.

    .venv/bin/python -m tests.bench.panel_first_log [--rounds 10] [--skip-directory-uri]   (or: make bench)

First `tests.bench.submit_first_log` measures the widget (its own server and rounds, a job whose
package is a directory URI). The panel's form submits a package path (the server builds and
ships an sdist, the job pip-installs it: seconds more), so the widget is measured that way too,
as its own form submits (`Client.submit(..., package_path=)`, `widget_rounds`). Then a real
JupyterLab (`tests.harness.lab.NotebookServer`, the extension as `make labextension` links it)
and Debian's Chromium: the panel and the form are opened from the command palette; a round fills
the form (a trainer that prints one line naming the round at once, then sleeps 2 s) and, in the
page, clicks Submit and waits (each animation frame) for that line in the panel's log viewer,
timed with ``performance.now()``: the server's create, the panel opening the job, the SSE log
stream and the viewer's render are all in it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tests.bench import submit_first_log
from tests.bench.figures import table

TRAINER = "import sys, time\nprint('p9 first line', *sys.argv[1:], flush=True)\ntime.sleep(2)\n"

# each request's method, URL, and wall-clock times (ms) sent and answered (headers), for the steps
FETCHES = """(() => {
  window.__p9 = [];
  const real = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input.url;
    const entry = {url, method: (init && init.method) || (input && input.method) || 'GET', sent: Date.now()};
    window.__p9.push(entry);
    const response = await real(input, init);
    entry.answered = Date.now();
    return response;
  };
})();"""

CLICK_AND_WAIT = """async ([line, timeoutMs]) => {
  const t0 = performance.now();
  window.__p9 = [];
  window.__p9click = Date.now();
  document.querySelector('.mlp-submit-form .mlp-submit').click();
  return await new Promise((resolve, reject) => {
    const check = () => {
      for (const el of document.querySelectorAll('#mlplatform-jobs .mlp-log-line')) {
        if (el.textContent.includes(line)) { window.__p9shown = Date.now(); return resolve(performance.now() - t0); }
      }
      if (performance.now() - t0 > timeoutMs) { return reject(new Error('no line: ' + line)); }
      requestAnimationFrame(check);
    };
    check();
  });
}"""


# a job created through the REST API with a directory URI (as the widget's directory-URI rounds do),
# opened in the panel by its command, until its first line is in the panel's log viewer
CREATE_OPEN_AND_WAIT = """async ([base, token, project, body, line, timeoutMs]) => {
  const t0 = performance.now();
  window.__p9 = [];
  window.__p9click = Date.now();
  const r = await fetch(`${base}ml/v1/projects/${project}/jobs`, {method: 'POST', body: JSON.stringify(body),
    headers: {Authorization: `token ${token}`, 'Content-Type': 'application/json'}});
  if (!r.ok) { throw new Error(await r.text()); }
  window.__p9answered = Date.now();
  await window.jupyterapp.commands.execute('mlplatform:open-jobs', {project, jobId: body.jobId});
  return await new Promise((resolve, reject) => {
    const check = () => {
      for (const el of document.querySelectorAll('#mlplatform-jobs .mlp-log-line')) {
        if (el.textContent.includes(line)) { window.__p9shown = Date.now(); return resolve(performance.now() - t0); }
      }
      if (performance.now() - t0 > timeoutMs) { return reject(new Error('no line: ' + line)); }
      requestAnimationFrame(check);
    };
    check();
  });
}"""


def palette(page, command: str) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator("#command-palette .lm-CommandPalette-input")
    for _ in range(30):  # the shell shows before its key bindings are in place: press until the palette opens
        page.keyboard.press("Control+Shift+c")
        try:
            box.wait_for(state="visible", timeout=2000)
            break
        except PlaywrightTimeout:
            continue
    box.fill(command)
    page.keyboard.press("Enter")


def epoch(rfc3339: str) -> float:
    import datetime
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def server_times(get, job_id: str, line: str) -> dict:
    """The job's created and started times and when `line` was written (the log's stamp), epoch s.
    `get(path)`: a response of the REST API."""
    import json

    job = get(f"jobs/{job_id}").json()
    written = None
    for chunk in get(f"jobs/{job_id}/logs").text.split("\n\n"):
        data = next((ln[6:] for ln in chunk.splitlines() if ln.startswith("data: ")), None)
        if data and line in (event := json.loads(data)).get("text", ""):
            written = epoch(event["time"]) if event.get("time") else None
            break
    return {"created": epoch(job["createTime"]), "started": epoch(job["startTime"]), "written": written}


def steps(t0: float, answered: float, server: dict, shown: float, stream: float | None = None) -> dict:
    """Where one round's seconds went, from the click (or the call) at `t0`."""
    out = {"packaging + create": server["created"] - t0, "create answered": answered - t0,
           "pip install + start": server["started"] - server["created"],
           "start → line written": (server["written"] or shown) - server["started"],
           "written → shown": shown - (server["written"] or shown)}
    if stream is not None:
        out["answer → log stream asked"] = stream - answered
    return out


STEPS: dict[str, list[dict]] = {"widget": [], "panel": [], "panel, directory URI": []}


def panel_rounds(rounds: int) -> tuple[list[float], list[float]]:
    """Submit → first line in the panel: the form with a package path, then (`rounds` more) a job
    created through the REST API with a directory URI and opened by the panel's command."""
    from playwright.sync_api import sync_playwright

    from tests.harness.browser import launch
    from tests.harness.lab import NotebookServer

    class Lab(NotebookServer):
        def config(self) -> dict:
            config = super().config()
            config["LabApp"]["expose_app_in_browser"] = True  # window.jupyterapp, to run the panel's command
            return config

    with tempfile.TemporaryDirectory(prefix="bench-p9-panel-") as tmp:
        server = Lab(Path(tmp) / "lab", app="lab")
        pkg = submit_first_log.trainer_package(server.root, TRAINER)  # the form names it pkg/p9bench
        times, uri_times = [], []
        with server, sync_playwright() as playwright:
            context = launch(playwright, Path(tmp) / "chromium")
            try:
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(60_000)
                page.add_init_script(FETCHES)
                page.goto(f"{server.url}lab?token={server.token}")
                page.locator(".jp-LabShell").wait_for(timeout=120_000)
                palette(page, "Training jobs")
                page.locator("#mlplatform-jobs").wait_for(state="visible")
                palette(page, "Submit as training job")
                form = page.locator(".mlp-submit-form")
                form.locator(".mlp-field-accelerator option").first.wait_for(state="attached")
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")

                def busy() -> dict:
                    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}

                for i in range(rounds):
                    form.locator(".mlp-field-job_id").fill(f"p9_{i}")
                    form.locator(".mlp-field-module").fill("p9bench.task")
                    form.locator(".mlp-field-package_path").fill("pkg/p9bench")
                    form.locator(".mlp-field-args").fill(f"round{i}")
                    before = busy()
                    times.append(page.evaluate(CLICK_AND_WAIT, [f"p9 first line round{i}", 30_000]) / 1000)
                    after = busy()
                    seen = page.evaluate("({click: window.__p9click, shown: window.__p9shown, fetches: window.__p9})")
                    post = next(f for f in seen["fetches"] if f["method"] == "POST" and "submitForm" in f["url"])
                    logs = [f for f in seen["fetches"] if "/logs?" in f["url"]]
                    times_at = server_times(lambda path: server.api("GET", f"ml/v1/projects/{server.project}/{path}"),
                                            f"p9_{i}", f"p9 first line round{i}")
                    row = steps(seen["click"] / 1000, post["answered"] / 1000, times_at, seen["shown"] / 1000,
                                logs[0]["sent"] / 1000 if logs else None)
                    row["log streams asked"] = len(logs)
                    # the page's main thread meanwhile (CDP): all its tasks, and the scripts among them
                    row["page busy (tasks)"] = after["TaskDuration"] - before["TaskDuration"]
                    row["page busy (scripts)"] = after["ScriptDuration"] - before["ScriptDuration"]
                    STEPS["panel"].append(row)
                for i in range(rounds):
                    body = {"jobId": f"p9_uri_{i}", "trainingInput": {
                        "scaleTier": "BASIC", "pythonModule": "p9bench.task", "packageUris": [pkg.as_uri()],
                        "args": [f"uri{i}"]}}
                    uri_times.append(page.evaluate(CREATE_OPEN_AND_WAIT, [
                        server.url, server.token, server.project, body, f"p9 first line uri{i}", 30_000]) / 1000)
                    seen = page.evaluate("({click: window.__p9click, answered: window.__p9answered, "
                                         "shown: window.__p9shown, fetches: window.__p9})")
                    logs = [f for f in seen["fetches"] if "/logs?" in f["url"]]
                    times_at = server_times(lambda path: server.api("GET", f"ml/v1/projects/{server.project}/{path}"),
                                            f"p9_uri_{i}", f"p9 first line uri{i}")
                    row = steps(seen["click"] / 1000, seen["answered"] / 1000, times_at, seen["shown"] / 1000,
                                logs[0]["sent"] / 1000 if logs else None)
                    row["log streams asked"] = len(logs)
                    STEPS["panel, directory URI"].append(row)
            finally:
                context.close()
    return times, uri_times


def widget_rounds(rounds: int) -> list[float]:
    """Submit → first line in a `JobDetail`, submitting a package path as the widget's form does."""
    import asyncio
    import time

    from server_ext.client.notebook import Client
    from server_ext.widgets.views import JobDetail
    from tests.bench.sse_logs import PROJECT, TOKEN, start_server
    from tests.bench.widget_traffic import TRAFFIC, from_view, install_recorder

    install_recorder()  # the widget's messages recorded (also when submit_first_log did not run here)

    times = []
    with tempfile.TemporaryDirectory(prefix="bench-p9-form-") as tmp:
        tmp = Path(tmp)
        pkg = submit_first_log.trainer_package(tmp, TRAINER)
        proc, url = start_server(tmp)
        try:
            asyncio.run(submit_first_log.wait_server(url, proc))
            client = Client(url, TOKEN, PROJECT)
            for i in range(rounds):
                line = f"p9 first line round{i}"
                start = len(TRAFFIC.contents)
                t0 = time.perf_counter()
                t0_wall = time.time()
                handle = client.submit({"trainingInput": {"scaleTier": "BASIC", "pythonModule": "p9bench.task",
                                                          "args": [f"round{i}"]}},
                                       job_id=f"p9_form_{i}", package_path=str(pkg))
                answered = time.time()
                detail = JobDetail(client, handle.job["jobId"])
                from_view(detail, {"type": "ready"})
                try:
                    while time.perf_counter() - t0 < 60:
                        if any(c.get("type") in ("log_reset", "log_append") and line in (c.get("lines") or [])
                               for c in TRAFFIC.contents[start:]):
                            times.append(time.perf_counter() - t0)
                            shown = time.time()
                            break
                        time.sleep(0.005)
                    else:
                        raise TimeoutError(f"no log line in the widget for round {i}")
                finally:
                    detail.close()
                import requests

                def get(path: str):
                    return requests.get(f"{url}/ml/v1/projects/{PROJECT}/{path}",
                                        headers={"Authorization": f"token {TOKEN}"}, timeout=30)
                STEPS["widget"].append(steps(t0_wall, answered, server_times(get, f"p9_form_{i}", line), shown))
            client.close()
        finally:
            proc.terminate()
            proc.wait(30)
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="jobs submitted, one after another")
    parser.add_argument("--skip-directory-uri", action="store_true",
                        help="leave out tests.bench.submit_first_log (make bench has just run it)")
    args = parser.parse_args(argv)
    if not args.skip_directory_uri:
        submit_first_log.main(["--rounds", str(args.rounds)])
    widget = widget_rounds(args.rounds)
    panel, panel_uri = panel_rounds(args.rounds)
    print(f"P9 submit → first log line, a package path submitted (sdist built, pip-installed by the job), "
          f"{args.rounds} rounds each")
    print(table({"widget JobDetail (Client.submit)": widget, "panel (form Submit → line rendered)": panel}, ""))
    print(f"P9 with a directory URI (no packaging; the widget's figure: tests.bench.submit_first_log above), "
          f"{args.rounds} rounds")
    print(table({"panel (REST create → panel opens it → line rendered)": panel_uri}, ""))
    print("goal: first line ≤ 1 s (packaging not counted in the goal: see the directory-URI figures above)")
    print("where the seconds go (median of the rounds; server times from the job's createTime, startTime and the "
          "line's log stamp)")
    names = list(dict.fromkeys(k for rows in STEPS.values() for row in rows for k in row))
    print(f"  {'step':28} {'widget':>8} {'panel':>8} {'panel, directory URI':>21}")
    for name in names:
        cells = []
        for side in ("widget", "panel", "panel, directory URI"):
            values = sorted(row[name] for row in STEPS[side] if name in row)
            cells.append(f"{values[len(values) // 2]:8.2f}" if values else f"{'-':>8}")
        print(f"  {name:28} {cells[0]} {cells[1]} {cells[2]:>21}")


if __name__ == "__main__":
    main()
