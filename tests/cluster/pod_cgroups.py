"""A cgroup (v2) per pod of the test cluster, so that a socket says which pod made it (a test tool,
not a product part; used by `netpol.py` to filter the pods' traffic).

The kubelet makes each pod's cgroup, `<mount>/mlplatform-pods-<B>/<pod uid>`, before the pod's first
process (`PodCgroups.make`), starts every container through `enter` (the process and its children
are in the pod's cgroup) and removes it when the pod is gone. `available()` says why that cannot be
done here (not root, no `nft`, no cgroup v2 under /sys/fs/cgroup, no cgroup of our own can be made,
nftables refused), so the cluster runs without enforcement and logs that once.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import subprocess

log = logging.getLogger("tests.cluster.netpol")

CGROUP_FS = pathlib.Path("/sys/fs/cgroup")


def cgroup2_mount() -> pathlib.Path | None:
    """Where the cgroup v2 hierarchy is mounted, if under /sys/fs/cgroup (nft names paths from there)."""
    try:
        mounts = pathlib.Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            path = pathlib.Path(parts[1])
            if path == CGROUP_FS or CGROUP_FS in path.parents:
                return path
    return None


def available() -> str | None:
    """None when pods' traffic can be filtered here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("nft"):
        return "no `nft` (apt-get install nftables)"
    mount = cgroup2_mount()
    if mount is None:
        return "no cgroup v2 hierarchy under /sys/fs/cgroup"
    probe_dir = mount / f"mlplatform-probe-{os.getpid()}"
    try:  # a cgroup of our own can be made here (not so in some containers)
        probe_dir.mkdir(exist_ok=True)
        probe_dir.rmdir()
    except OSError as e:
        return f"cannot make a cgroup under {mount} ({e.strerror})"
    probe = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"nftables refused: {probe.stderr.strip()}"
    return None


class PodCgroups:
    """One cgroup per pod under the cluster's own base cgroup; the kubelet starts each container
    through `enter(uid, argv)` so that the process (and every child) is in its pod's cgroup."""

    def __init__(self, block: str):
        self.mount = cgroup2_mount()
        assert self.mount is not None
        self.base = self.mount / f"mlplatform-pods-{block.replace('.', '-')}"
        self.base.mkdir(exist_ok=True)
        self.depth = len(self.base.relative_to(self.mount).parts)  # the base's level in the hierarchy

    def path(self, uid: str) -> pathlib.Path:
        return self.base / uid

    def nft_name(self, path: pathlib.Path) -> str:
        return str(path.relative_to(CGROUP_FS))

    def make(self, uid: str) -> None:
        self.path(uid).mkdir(exist_ok=True)

    def enter(self, uid: str, argv: list[str]) -> list[str]:
        """`argv` started in the pod's cgroup (`sh` writes its own pid there, then execs)."""
        procs = self.path(uid) / "cgroup.procs"
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]

    def remove(self, uid: str) -> None:
        try:
            self.path(uid).rmdir()
        except OSError:  # a process still in it (ending); `close` tries again
            pass

    def close(self) -> None:
        for child in self.base.iterdir() if self.base.exists() else ():
            if child.is_dir():
                try:
                    child.rmdir()
                except OSError as e:
                    log.warning("pod cgroup %s left: %s", child, e)
        try:
            self.base.rmdir()
        except OSError:
            pass
