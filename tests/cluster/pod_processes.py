"""The processes of the tests' kubelet's pods (a test tool): a pod's sandbox (a PID and mount
namespace whose PID 1 is a pause process, `kubelet_process.py` says when), the pump of a
container's output into its log, and signals to a container's process group.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal


class Sandbox:
    """A pod's PID + mount namespace whose PID 1 is a pause process (see `kubelet_process`'s docstring)."""

    def __init__(self, proc, init_pid: int):
        self.proc, self.init_pid = proc, init_pid

    @classmethod
    async def start(cls, timeout: float = 10) -> "Sandbox":
        proc = await asyncio.create_subprocess_exec(
            "unshare", "--pid", "--mount", "--fork", "--mount-proc", "--propagation", "private", "sleep", "infinity",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True)
        children = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while True:
                try:
                    pid = children.read_text().split()
                    # ready once the namespace's own /proc is mounted: unshare's child mounts it after
                    # the fork, then execs sleep. A container entering the mount namespace before that
                    # copies the host's /proc, where Katib's collector takes kthreadd (host pid 2, ppid
                    # 0) for the trial's process and waits for it to end: the trial never ends
                    ready = bool(pid) and pathlib.Path(f"/proc/{pid[0]}/root/proc/1/cmdline").read_bytes(
                    ).startswith(b"sleep\0")
                except OSError:
                    pid, ready = [], False
                if ready:
                    return cls(proc, int(pid[0]))
                if proc.returncode is not None or asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError("the pod sandbox (unshare --pid --mount --fork) did not start")
                await asyncio.sleep(0.02)
        except BaseException:  # also when cancelled: no sandbox left behind
            signal_group(proc, signal.SIGKILL)
            raise

    def kill(self) -> None:
        try:
            os.kill(self.init_pid, signal.SIGKILL)  # the namespace's init: everything in it ends
        except ProcessLookupError:
            pass
        signal_group(self.proc, signal.SIGKILL)


async def pump(proc, clog) -> None:
    """The container's output into its log, a line at a time; a line longer than the stream's buffer
    (64 KiB) is logged in parts, as a kubelet splits long lines (else the pump stopped and the
    container blocked on a full pipe for ever)."""
    reader = proc.stdout
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:  # the end, maybe after a last line with no newline
            if e.partial:
                clog.append(e.partial.decode(errors="replace"))
            break
        except asyncio.LimitOverrunError as e:
            line = await reader.readexactly(e.consumed)
        clog.append(line.decode(errors="replace").rstrip("\n"))


def signal_group(proc, sig) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
