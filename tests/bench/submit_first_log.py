"""Benchmark (prints figures, asserts nothing, exits 0) of P9, submit → first log line in the widget:
the time from ``client.submit(...)`` in a notebook to the job's first log line leaving the kernel
for a `JobDetail` view (goal ≤ 1 s), on the local runtime.

    .venv/bin/python -m tests.bench.submit_first_log [--rounds 10]   (or: make bench)

A real notebook server (``python -m jupyter_server`` with the extension, `tests.bench.sse_logs`'
`start_server`) runs the jobs; this process plays the kernel: a `Client` of that server, and the
comm replaced by `tests.bench.widget_traffic`'s recorder, which sees what would go on the wire to
the browser. A round: submit a job whose trainer prints one line at once (then sleeps 2 s), open
its `JobDetail` with its view's ``ready`` (what a notebook does on ``handle.widget()``), and wait
for a ``log_reset`` or ``log_append`` message carrying that line. ``submit`` is the submit call's
own time (the server's answer); ``first line`` counts from before the submit.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp

from tests.bench.figures import table
from tests.bench.sse_logs import PROJECT, TOKEN, start_server, wait_ready
from tests.bench.widget_traffic import TRAFFIC, from_view, install_recorder

LINE = "p9: first line"
TRAINER = f"import sys, time\nprint({LINE!r}, flush=True)\ntime.sleep(2)\n"


async def wait_server(url: str, proc) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"token {TOKEN}"}) as session:
        await wait_ready(session, url, proc)


def first_line_seen(start: int) -> bool:
    """Whether a log message after `TRAFFIC.contents[start]` carries `LINE`."""
    return any(c.get("type") in ("log_reset", "log_append") and LINE in (c.get("lines") or [])
               for c in TRAFFIC.contents[start:])


def one_round(client, pkg: Path, i: int, timeout: float = 30) -> tuple[float, float]:
    from server_ext.widgets.views import JobDetail

    start = len(TRAFFIC.contents)
    t0 = time.perf_counter()
    handle = client.submit({"jobId": f"p9_{i}", "trainingInput": {
        "scaleTier": "BASIC", "pythonModule": "p9bench.task", "packageUris": [pkg.as_uri()]}})
    submitted = time.perf_counter() - t0
    detail = JobDetail(client, handle.job["jobId"])
    from_view(detail, {"type": "ready"})
    try:
        while time.perf_counter() - t0 < timeout:
            if first_line_seen(start):
                return submitted, time.perf_counter() - t0
            time.sleep(0.005)
        raise TimeoutError(f"job p9_{i}: no log line in the widget within {timeout} s")
    finally:
        detail.close()


def trainer_package(root: Path, source: str = TRAINER) -> Path:
    """A trainer package (`source` as ``p9bench.task``) under `root`: its directory."""
    pkg = root / "pkg" / "p9bench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text(source)
    return pkg


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="jobs submitted, one after another")
    args = parser.parse_args(argv)
    install_recorder()
    from server_ext.client.notebook import Client

    with tempfile.TemporaryDirectory(prefix="bench-p9-") as tmp:
        tmp = Path(tmp)
        pkg = trainer_package(tmp)
        proc, url = start_server(tmp)
        try:
            asyncio.run(wait_server(url, proc))
            client = Client(url, TOKEN, PROJECT)
            rows = [one_round(client, pkg, i) for i in range(args.rounds)]
            client.close()
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"P9 submit → first log line in the JobDetail widget (local runtime), {args.rounds} rounds")
    print(table({"submit call": [r[0] for r in rows], "first line": [r[1] for r in rows]}, ""))
    print("goal: first line ≤ 1 s")


if __name__ == "__main__":
    main()
