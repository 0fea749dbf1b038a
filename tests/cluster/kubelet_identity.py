"""Who a container of the tests' kubelet runs as (a test tool, not a product part).

As a kubelet does: the user is the container's `securityContext.runAsUser`, else the pod's, else the
image's (the image table's ``user``; 0 for every image it does not say otherwise of), and the group
`runAsGroup` likewise (else the image's ``group``, 0); the pod's `fsGroup` and `supplementalGroups` are supplementary groups.
`runAsNonRoot: true` with a user of 0 is refused before anything starts (`NonRootRefused`, the
kubelet's CreateContainerConfigError ``container has runAsNonRoot and image will run as root``).

A process that is not root runs through `setpriv` with those ids. Since pods here share the host's
filesystem, the kubelet gives it what a container runtime would (`give_access`): its pod's own
directory (home, emptyDirs, Secret/ConfigMap/projected files) owned by it and closed to others
(0700: another pod's user cannot enter it, as it could not see into another container), and each claim's directory
group-owned by `fsGroup` with group write and setgid, as a kubelet applies `fsGroup` to a volume that
supports ownership management (without `fsGroup` a claim is left as it is: not writable, as on a
node). Directories on the way (the kubelet's work directory, the interpreter's) get search permission
(``g+x,o+x``: traverse, not list; group too, since a user of group 0 is judged by the group's bits
on root's directories), checked at every pod start, not once: another pytest run on the machine
closes ``/tmp/pytest-of-<user>`` again (pytest keeps it 0700 at each session's start), and every
later non-root pod of a run beside it would otherwise meet "Permission denied".
"""

from __future__ import annotations

import logging
import os
import pathlib
import stat
from dataclasses import dataclass

log = logging.getLogger("tests.cluster.kubelet")


class NonRootRefused(LookupError):
    """runAsNonRoot with a root user: the container is not started (CreateContainerConfigError)."""


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    @property
    def root(self) -> bool:
        return self.uid == 0

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run as this identity (unchanged for root: the kubelet's own)."""
        if self.root and self.gid == 0 and not self.groups:
            return argv
        groups = f"--groups={','.join(map(str, self.groups))}" if self.groups else "--clear-groups"
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", groups, "--", *argv]


def identity(pod: dict, container: dict, image_user: int = 0, image_group: int = 0) -> Identity:
    pod_sc = pod["spec"].get("securityContext") or {}
    sc = container.get("securityContext") or {}

    def pick(key: str, default):
        for context in (sc, pod_sc):  # the container's setting wins over the pod's
            if context.get(key) is not None:
                return context[key]
        return default
    uid, gid = int(pick("runAsUser", image_user)), int(pick("runAsGroup", image_group))
    if pick("runAsNonRoot", False) and uid == 0:
        meta = pod["metadata"]
        raise NonRootRefused(f'container has runAsNonRoot and image will run as root (pod: '
                             f'"{meta["name"]}_{meta["namespace"]}({meta["uid"]})", container: {container["name"]})')
    groups = [pod_sc["fsGroup"]] if pod_sc.get("fsGroup") is not None else []
    groups += [g for g in pod_sc.get("supplementalGroups") or [] if g not in groups]
    return Identity(uid, gid, tuple(int(g) for g in groups))


def traversable(path: pathlib.Path) -> None:
    """Every directory above `path` searchable by others (the host's own modes otherwise kept)."""
    for d in pathlib.Path(os.path.realpath(path)).parents:
        mode = d.stat().st_mode
        if not mode & stat.S_IXOTH or not mode & stat.S_IXGRP:  # group too: a user of group 0 is judged by it
            os.chmod(d, stat.S_IMODE(mode) | stat.S_IXOTH | stat.S_IXGRP)
            log.info("test kubelet: %s made searchable (g+x, o+x) for pods that do not run as root", d)


def _tree(top: pathlib.Path):
    """`top` and every directory and file under it."""
    for d, dirs, files in os.walk(top):
        yield d
        yield from (os.path.join(d, f) for f in dirs + files)


def chown_tree(top: pathlib.Path, uid: int, gid: int) -> None:
    for name in _tree(top):
        os.lchown(name, uid, gid)


def give_access(who: Identity, pod_root: pathlib.Path, claims: list[pathlib.Path], fs_group: int | None) -> None:
    """What a container runtime gives a container that does not run as root (see the docstring)."""
    if who.root:
        return
    traversable(pod_root)
    chown_tree(pod_root, who.uid, who.gid if fs_group is None else fs_group)
    os.chmod(pod_root, 0o700)  # the pod's own: no other pod's user enters it (pods share the host's files)
    if fs_group is None:
        return
    for claim in claims:
        if len(claim.parts) < 4:  # never a system directory, whatever a volume names
            continue
        traversable(claim)
        for name in _tree(claim):
            if os.path.islink(name):
                continue
            os.lchown(name, -1, fs_group)
            mode = stat.S_IMODE(os.lstat(name).st_mode)
            extra = stat.S_IXGRP | stat.S_ISGID if os.path.isdir(name) else 0
            os.chmod(name, mode | stat.S_IRGRP | stat.S_IWGRP | extra)
