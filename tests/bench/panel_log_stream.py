"""Benchmark (prints figures, asserts nothing, exits 0) of a big log streamed by the server into the
JupyterLab panel's log viewer: a real JupyterLab (`tests.harness.lab.NotebookServer`: the
platform's server extension on the local backend, the panel as `make labextension` links it) and
Debian's Chromium, nothing replaced: the server reads the job's log from disk and sends it as
Server-Sent Events in its 64 KB flushes (`server_ext/rest/handlers.py`), the panel parses it as it
arrives (`api.followLog`) and keeps its last *log lines kept* lines (10,000) in the viewer.

    .venv/bin/python -m tests.bench.panel_log_stream [--mb 40 100]   (or: make bench)

For each size, a job of `tests.bench.sse_logs`'s line generator writes that many MB and finishes;
then the panel (opened once) shows it: click on its row → the viewer's status counts every line.
Figures per size: the time from the click to the last line counted (and to the stream's first
byte), the JS heap used before and after (CDP ``Performance.getMetrics``, after a garbage
collection) and its peak meanwhile (``performance.memory``, sampled every 100 ms), and the main
thread's long tasks (``PerformanceObserver('longtask')``: count, longest, total). Between sizes the
panel goes back to the list, which stops the stream and drops the viewer.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.bench.sse_logs import GENERATOR, text_len

INIT = """(() => {
  window.__mlp = {logs: [], longtasks: [], heap: []};
  const real = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input.url;
    const response = await real(input, init);
    if (url.includes('/logs?')) { window.__mlp.logs.push(performance.now()); }
    return response;
  };
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) { window.__mlp.longtasks.push([e.startTime, e.duration]); }
  }).observe({entryTypes: ['longtask']});
  setInterval(() => { if (performance.memory) { window.__mlp.heap.push(performance.memory.usedJSHeapSize); } }, 100);
})();"""

CLICK_AND_WAIT = """async ([jobId, n, timeoutMs]) => {
  window.__mlp.logs = []; window.__mlp.longtasks = []; window.__mlp.heap = [];
  const t0 = performance.now();
  document.querySelector(`#mlplatform-jobs li.mlp-row[data-job-id="${jobId}"]`).click();
  return await new Promise((resolve, reject) => {
    const check = () => {
      const s = document.querySelector('#mlplatform-jobs .mlp-log-status');
      if (s && s.textContent.startsWith(n + ' lines')) {
        return resolve({t0, done: performance.now(), status: s.textContent,
                        dom: document.querySelectorAll('#mlplatform-jobs .mlp-log-line').length});
      }
      if (performance.now() - t0 > timeoutMs) { return reject(new Error('log: ' + (s && s.textContent))); }
      setTimeout(check, 20);
    };
    check();
  });
}"""


def lines_for(size: int) -> int:
    """How many lines the generator writes for `size` bytes."""
    written = i = 0
    while written < size:
        i += 1
        written += text_len(i) + 1
    return i


def heap_mb(cdp) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics["JSHeapUsedSize"] / 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[40, 100])
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.harness.browser import launch
    from tests.harness.lab import NotebookServer

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-panel-log-") as tmp, sync_playwright() as playwright:
        server = NotebookServer(Path(tmp) / "lab", app="lab")
        pkg = server.root / "sselogbench"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "gen.py").write_text(GENERATOR)
        with server:
            jobs = {}
            for mb in args.mb:  # written first: the producer's speed does not count
                job_id = f"log_{int(mb)}mb"
                body = {"jobId": job_id, "trainingInput": {"scaleTier": "BASIC", "pythonModule": "sselogbench.gen",
                                                           "packageUris": [pkg.as_uri()],
                                                           "args": [str(int(mb * 1e6)), "0"]}}
                r = server.api("POST", f"ml/v1/projects/{server.project}/jobs", json=body)
                r.raise_for_status()
                jobs[mb] = job_id
                t = time.monotonic()
                while server.api("GET", f"ml/v1/projects/{server.project}/jobs/{job_id}").json()["state"] != "SUCCEEDED":
                    if time.monotonic() - t > 600:
                        raise TimeoutError(f"{job_id} did not finish")
                    time.sleep(0.5)
            context = launch(playwright, Path(tmp) / "chromium")
            try:
                page = context.pages[0] if context.pages else context.new_page()
                page.set_default_timeout(120_000)
                page.add_init_script(INIT)
                page.goto(f"{server.url}lab?token={server.token}")
                page.locator(".jp-LabShell").wait_for(timeout=120_000)
                page.locator('.lm-TabBar-tab[data-id="mlplatform-jobs"]').click()
                page.locator("#mlplatform-jobs").wait_for(state="visible")
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                for mb, job_id in jobs.items():
                    page.locator(f'#mlplatform-jobs li.mlp-row[data-job-id="{job_id}"]').wait_for()
                    cdp.send("HeapProfiler.collectGarbage")
                    before = heap_mb(cdp)
                    n = lines_for(int(mb * 1e6))
                    out = page.evaluate(CLICK_AND_WAIT, [job_id, n, 900_000])
                    mlp = page.evaluate("window.__mlp")
                    cdp.send("HeapProfiler.collectGarbage")
                    after = heap_mb(cdp)
                    tasks = [d for _, d in mlp["longtasks"]]
                    rows.append({"mb": mb, "lines": n, "first": mlp["logs"][0] - out["t0"] if mlp["logs"] else float("nan"),
                                 "last": out["done"] - out["t0"], "before": before, "after": after,
                                 "peak": max(mlp["heap"], default=0) / 1e6, "tasks": len(tasks),
                                 "longest": max(tasks, default=0), "total": sum(tasks), "dom": out["dom"],
                                 "status": out["status"]})
                    page.locator("#mlplatform-jobs .mlp-back").click()
            finally:
                context.close()

    print("a big log streamed by the server (SSE, 64 KB flushes) into the JupyterLab panel's viewer "
          "(real server, job already finished)")
    print(f"{'log':>8} {'lines':>9} {'1st byte':>9} {'last line':>10} {'heap before':>12} {'after':>7} {'peak':>7} "
          f"{'long tasks':>10} {'longest':>8} {'total':>8} {'in DOM':>7}")
    for r in rows:
        print(f"{r['mb']:>5.0f} MB {r['lines']:>9} {r['first']:>6.0f} ms {r['last'] / 1000:>8.1f} s "
              f"{r['before']:>9.1f} MB {r['after']:>4.1f} MB {r['peak']:>4.1f} MB {r['tasks']:>10} "
              f"{r['longest']:>5.0f} ms {r['total']:>5.0f} ms {r['dom']:>7}")
    for r in rows:
        print(f"  {r['mb']:.0f} MB status: {r['status']!r}")


if __name__ == "__main__":
    main()
