"""Benchmark (prints figures, asserts nothing, exits 0) of the JupyterLab panel under load, in a real
JupyterLab (`tests.harness.lab.NotebookServer`, the extension as `make labextension` links it) and
Debian's Chromium, the server's answers replaced in the browser (Playwright routes) so that only
the panel's own work is measured:

- **1,000 jobs**: the panel open and empty, the project's ``jobs:watch`` stream (ended at once,
  so the panel reads the list, answered with the listing last streamed, and starts the stream
  again after its pause) next answers a listing of `--jobs` jobs, then
  the same listing with a tenth of them in another state. Figures: from the answer's arrival
  (the page's ``fetch`` resolved) to every row in the list (first render), and to the changed
  rows shown (update).
- **a big log**: one of those jobs opened; its log stream answers `--mb` MB of lines (SSE, as the
  server sends them) and the end event. Figures: from the answer's arrival to the viewer's status
  counting every line, the JS heap used before and after (CDP ``Performance.getMetrics``), and the
  main thread's long tasks meanwhile (``PerformanceObserver('longtask')``: count, total, longest).

    .venv/bin/python -m tests.bench.panel_load [--jobs 1000] [--mb 40]   (or: make bench)

The log is handed to the page in one piece (a Playwright route), not in the server's 64 KB flushes,
so it is parsed in one long task; at 100 MB that hand-over crashed the page here (2 runs), 40 MB
does not.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

INIT = """(() => {
  window.__mlp = {watch: [], logs: [], longtasks: []};
  const real = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input.url;
    const response = await real(input, init);
    const now = performance.now();
    if (url.includes('jobs:watch')) { window.__mlp.watch.push(now); }
    if (url.includes('/logs?')) { window.__mlp.logs.push(now); }
    return response;
  };
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) { window.__mlp.longtasks.push([e.startTime, e.duration]); }
  }).observe({entryTypes: ['longtask']});
})();"""

WAIT_ROWS = """async ([n, state, timeoutMs]) => {
  const t0 = performance.now();
  return await new Promise((resolve, reject) => {
    const check = () => {
      const rows = document.querySelectorAll('#mlplatform-jobs li.mlp-row');
      const ok = rows.length === n && (!state ||
        document.querySelectorAll(`#mlplatform-jobs li.mlp-row[data-state="${state}"]`).length === n / 10);
      if (ok) { return resolve(performance.now()); }
      if (performance.now() - t0 > timeoutMs) { return reject(new Error('rows: ' + rows.length)); }
      requestAnimationFrame(check);
    };
    check();
  });
}"""

WAIT_LOG = """async ([n, timeoutMs]) => {
  const t0 = performance.now();
  return await new Promise((resolve, reject) => {
    const check = () => {
      const s = document.querySelector('#mlplatform-jobs .mlp-log-status');
      if (s && s.textContent.startsWith(n + ' lines')) { return resolve(performance.now()); }
      if (performance.now() - t0 > timeoutMs) { return reject(new Error('log: ' + (s && s.textContent))); }
      setTimeout(check, 20);
    };
    check();
  });
}"""


def job(i: int, state: str) -> dict:
    return {"jobId": f"job_{i:04d}", "state": state, "createTime": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "startTime": "2026-01-01T01:00:00Z", "labels": {"team": f"t{i % 7}"},
            "trainingInput": {"scaleTier": "CUSTOM", "pythonModule": "trainer.task", "masterType": "n1-standard-4",
                              "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": "1"}}}}


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def log_body(mb: int) -> tuple[bytes, int]:
    line = "epoch 1/10 loss=0.351347 rmse=0.592745 " + "x" * 40
    parts, size, n = [], 0, 0
    while size < mb * 1_000_000:
        n += 1
        chunk = f"id: {n}\ndata: {json.dumps({'seq': n, 'task': 'master-replica-0', 'text': f'{n} {line}', 'time': None, 'stream': 'stdout'})}\n\n"
        parts.append(chunk)
        size += len(chunk)
    parts.append(sse("end", {"state": "SUCCEEDED"}))
    return "".join(parts).encode(), n


def heap_mb(cdp) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics["JSHeapUsedSize"] / 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--mb", type=int, default=40)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.harness.browser import launch
    from tests.harness.lab import NotebookServer

    n = args.jobs - args.jobs % 10
    listings = [[], [job(i, "RUNNING") for i in range(n)],
                [job(i, "SUCCEEDED" if i % 10 == 0 else "RUNNING") for i in range(n)]]
    body, lines = log_body(args.mb)
    served = {"watch": 0}

    def route(r):
        path = urlsplit(r.request.url).path
        if path.endswith("/ml/v1/projects"):
            return r.fulfill(status=200, content_type="application/json", body=json.dumps({"projects": [{"name": "demo"}]}))
        if path.endswith("jobs:watch"):
            served["now"] = min(served["watch"], len(listings) - 1)
            served["watch"] += 1
            return r.fulfill(status=200, content_type="text/event-stream",
                             body=sse("jobs", {"jobs": listings[served["now"]]}))
        if path.endswith("/jobs"):  # the list read between two streams: the listing served last
            return r.fulfill(status=200, content_type="application/json",
                             body=json.dumps({"jobs": listings[served.get("now", 0)]}))
        if path.endswith("/logs"):
            return r.fulfill(status=200, content_type="text/event-stream", body=body)
        return r.continue_()

    with tempfile.TemporaryDirectory(prefix="bench-panel-") as tmp, sync_playwright() as playwright:
        server = NotebookServer(Path(tmp) / "lab", app="lab")
        server.root.mkdir(parents=True)
        with server:
            context = launch(playwright, Path(tmp) / "chromium")
            try:
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(120_000)
                page.add_init_script(INIT)
                page.route("**/ml/v1/**", route)
                page.goto(f"{server.url}lab?token={server.token}")
                page.locator(".jp-LabShell").wait_for(timeout=120_000)
                page.locator('.lm-TabBar-tab[data-id="mlplatform-jobs"]').click()
                page.locator("#mlplatform-jobs").wait_for(state="visible")
                shown = page.evaluate(WAIT_ROWS, [n, "", 60_000])
                watch = page.evaluate("window.__mlp.watch")
                render = shown - watch[1]
                updated = page.evaluate(WAIT_ROWS, [n, "SUCCEEDED", 60_000])
                watch = page.evaluate("window.__mlp.watch")
                update = updated - watch[2]

                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                cdp.send("HeapProfiler.collectGarbage")
                before = heap_mb(cdp)
                page.evaluate("window.__mlp.longtasks = []")
                page.locator('#mlplatform-jobs li.mlp-row[data-job-id="job_0001"]').click()
                done = page.evaluate(WAIT_LOG, [lines, 600_000])
                arrived = page.evaluate("window.__mlp.logs")[0]
                tasks = page.evaluate("window.__mlp.longtasks")
                cdp.send("HeapProfiler.collectGarbage")
                after = heap_mb(cdp)
                kept = page.locator("#mlplatform-jobs .mlp-log-status").inner_text()
                dom_lines = page.locator("#mlplatform-jobs .mlp-log-line").count()
            finally:
                context.close()

    print(f"JupyterLab panel, {n} jobs (answers replaced in the browser)")
    print(f"  first render: {render:8.0f} ms from the listing's arrival to {n} rows")
    print(f"  update:       {update:8.0f} ms from the changed listing's arrival to its {n // 10} changed rows")
    print(f"a {len(body) / 1e6:.0f} MB log ({lines} lines) followed in the viewer")
    print(f"  all lines counted: {done - arrived:8.0f} ms from the answer's arrival ({kept!r}; {dom_lines} lines in the DOM)")
    print(f"  JS heap used: {before:.1f} MB before, {after:.1f} MB after (after garbage collection)")
    longest = max((d for _, d in tasks), default=0)
    print(f"  long tasks: {len(tasks)}, {sum(d for _, d in tasks):.0f} ms in all, longest {longest:.0f} ms")


if __name__ == "__main__":
    main()
