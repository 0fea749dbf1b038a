"""Each log line's time and stream (issue 20, item 6: stream-logs' empty time column and INFO for
stderr): the local runtime's log and stamps files read back as `LogLine`s (`local_procs.read_log`),
with lines that have no stamp (pip's output, an older log) left without time or stream, and a
resumed read (``after``) giving the same lines; a Kubernetes log line read with ``timestamps=true``
split into its time and text (`job_logs.timed`)."""

from __future__ import annotations

import pathlib

import pytest

from server_ext.jobs.backend import LogLine
from server_ext.runtimes.kube.job_logs import timed
from server_ext.runtimes.local.procs import read_log, stamps_path

pytestmark = pytest.mark.unit


def write(log: pathlib.Path, lines: list[tuple[str, str | None, str | None]], tail: str = "") -> None:
    """The files a tagger leaves: `lines` are (text, time, stream); a stamp only where time is given."""
    data, stamps = b"", b""
    for text, when, stream in lines:
        if when is not None:
            stamps += f"{len(data)} {when} {stream}\n".encode()
        data += text.encode() + b"\n"
    log.write_bytes(data + tail.encode())
    stamps_path(log).write_bytes(stamps)


async def read(log: pathlib.Path, after: int = 0, ended: bool = True) -> list[LogLine]:
    return [line async for line in read_log(log, "master-replica-0", after, False, lambda: ended, 0.01)]


async def test_lines_carry_their_stamps_and_unstamped_lines_none(tmp_path):
    log = tmp_path / "master-replica-0.log"
    write(log, [("Installing trainer-0.1.tar.gz into /state/site", None, None),
                ("Successfully installed trainer-0.1", None, None),
                ("epoch 1/2 loss=0.52", "2026-12-04T03:20:01.100000Z", "stdout"),
                ("UserWarning: learning rate 0.9 is high", "2026-12-04T03:20:01.200000Z", "stderr"),
                ("", "2026-12-04T03:20:01.300000Z", "stdout"),
                ("epoch 2/2 loss=0.31", "2026-12-04T03:20:02.000000Z", "stdout")],
          tail="Traceback (most recent call last):")
    tail_at = len(log.read_bytes()) - len("Traceback (most recent call last):")
    stamps_path(log).write_bytes(stamps_path(log).read_bytes() + f"{tail_at} 2026-12-04T03:20:02.500000Z stderr\n".encode())
    lines = await read(log)
    assert [(line.seq, line.text, line.time, line.stream) for line in lines] == [
        (1, "Installing trainer-0.1.tar.gz into /state/site", None, None),
        (2, "Successfully installed trainer-0.1", None, None),
        (3, "epoch 1/2 loss=0.52", "2026-12-04T03:20:01.100000Z", "stdout"),
        (4, "UserWarning: learning rate 0.9 is high", "2026-12-04T03:20:01.200000Z", "stderr"),
        (5, "", "2026-12-04T03:20:01.300000Z", "stdout"),
        (6, "epoch 2/2 loss=0.31", "2026-12-04T03:20:02.000000Z", "stdout"),
        (7, "Traceback (most recent call last):", "2026-12-04T03:20:02.500000Z", "stderr")]
    assert await read(log, after=3) == lines[3:]  # a resumed stream: the same lines, stamps included
    assert await read(log, ended=False) == lines[:6]  # a line still being written is not sent


async def test_a_log_without_stamps_reads_as_before(tmp_path):
    log = tmp_path / "master-replica-0.log"
    log.write_text("an older version's log\nstderr and stdout merged\n")
    assert await read(log) == [LogLine(1, "master-replica-0", "an older version's log"),
                               LogLine(2, "master-replica-0", "stderr and stdout merged")]


async def test_stamps_are_read_in_step_for_a_long_log(tmp_path):
    log = tmp_path / "master-replica-0.log"
    write(log, [(f"step {i}" + "x" * (i % 50), f"2026-12-04T03:20:{i % 60:02d}.000000Z",
                 ("stdout", "stderr")[i % 3 == 0]) for i in range(20000)])
    lines = await read(log, after=19990)
    assert [line.seq for line in lines] == list(range(19991, 20001))
    assert all(line.text.startswith(f"step {line.seq - 1}") for line in lines)
    assert [line.stream for line in lines] == [("stdout", "stderr")[(s - 1) % 3 == 0] for s in range(19991, 20001)]


def test_a_kubernetes_timestamped_line_gives_its_time_and_text():
    assert timed(b"2026-12-04T03:20:01.123456789Z epoch 1 loss=0.5\n") == ("2026-12-04T03:20:01.123456789Z",
                                                                          "epoch 1 loss=0.5")
    assert timed(b"2026-12-04T03:20:01Z \n") == ("2026-12-04T03:20:01Z", "")
    assert timed(b"no timestamp here\n") == (None, "no timestamp here")  # not a time: the line as it is
