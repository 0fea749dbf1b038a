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

CLICK_AND_WAIT = """async ([line, timeoutMs]) => {
  const t0 = performance.now();
  document.querySelector('.mlp-submit-form .mlp-submit').click();
  return await new Promise((resolve, reject) => {
    const check = () => {
      for (const el of document.querySelectorAll('#mlplatform-jobs .mlp-log-line')) {
        if (el.textContent.includes(line)) { return resolve(performance.now() - t0); }
      }
      if (performance.now() - t0 > timeoutMs) { return reject(new Error('no line: ' + line)); }
      requestAnimationFrame(check);
    };
    check();
  });
}"""


def palette(page, command: str) -> None:
    page.keyboard.press("Control+Shift+c")
    page.locator("#command-palette .lm-CommandPalette-input").fill(command)
    page.keyboard.press("Enter")


def panel_rounds(rounds: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    from tests.harness.browser import launch
    from tests.harness.lab import NotebookServer

    with tempfile.TemporaryDirectory(prefix="bench-p9-panel-") as tmp:
        server = NotebookServer(Path(tmp) / "lab", app="lab")
        submit_first_log.trainer_package(server.root, TRAINER)  # the form names it pkg/p9bench
        times = []
        with server, sync_playwright() as playwright:
            context = launch(playwright, Path(tmp) / "chromium")
            try:
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(60_000)
                page.goto(f"{server.url}lab?token={server.token}")
                page.locator(".jp-LabShell").wait_for(timeout=120_000)
                palette(page, "Training jobs")
                page.locator("#mlplatform-jobs").wait_for(state="visible")
                palette(page, "Submit as training job")
                form = page.locator(".mlp-submit-form")
                form.locator(".mlp-field-accelerator option").first.wait_for(state="attached")
                for i in range(rounds):
                    form.locator(".mlp-field-job_id").fill(f"p9_{i}")
                    form.locator(".mlp-field-module").fill("p9bench.task")
                    form.locator(".mlp-field-package_path").fill("pkg/p9bench")
                    form.locator(".mlp-field-args").fill(f"round{i}")
                    times.append(page.evaluate(CLICK_AND_WAIT, [f"p9 first line round{i}", 30_000]) / 1000)
            finally:
                context.close()
    return times


def widget_rounds(rounds: int) -> list[float]:
    """Submit → first line in a `JobDetail`, submitting a package path as the widget's form does."""
    import asyncio
    import time

    from server_ext.client.notebook import Client
    from server_ext.widgets.views import JobDetail
    from tests.bench.sse_logs import PROJECT, TOKEN, start_server
    from tests.bench.widget_traffic import TRAFFIC, from_view

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
                handle = client.submit({"trainingInput": {"scaleTier": "BASIC", "pythonModule": "p9bench.task",
                                                          "args": [f"round{i}"]}},
                                       job_id=f"p9_form_{i}", package_path=str(pkg))
                detail = JobDetail(client, handle.job["jobId"])
                from_view(detail, {"type": "ready"})
                try:
                    while time.perf_counter() - t0 < 60:
                        if any(c.get("type") in ("log_reset", "log_append") and line in (c.get("lines") or [])
                               for c in TRAFFIC.contents[start:]):
                            times.append(time.perf_counter() - t0)
                            break
                        time.sleep(0.005)
                    else:
                        raise TimeoutError(f"no log line in the widget for round {i}")
                finally:
                    detail.close()
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
    panel = panel_rounds(args.rounds)
    print(f"P9 submit → first log line, a package path submitted (sdist built, pip-installed by the job), "
          f"{args.rounds} rounds each")
    print(table({"widget JobDetail (Client.submit)": widget, "panel (form Submit → line rendered)": panel}, ""))
    print("goal: first line ≤ 1 s (packaging not counted in the goal: see the directory-URI figures above)")


if __name__ == "__main__":
    main()
