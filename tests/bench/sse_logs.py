"""Benchmark (not a test: prints figures, asserts nothing, exits 0) of the job log Server-Sent
Events endpoint (``GET …/ml/v1/projects/<p>/jobs/<jobId>/logs``) on a large log.

    .venv/bin/python -m tests.bench.sse_logs [--mb 100] [--follow-rate 5]      (or: make bench)

A real notebook server (``python -m jupyter_server``, its own process, so that its memory can be
measured) runs the extension on the local backend with a temporary state dir and a known token.
Jobs run a generator module shipped as a package directory (``packageUris: [file:///…/sselogbench]``:
used in place, its parent on ``PYTHONPATH``): line ``i`` is ``"<i> "`` and ``(i * 37) % 151 + 20``
letters, written in uneven batches so the reader meets lines cut across reads; ``--mb`` MB in all.

- **disk**: the finished job's log read line by line in this process (``for line in file``): the
  ceiling for any reader in Python.
- **sse, done job**: the same job's log through the endpoint (``follow=false``), the job already
  finished, so the producer's speed does not count.
- **sse, resume**: the same, disconnected at half the lines and resumed with ``Last-Event-ID``:
  the two parts together must be every line exactly once. ``resume ttfb`` is the time from the
  second request to its first line.
- **sse, follow**: a new job, read with ``follow=true`` from its submission while it writes,
  until ``event: end``: once with the producer unthrottled (it writes faster than any stream,
  so most lines are sent after it ended), once paced at ``--follow-rate`` MB/s (default 5), where
  the stream should keep up: the note gives the lines still to send when the job ended.
- **contents API**: the plain ``GET /api/contents/<path>?content=1`` download of the same log.

The client is aiohttp, parsing events incrementally (no body is held); every event's ``id``, its
data's ``seq`` and its text (number and length) are checked: ``lost`` lines were never received,
``dup`` ones more than once, ``bad`` ones differed from what was written. The server's RSS is
sampled from ``/proc/<pid>/status`` every 50 ms: before the mode, its peak during, after, and the
growth (peak − before; the goal for SSE is ≤ 50 MB whatever the log's size). CPU seconds are
user + system of the server process and of this one (the client).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import aiohttp

from hub_ext.core.ports import free_port

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROJECT = "bench"
TOKEN = "sse-bench-token"
MB = 1_000_000
GENERATOR = '''"""Numbered lines to stdout: `argv[1]` bytes, at most `argv[2]` bytes/s (0: no limit)."""
import sys
import time

LETTERS = b"abcdefghijklmnopqrstuvwxyz" * 8


def main(total, rate):
    out, written, i, batch, start = sys.stdout.buffer, 0, 0, [], time.monotonic()
    while written < total:
        i += 1
        line = b"%d %s\\n" % (i, LETTERS[:(i * 37) % 151 + 20])
        batch.append(line)
        written += len(line)
        if len(batch) >= 300 + i % 257:  # uneven writes: lines are cut across the reader's reads
            out.write(b"".join(batch))
            out.flush()
            batch = []
            if rate and written / rate > time.monotonic() - start:
                time.sleep(written / rate - (time.monotonic() - start))
    out.write(b"".join(batch))
    out.flush()


main(int(sys.argv[1]), float(sys.argv[2]))
'''


def text_len(i: int) -> int:
    return len(str(i)) + 1 + (i * 37) % 151 + 20


# ---- the server and its memory -----------------------------------------------------------------

def start_server(tmp: pathlib.Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = {"ServerApp": {"jpserver_extensions": {"server_ext": True}, "port": port, "ip": "127.0.0.1",
                            "open_browser": False, "root_dir": str(tmp), "allow_root": True},
              "IdentityProvider": {"token": TOKEN},
              "MLPlatformApp": {"state_dir": str(tmp / "state"), "projects": [PROJECT]}}
    for name in ("config", "runtime", "data"):
        (tmp / name).mkdir()
    (tmp / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTER_DATA_DIR": str(tmp / "data")}
    log = open(tmp / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_server"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}"


async def wait_ready(session: aiohttp.ClientSession, url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited; see its server.log")
        try:
            async with session.get(f"{url}/api/status") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError("the server did not answer within 60 s")


class Rss:
    """VmRSS of one process, sampled every 50 ms in a thread: ``now()``, ``peak(since)`` (MB)."""

    def __init__(self, pid: int):
        self.path = pathlib.Path(f"/proc/{pid}/status")
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def read(self) -> float:
        for line in self.path.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.samples.append((time.monotonic(), self.read()))
            except OSError:
                return

    def peak(self, since: float) -> float:
        return max([mb for t, mb in self.samples if t >= since] + [self.read()])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def cpu_s(pid: int | None = None) -> float:
    if pid is None:
        return time.process_time()
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- the client ----------------------------------------------------------------------------------

@dataclass
class Stream:
    """What one or more SSE reads received."""
    counts: bytearray = field(default_factory=bytearray)  # counts[seq]: times received (saturating)
    lines: int = 0
    log_bytes: int = 0  # the lines' text + newline, as in the file
    wire_bytes: int = 0
    out_of_order: int = 0
    bad: int = 0
    keepalives: int = 0
    end: dict | None = None
    last: int = 0
    ttfb: float | None = None

    def see(self, seq: int, data: bytes) -> None:
        if seq >= len(self.counts):
            self.counts.extend(bytes(seq - len(self.counts) + (1 << 20)))
        if self.counts[seq] < 255:
            self.counts[seq] += 1
        if seq != self.last + 1:
            self.out_of_order += 1
        self.last = seq
        self.lines += 1
        at = data.find(b'"text": "')
        n = len(data) - at - 11  # the text, between `"text": "` and `"}`
        if (not data.startswith(b'{"seq": %d, ' % seq) or at < 0 or not data.endswith(b'"}')
                or not data.startswith(b"%d " % seq, at + 9) or n != text_len(seq)):
            self.bad += 1
        self.log_bytes += n + 1

    def tally(self, total: int) -> tuple[int, int]:
        """(lost, duplicated) against lines 1..total."""
        got = self.counts[1:total + 1].ljust(total, b"\0")
        lost = got.count(0)
        return lost, self.lines - (total - lost)


async def read_sse(session: aiohttp.ClientSession, url: str, stream: Stream, *, after: int | None = None,
                   stop_at: int | None = None, params: dict | None = None) -> None:
    """Read events into `stream`; disconnect once line `stop_at` is received."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    started = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    async with session.get(url, params=params or {}, headers=headers, timeout=timeout) as r:
        if r.status != 200:
            raise RuntimeError(f"GET {url}: {r.status} {await r.text()}")
        rest = b""
        async for chunk in r.content.iter_any():
            stream.wire_bytes += len(chunk)
            *blocks, rest = (rest + chunk).split(b"\n\n")
            for block in blocks:
                if block.startswith(b"id: "):
                    if stream.ttfb is None:
                        stream.ttfb = time.perf_counter() - started
                    nl = block.index(b"\n")
                    stream.see(int(block[4:nl]), block[nl + 7:])
                    if stop_at is not None and stream.last >= stop_at:
                        return  # leaving the block closes the connection mid-stream
                elif block.startswith(b"event: end"):
                    stream.end = json.loads(block.split(b"data: ", 1)[1])
                elif block.startswith(b":"):
                    stream.keepalives += 1


# ---- the modes -----------------------------------------------------------------------------------

@dataclass
class Row:
    mode: str
    seconds: float
    log_mb: float
    lines: int
    wire_mb: float | None = None
    rss: tuple[float, float, float] | None = None  # before, peak, after
    server_cpu: float | None = None
    client_cpu: float | None = None
    lost: int | None = None
    dup: int | None = None
    bad: int | None = None
    note: str = ""


class Bench:
    def __init__(self, session: aiohttp.ClientSession, url: str, pid: int, rss: Rss):
        self.session, self.url, self.pid, self.rss = session, url, pid, rss

    def jobs_url(self, *parts: str) -> str:
        return "/".join([f"{self.url}/ml/v1/projects/{PROJECT}/jobs", *parts])

    async def submit(self, job_id: str, pkg: pathlib.Path, size: int, rate: float = 0) -> None:
        body = {"jobId": job_id, "trainingInput": {"scaleTier": "BASIC", "pythonModule": "sselogbench.gen",
                                                   "packageUris": [pkg.as_uri()], "args": [str(size), str(rate)]}}
        async with self.session.post(self.jobs_url(), json=body) as r:
            if r.status != 200:
                raise RuntimeError(f"submit {job_id}: {r.status} {await r.text()}")

    async def job(self, job_id: str) -> dict:
        async with self.session.get(self.jobs_url(job_id)) as r:
            return await r.json()

    async def wait_done(self, job_id: str) -> dict:
        while (job := await self.job(job_id))["state"] not in ("SUCCEEDED", "FAILED", "CANCELLED"):
            await asyncio.sleep(0.1)
        return job

    async def measured(self, mode: str, run) -> tuple[Row, float]:
        """Run `run()` (a coroutine function) timed, with the server's RSS and both processes' CPU."""
        await asyncio.sleep(0.5)
        before, t_mono = self.rss.read(), time.monotonic()
        server, client = cpu_s(self.pid), cpu_s()
        t = time.perf_counter()
        result = await run()
        seconds = time.perf_counter() - t
        server, client = cpu_s(self.pid) - server, cpu_s() - client
        peak = self.rss.peak(t_mono)
        await asyncio.sleep(0.5)
        row = Row(mode, seconds, 0, 0, rss=(before, peak, self.rss.read()), server_cpu=server, client_cpu=client)
        return row, result

    def sse_row(self, row: Row, stream: Stream, total: int) -> Row:
        row.log_mb, row.lines, row.wire_mb = stream.log_bytes / MB, stream.lines, stream.wire_bytes / MB
        row.lost, row.dup = stream.tally(total)
        row.bad = stream.bad + stream.out_of_order
        return row


async def follow_mode(b: Bench, session: aiohttp.ClientSession, tmp: pathlib.Path, pkg: pathlib.Path,
                      job_id: str, size: int, rate: float) -> Row:
    """Submit a job writing `size` bytes at `rate` MB/s (0: unthrottled) and read it with follow=true at once."""
    follow = Stream()
    seen: dict = {}

    async def watch_end():
        seen.update(job=await b.wait_done(job_id), lines=follow.lines)

    async def run():
        await b.submit(job_id, pkg, size, rate * MB)
        watcher = asyncio.create_task(watch_end())
        await read_sse(session, b.jobs_url(job_id, "logs"), follow, params={"follow": "true"})
        await watcher

    pace = f"producer at {rate:g} MB/s" if rate else "producer unthrottled"
    row, _ = await b.measured(f"sse, follow, {pace}", run)
    total = read_disk(tmp / "state" / "jobs" / PROJECT / job_id / "master-replica-0.log")[1]
    b.sse_row(row, follow, total)
    lag = total - seen.get("lines", 0)
    job = seen.get("job") or {}
    row.note = (f"job {job.get('state')}; lines still to send when the job ended: {lag} "
                f"({100 * lag / max(total, 1):.0f} %); end event {follow.end}")
    return row


def read_disk(path: pathlib.Path) -> tuple[float, int, int]:
    t = time.perf_counter()
    lines = size = 0
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            lines += 1
            size += len(line)
    return time.perf_counter() - t, lines, size


async def main(mb: float, follow_rate: float) -> None:
    size = int(mb * MB)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sse-bench-"))
    pkg = tmp / "pkg" / "sselogbench"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gen.py").write_text(GENERATOR)
    proc, url = start_server(tmp)
    rss = Rss(proc.pid)
    rows: list[Row] = []
    notes: list[str] = []
    try:
        headers = {"Authorization": f"token {TOKEN}"}
        async with aiohttp.ClientSession(headers=headers) as session:
            await wait_ready(session, url, proc)
            b = Bench(session, url, proc.pid, rss)
            notes.append(f"server RSS when ready: {rss.read():.1f} MB")

            # the producer alone: a job whose log is read once it has finished
            t = time.perf_counter()
            await b.submit("done", pkg, size)
            job = await b.wait_done("done")
            produced = time.perf_counter() - t
            log_path = tmp / "state" / "jobs" / PROJECT / "done" / "master-replica-0.log"
            notes.append(f"producer: job {job['state']} in {produced:.1f} s (submit to end, "
                         f"{os.path.getsize(log_path) / MB / produced:.1f} MB/s)")
            seconds, total, chars = read_disk(log_path)
            rows.append(Row("disk, line by line", seconds, chars / MB, total))

            sse = b.jobs_url("done", "logs")
            stream = Stream()
            row, _ = await b.measured("sse, done job", lambda: read_sse(session, sse, stream))
            rows.append(b.sse_row(row, stream, total))
            if stream.end != {"state": "SUCCEEDED"}:
                notes.append(f"sse, done job: end event {stream.end}")

            halves = Stream()
            second = Stream()

            async def resume():
                await read_sse(session, sse, halves, stop_at=total // 2)
                second.last = halves.last
                await read_sse(session, sse, second, after=halves.last)
                return halves.last

            row, cut = await b.measured("sse, resume at 50 %", resume)
            merged = Stream(counts=bytearray(min(a + c, 255) for a, c in zip(halves.counts.ljust(total + 1, b"\0"),
                                                                   second.counts.ljust(total + 1, b"\0"))),
                            lines=halves.lines + second.lines, log_bytes=halves.log_bytes + second.log_bytes,
                            wire_bytes=halves.wire_bytes + second.wire_bytes,
                            out_of_order=halves.out_of_order + second.out_of_order, bad=halves.bad + second.bad)
            rows.append(b.sse_row(row, merged, total))
            rows[-1].note = f"cut after line {cut}; resume ttfb {second.ttfb or 0:.3f} s"

            # follow=true from the submission, while the job writes: as fast as it can, then throttled
            for job_id, rate in (("follow", 0.0), ("follow_paced", follow_rate)):
                rows.append(await follow_mode(b, session, tmp, pkg, job_id, size, rate))

            # the contents API: the whole file as one JSON model
            rel = log_path.relative_to(tmp).as_posix()

            async def contents():
                n = 0
                async with session.get(f"{url}/api/contents/{rel}", params={"type": "file", "format": "text",
                                                                            "content": "1"}) as r:
                    async for chunk in r.content.iter_any():
                        n += len(chunk)
                    return r.status, n

            row, (status, n) = await b.measured("contents API", contents)
            row.log_mb, row.lines, row.wire_mb = os.path.getsize(log_path) / MB, total, n / MB
            row.note = f"HTTP {status}"
            rows.append(row)
    finally:
        rss.stop()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    report(mb, rows, notes)
    shutil.rmtree(tmp, ignore_errors=True)


def report(mb: float, rows: list[Row], notes: list[str]) -> None:
    print(f"\njob log of {mb:g} MB, server in its own process (local backend), aiohttp client, "
          f"{os.cpu_count()} CPUs\n")
    print(f"{'mode':34} {'s':>7} {'log MB/s':>9} {'lines/s':>10} {'wire MB':>8} {'RSS before/peak/after MB':>25} "
          f"{'growth':>7} {'srv CPU':>7} {'cli CPU':>7} {'lost':>5} {'dup':>5} {'bad':>5}")
    for r in rows:
        rss = f"{r.rss[0]:.0f} / {r.rss[1]:.0f} / {r.rss[2]:.0f}" if r.rss else "-"
        growth = f"{r.rss[1] - r.rss[0]:.1f}" if r.rss else "-"
        opt = lambda v, f="{:.1f}": "-" if v is None else f.format(v)  # noqa: E731
        print(f"{r.mode:34} {r.seconds:7.2f} {r.log_mb / r.seconds:9.1f} {r.lines / r.seconds:10.0f} "
              f"{opt(r.wire_mb):>8} {rss:>25} {growth:>7} {opt(r.server_cpu):>7} {opt(r.client_cpu):>7} "
              f"{opt(r.lost, '{}'):>5} {opt(r.dup, '{}'):>5} {opt(r.bad, '{}'):>5}")
        if r.note:
            print(f"{'':34}   {r.note}")
    for note in notes:
        print(note)
    print("(log MB/s counts the log's bytes (text + newline), wire MB the HTTP body; growth = peak RSS - RSS "
          "before; bad = events out of order or whose seq/text differ from the line written)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="the log's size in MB (10^6 bytes)")
    parser.add_argument("--follow-rate", type=float, default=5.0,
                        help="MB/s the producer writes at in the paced follow mode")
    options = parser.parse_args()
    asyncio.run(main(options.mb, options.follow_rate))
