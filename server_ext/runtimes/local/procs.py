"""Replica processes of local jobs, and the files they leave next to each other (``<task>.log``,
``<task>.stamps``, ``<task>.exit``).

- `start_replica`: runs an argv in a new session (its own process group, so the whole tree can
  be signalled) with umask ``077`` (what it writes is its OS user's only), under a ``/bin/sh``
  wrapper that writes the exit status to the exit file when the program ends — so the status is
  known even to a server that started later. The write is atomic (``<task>.exit.tmp``, then a
  rename) and always completed: the wrapper catches SIGTERM/SIGINT/SIGHUP while the program runs
  (the program, in the same process group, still gets them, with their default action) and
  ignores them while it writes the marker, so stopping a job as its program ends cannot leave the
  marker half written (only SIGKILL can, and the reader copes). The recorded pid is the wrapper's;
  its group holds the program.
- The program's stdout and stderr are two pipes read by a tagger between the wrapper and the
  program (`_TAG`, stdlib-only Python run by this server's interpreter; it outlives SIGTERM and
  friends until the pipes are read, and exits with the program's status, 128+N for signal N, as
  the shell reported it before). It appends each line, as it reads it, to the log (created
  ``0600``; plain text, both streams, each in its own order and the two in the order read: lines
  written to both within the same instant may come either way), first appending to
  ``<task>.stamps`` the line's record ``<byte offset of the line in the log> <time> <stream>``
  (time RFC 3339 UTC with microseconds and ``Z``, when the line was read; stream
  ``stdout``/``stderr``). A line longer than 64 KiB is cut into pieces of that size (each a line);
  a last line without its newline gets one. It ends when both pipes are read to their end, or 2 s
  after the program ended if a process it left holds them.
- `read_exit` reads the marker, or a ``.exit.tmp`` left complete by a wrapper killed (SIGKILL)
  before its rename; an empty or partial file is no status. `Replica.ended_by_itself` says
  whether the program has ended (its marker exists) while the wrapper may still be finishing.
- `Replica.alive` is true only for the very process that was started: same pid, same start time
  (``/proc/<pid>/stat``), same boot, not a zombie. A reused pid is therefore never taken for a
  replica, and `Replica.signal` never signals a process group that is not the replica's.
- `stop(replicas, grace_s)`: SIGTERM to every group still there, SIGKILL after `grace_s`, and
  waits until they are gone (bounded); the pids that outlived SIGKILL are returned.
- `wait_any(replicas, event, timeout)`: returns as soon as a replica this server started exits or
  `event` is set, else after `timeout` (adopted replicas can only be polled).
- `read_log`: a log as `LogLine`s numbered from 1 (see `backend`): a line is sent only once it is
  complete (or its task ended), so a reader resuming ``after`` a seq never sees a line change.
  Each line gets the ``time`` and ``stream`` its stamp records; a line without one (pip's output
  and the notes written before the program started, a log of an older version) has None for both.
  Stamps are read only as far as the lines read need, so memory stays bounded for any log.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import os
import pathlib
import signal
import sys
from collections import deque
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterable, Mapping, Sequence

from hub_ext.local.files import PRIVATE_UMASK, private_opener
from server_ext.jobs.backend import LogLine

# $0 is the exit file, "$@" the tagger and the replica's argv: run it, then record its status atomically. The
# trap keeps the wrapper alive through a stop's SIGTERM until the marker is in place: caught while the program
# runs (the shell runs the handler only after the foreground program ended; the program gets the signal from
# its process group, with its default action), then ignored while the marker is written (by `mv` too). The
# program runs in a subshell with the log as stderr while the wrapper's own stderr is /dev/null: the shell's
# "Terminated" for a program stopped by a signal never reaches the log.
_WRAP = ('trap : TERM INT HUP; exec 3>&2 2>/dev/null; (exec 2>&3 3>&-; exec "$@"); c=$?; trap "" TERM INT HUP; '
         'printf "%s\\n" "$c" > "$0.tmp" && mv -f "$0.tmp" "$0"; exit "$c"')
# argv: stamps file, the replica's argv; fd 1 is the log (opened for appending). Signals that stop a job are
# caught and ignored (the program, in the same process group, gets them with their default action), so the
# tagger reads the pipes to their end. A line's stamp is written before the line: a reader that has read a
# line finds its stamp.
_TAG = r"""
import os, selectors, signal, subprocess, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, lambda *_: None)
stamps_path, argv = sys.argv[1], sys.argv[2:]
stamps = os.open(stamps_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
LIMIT = 1 << 16

def write(fd, data):
    while data:
        data = data[os.write(fd, data):]

def put(name, line):
    sec, us = divmod(time.time_ns() // 1000, 1000000)
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + ".%06dZ" % us
    write(stamps, b"%d %s %s\n" % (os.lseek(1, 0, os.SEEK_END), when.encode(), name))
    write(1, line + b"\n")

try:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
except OSError as e:
    put(b"stderr", ("%s: %s" % (argv[0] if argv else "", e.strerror)).encode())
    code = 126 if isinstance(e, PermissionError) else 127
else:
    sel = selectors.DefaultSelector()
    pending = {}
    for name, pipe in ((b"stdout", child.stdout), (b"stderr", child.stderr)):
        sel.register(pipe.fileno(), selectors.EVENT_READ, name)
        pending[name] = b""
    ended_at = None
    while len(sel.get_map()):
        if child.poll() is not None:
            ended_at = ended_at or time.monotonic()
            if time.monotonic() - ended_at > 2:
                break
        for key, _ in sel.select(1.0):
            data, name = os.read(key.fd, LIMIT), key.data
            if not data:
                sel.unregister(key.fd)
                continue
            *lines, rest = (pending[name] + data).split(b"\n")
            for line in lines:
                put(name, line)
            while len(rest) >= LIMIT:
                put(name, rest[:LIMIT])
                rest = rest[LIMIT:]
            pending[name] = rest
    for name, rest in pending.items():
        if rest:
            put(name, rest)
    code = child.wait()
    code = 128 - code if code < 0 else code
sys.exit(code)
"""
_CHUNK = 1 << 16


@functools.cache
def boot_id() -> str:
    try:
        return pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of a process, or None if there is none."""
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[19])


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _status(path: pathlib.Path) -> int | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    if not text.endswith("\n"):  # being written
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def stamps_path(log_path: pathlib.Path) -> pathlib.Path:
    """``<task>.stamps`` beside ``<task>.log``: each line's offset, time and stream."""
    return log_path.with_suffix(".stamps")


def tagged(log_path: pathlib.Path, argv: Sequence[str]) -> list[str]:
    """`argv` run under the tagger: its stdout and stderr lines go to fd 1 (the log, opened for
    appending) with their stamps in `stamps_path` (as a replica's are)."""
    return [sys.executable, "-I", "-S", "-c", _TAG, str(stamps_path(log_path)), *argv]


def note(log_path: pathlib.Path, text: str) -> None:
    """Append the platform's own line `text` to the log, stamped now as stdout."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with open(log_path, "ab", opener=private_opener) as out:
        offset = out.seek(0, os.SEEK_END)
        with open(stamps_path(log_path), "ab", opener=private_opener) as stamps:
            stamps.write(b"%d %s stdout\n" % (offset, when.encode()))
        out.write(text.encode() + b"\n")


def tmp_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + ".tmp")


def read_exit(path: pathlib.Path) -> int | None:
    """The exit status in the marker `path` (or its complete ``.tmp``); None where there is none."""
    code = _status(path)
    return code if code is not None else _status(tmp_path(path))


@dataclass
class Replica:
    task: str
    pid: int  # the wrapper's pid, which is also the process group id
    start: int | None
    boot: str
    exit_path: pathlib.Path
    process: asyncio.subprocess.Process | None = None  # None: adopted from an earlier server
    code: int | None = None  # once ended: the exit status (None: unknown)
    ended: bool = False

    @classmethod
    def adopt(cls, task: str, info: Mapping, exit_path: pathlib.Path) -> "Replica":
        """From `state()` as stored; a replica never started (no pid) is ended with an unknown status."""
        pid = int(info.get("pid") or 0)
        return cls(task, pid, info.get("start"), info.get("boot", ""), exit_path, code=info.get("exit"),
                   ended="exit" in info or not pid)

    def state(self) -> dict:
        out = {"pid": self.pid, "start": self.start, "boot": self.boot}
        if self.ended:
            out["exit"] = self.code
        return out

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.returncode is None
        if not self.pid or self.boot != boot_id():
            return False
        stat = _proc_stat(self.pid)
        return stat is not None and stat[1] == self.start and stat[0] not in ("Z", "X")

    def gone(self) -> bool:
        """Ended, and (for a process this server started) nothing is left in its group."""
        if self.process is not None:
            return self.process.returncode is not None and not _group_exists(self.pid)
        return not self.alive()

    def signal(self, sig: signal.Signals) -> None:
        if self.process is None and not self.alive():
            return  # never signal a group we cannot prove is ours
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    async def finish(self) -> int | None:
        """Mark ended (after `alive` turned false); the exit status, None where it is unknown."""
        self.ended = True
        if self.process is not None:
            self.code = self.process.returncode
        else:
            self.code = await asyncio.to_thread(read_exit, self.exit_path)
        return self.code

    def ended_by_itself(self) -> int | None:
        """The program's exit status once its wrapper recorded it (the wrapper itself may still be
        finishing); None while it runs. Blocking (a file read)."""
        if self.ended:
            return self.code
        return read_exit(self.exit_path)


async def start_replica(task: str, argv: Sequence[str], env: Mapping[str, str], cwd: pathlib.Path,
                        log_path: pathlib.Path, exit_path: pathlib.Path) -> Replica:
    with open(log_path, "ab", opener=private_opener) as out:
        process = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", _WRAP, str(exit_path), *tagged(log_path, argv), stdin=asyncio.subprocess.DEVNULL, stdout=out,
            stderr=asyncio.subprocess.STDOUT, env=dict(env), cwd=cwd, start_new_session=True, umask=PRIVATE_UMASK)
    stat = _proc_stat(process.pid)
    return Replica(task, process.pid, stat[1] if stat else None, boot_id(), exit_path, process)


async def stop(replicas: Iterable[Replica], grace_s: float) -> list[int]:
    loop = asyncio.get_running_loop()
    replicas = list(replicas)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        left = [r for r in replicas if not r.gone()]
        if not left:
            return []
        for r in left:
            r.signal(sig)
        deadline = loop.time() + wait_s
        while any(not r.gone() for r in left) and loop.time() < deadline:
            await asyncio.sleep(0.05)
    return [r.pid for r in replicas if not r.gone()]


async def wait_any(replicas: Iterable[Replica], event: asyncio.Event, timeout: float) -> None:
    waits = [asyncio.ensure_future(event.wait())]
    waits += [asyncio.ensure_future(r.process.wait()) for r in replicas if r.process is not None and not r.ended]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def read_chunk(path: pathlib.Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(_CHUNK)
    except FileNotFoundError:
        return b""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


class _Stamps:
    """The records of ``<task>.stamps``, read in step with the log (both are in offset order)."""

    def __init__(self, path: pathlib.Path):
        self.path, self.offset, self.partial = path, 0, b""
        self.records: deque[tuple[int, str, str]] = deque()

    async def reach(self, start: int) -> None:
        """Read records until one at or beyond log offset `start` (or the file's end)."""
        while not self.records or self.records[-1][0] < start:
            chunk = await asyncio.to_thread(read_chunk, self.path, self.offset)
            if not chunk:
                return
            self.offset += len(chunk)
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            for raw in lines:
                parts = raw.decode("ascii", "replace").split(" ")
                if len(parts) == 3 and parts[0].isdigit() and parts[2] in ("stdout", "stderr"):
                    self.records.append((int(parts[0]), parts[1], parts[2]))

    def take(self, start: int) -> tuple[str | None, str | None]:
        """(time, stream) of the log line starting at byte `start`; (None, None) when it has no stamp."""
        while self.records and self.records[0][0] < start:
            self.records.popleft()
        if self.records and self.records[0][0] == start:
            _, when, stream = self.records.popleft()
            return when, stream
        return None, None


async def read_log(path: pathlib.Path, task: str, after: int, follow: bool, ended: Callable[[], bool],
                   poll_s: float) -> AsyncIterator[LogLine]:
    """The lines after `after`; with `follow`, until `ended()` and the file is read to its end."""
    offset, seq, pending, start = 0, 0, b"", 0  # start: the byte offset of `pending`'s line
    stamps = _Stamps(stamps_path(path))
    while True:
        done = ended()  # asked before reading: whatever was written before it ended is still read
        chunk = await asyncio.to_thread(read_chunk, path, offset)
        if chunk:
            offset += len(chunk)
            *lines, rest = (pending + chunk).split(b"\n")
            if lines:  # the stamps are read after the lines: a line's stamp is written before it
                await stamps.reach(offset - len(rest) - len(lines[-1]) - 1)
            for raw in lines:
                seq += 1
                when, stream = stamps.take(start)
                start += len(raw) + 1
                if seq > after:
                    yield LogLine(seq, task, _text(raw), when, stream)
            pending = rest
            continue
        if done or not follow:
            if done and pending and seq + 1 > after:
                await stamps.reach(start)
                yield LogLine(seq + 1, task, _text(pending), *stamps.take(start))
            return
        await asyncio.sleep(poll_s)
