"""Benchmark (prints figures, asserts nothing, exits 0) of what the notebook widgets send to the
browser: comm messages and bytes, counted where the kernel would put them on the wire.

    .venv/bin/python -m tests.bench.widget_traffic [--jobs 10] [--seconds 20] [--mb 100]   (or: make bench)

No browser and no kernel: `comm.create_comm` (the documented hook a kernel replaces to give
widgets their comm) is set to `RecordingComm`, which records each message a widget publishes
(``comm_open``, trait ``update``s, ``custom`` messages) with its JSON size. The widgets run as in a
kernel (`server_ext.client.notebook.background`, `server_ext.widgets.sync`), against `FakeJobs`, a
stand-in with `ServerJobs`' async methods injected through `Client(jobs=…)`: the server's REST/SSE
transport is measured by `tests.bench.sse_logs`; this measures the widget side.

- **table, steady**: `--jobs` RUNNING jobs (nothing changes), a `JobsTable` whose view sent
  ``ready``: messages and bytes per second after the snapshot, over `--seconds` (goal ≤ 2 msg/s,
  ≤ 5 KB/s).
- **table + detail**: the same with a `JobDetail` following one job whose log grows by 10 lines/s.
- **100 MB log**: a `JobDetail` following a log of `--mb` MB written as fast as it can be read:
  messages/s, bytes/s, the ring buffer's size and last line (it must hold the last 10,000 lines,
  the newest last), and the kernel thread's responsiveness (the worst delay of a 10 ms timer on
  the main thread while the log streams).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time

import comm
from comm.base_comm import BaseComm

from server_ext.jobs.backend import LogLine


class Traffic:
    """Every message published by a widget, as (monotonic time, msg_type, method, type, bytes)."""

    def __init__(self) -> None:
        self.records: list[tuple[float, str, str, str, int]] = []
        self.contents: list[dict] = []  # the custom messages' contents, in order
        self._lock = threading.Lock()

    def add(self, msg_type: str, data: dict | None, buffers) -> None:
        data = data or {}
        content = data.get("content") if isinstance(data.get("content"), dict) else {}
        size = len(json.dumps(data, default=str)) + sum(len(b) for b in buffers or ())
        with self._lock:
            self.records.append((time.monotonic(), msg_type, str(data.get("method", "")),
                                 str(content.get("type", "")), size))
            if content:
                self.contents.append(content)

    def last(self, kind: str) -> dict:
        """The last custom message of type `kind`."""
        with self._lock:
            return next(c for c in reversed(self.contents) if c.get("type") == kind)

    def since(self, t0: float) -> list[tuple[float, str, str, str, int]]:
        with self._lock:
            return [r for r in self.records if r[0] >= t0]

    def customs(self, kind: str | None = None) -> list[tuple[float, str, str, str, int]]:
        with self._lock:
            return [r for r in self.records if r[2] == "custom" and (kind is None or r[3] == kind)]


TRAFFIC = Traffic()


class RecordingComm(BaseComm):
    """A comm that records what it would send (to `TRAFFIC`) and delivers nothing."""

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys) -> None:
        TRAFFIC.add(msg_type, data, buffers)


def install_recorder() -> None:
    comm.create_comm = RecordingComm


def from_view(widget, message: dict) -> None:
    """Deliver `message` as if the widget's ES module had sent it (``model.send``)."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": message}}, "buffers": []})


class FakeJobs:
    """`ServerJobs`' methods over jobs held in memory; `logs` yields `lines(task)`'s lines."""

    def __init__(self, jobs: list[dict], lines=None, lines_per_chunk: int = 600):
        self.jobs = {j["jobId"]: j for j in jobs}
        self.lines = lines or (lambda job_id, task: iter(()))
        self.lines_per_chunk = lines_per_chunk
        self.calls = 0

    async def list(self, project, filter=None, page_size=None, page_token=None) -> dict:
        self.calls += 1
        return {"jobs": [json.loads(json.dumps(j)) for j in self.jobs.values()]}

    async def get(self, project, job_id) -> dict:
        return json.loads(json.dumps(self.jobs[job_id]))

    async def cancel(self, project, job_id) -> dict:
        self.jobs[job_id]["state"] = "CANCELLED"
        return {}

    async def trial_metrics(self, project, job_id, trial_id) -> list:
        return []

    async def logs(self, project, job_id, task=None, *, follow=False, after=0):
        n = 0
        for seq, text in self.lines(job_id, task):
            if seq <= after:
                continue
            yield LogLine(seq, task or "master-replica-0", text)
            n += 1
            if n % self.lines_per_chunk == 0:
                await asyncio.sleep(0)  # one network chunk read

    async def close(self) -> None:
        pass


def running_job(i: int) -> dict:
    return {"jobId": f"job_{i}", "state": "RUNNING", "labels": {"team": "vision"},
            "createTime": "2026-01-01T00:00:00Z", "startTime": "2026-01-01T00:00:05Z",
            "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "pythonModule": "trainer.task",
                              "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": "1"}}}}


class PacedJobs(FakeJobs):
    """A FakeJobs whose log of `follow_job` grows by `rate` lines/s forever."""

    def __init__(self, jobs, follow_job: str, rate: float):
        super().__init__(jobs)
        self.follow_job, self.rate = follow_job, rate

    async def logs(self, project, job_id, task=None, *, follow=False, after=0):
        start, seq = time.monotonic(), after
        while True:
            due = int((time.monotonic() - start) * self.rate) + after
            while seq < due:
                seq += 1
                yield LogLine(seq, task or "master-replica-0",
                              f"step {seq}: loss=0.{seq % 1000:03d} accuracy=0.{(seq * 7) % 1000:03d}")
            await asyncio.sleep(1 / self.rate)


def rate(records, seconds: float) -> tuple[float, float]:
    return len(records) / seconds, sum(r[4] for r in records) / seconds


def steady(jobs_n: int, seconds: float, with_detail: bool) -> dict:
    from server_ext.client.notebook import Client
    from server_ext.widgets.views import JobDetail, JobsTable

    fake = PacedJobs([running_job(i) for i in range(jobs_n)], "job_0", 10.0)
    client = Client("http://fake/", "t", "bench", jobs=fake)
    table = JobsTable(client)
    widgets = [table]
    if with_detail:
        widgets.append(JobDetail(client, "job_0"))
    time.sleep(1.0)  # first poll answered
    for w in widgets:
        from_view(w, {"type": "ready"})
    time.sleep(1.0)  # snapshots sent
    t0 = time.monotonic()
    time.sleep(seconds)
    records = TRAFFIC.since(t0)
    for w in widgets:
        w.close()
    msgs, bps = rate(records, seconds)
    return {"messages": len(records), "msg/s": round(msgs, 2), "B/s": round(bps, 1), "polls": fake.calls}


def big_log(mb: float) -> dict:
    from server_ext.client.notebook import Client
    from server_ext.widgets.views import JobDetail

    target = int(mb * 1e6)

    def lines(job_id, task):
        seq = size = 0
        while size < target:
            seq += 1
            text = f"{seq} " + "x" * ((seq * 37) % 151 + 20)
            size += len(text) + 1
            yield seq, text

    total_lines = sum(1 for _ in lines("", ""))
    job = {**running_job(0), "state": "SUCCEEDED", "endTime": "2026-01-01T01:00:00Z"}
    fake = FakeJobs([job], lines)
    client = Client("http://fake/", "t", "bench", jobs=fake)
    t0 = time.monotonic()
    detail = JobDetail(client, "job_0")
    from_view(detail, {"type": "ready"})
    worst, timer = 0.0, time.monotonic()
    while not any(r[3] == "log_end" for r in TRAFFIC.since(t0)):
        time.sleep(0.01)
        now = time.monotonic()
        worst, timer = max(worst, now - timer - 0.01), now
        if now - t0 > 600:
            break
    elapsed = time.monotonic() - t0
    records = [r for r in TRAFFIC.since(t0) if r[2] == "custom"]
    buf = detail.log
    out = {"lines": total_lines, "seconds": round(elapsed, 2), "lines/s": round(total_lines / elapsed),
           "messages": len(records), "msg/s": round(len(records) / elapsed, 2),
           "KB/s": round(sum(r[4] for r in records) / elapsed / 1e3, 1),
           "largest message KB": round(max(r[4] for r in records) / 1e3, 1),
           "buffer lines": len(buf), "buffer first..last": f"{buf.first}..{buf.last}",
           "last 10,000 kept": len(buf) == 10_000 and buf.last == total_lines,
           "worst main-thread delay ms": round(worst * 1e3, 1)}
    detail.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=10)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--mb", type=float, default=100.0)
    args = p.parse_args(argv)
    install_recorder()
    print(f"widget traffic: {args.jobs} RUNNING jobs, steady state over {args.seconds:g} s "
          f"(goal ≤ 2 msg/s, ≤ 5 KB/s)")
    print("  table, steady        ", steady(args.jobs, args.seconds, with_detail=False))
    print("  table + detail 10 l/s", steady(args.jobs, args.seconds, with_detail=True))
    print(f"widget traffic: a {args.mb:g} MB log into a JobDetail")
    print("  ", big_log(args.mb))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
