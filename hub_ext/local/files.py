"""The local runtime's files on disk.

Projects as directories: ``<projects_dir>/<project>/credentials/`` holds ``<name>.json``
(gcp-credential) and ``<name>.aws`` (aws-credential) files; ``<projects_dir>/<project>/datasets/<name>/``
are dataset directories. Reading only names and types; file contents are never read here.

Owner-only state: the local runtime's state (the demo's config with its passwords, the cookie
secret, the hub database, device allocations, job records and logs, project credentials) is
readable by its OS user only. `private_dir` makes a directory ``0700`` (and its missing parents);
`private_opener` creates a file ``0600``; `tighten` takes group and other bits off everything under
a directory that an earlier run (or an older version) left open, without following symbolic
links, and answers what it could not tighten (files of another OS user). `PRIVATE_UMASK` is the
umask of every process the local runtime starts.
"""

from __future__ import annotations

import os
import pathlib
import stat

from hub_ext.core.mounts import Available, Credential, Dataset

_SUFFIX_TYPES = {".json": "gcp-credential", ".aws": "aws-credential"}


def project_files(projects_dir: str | pathlib.Path, project: str) -> Available:
    root = pathlib.Path(projects_dir) / project
    creds = []
    cred_dir = root / "credentials"
    if cred_dir.is_dir():
        for path in sorted(cred_dir.iterdir()):
            kind = _SUFFIX_TYPES.get(path.suffix)
            if kind and path.is_file():
                creds.append(Credential(path.stem, kind, str(path)))
    datasets = []
    ds_dir = root / "datasets"
    if ds_dir.is_dir():
        datasets = [Dataset(p.name, str(p)) for p in sorted(ds_dir.iterdir()) if p.is_dir()]
    return Available(tuple(creds), tuple(datasets))


PRIVATE_UMASK = 0o077
_OPEN_BITS = 0o077  # group and others


def private_dir(path: str | os.PathLike) -> pathlib.Path:
    """`path` as a directory only its owner can enter (missing parents are made ``0700`` too)."""
    path = pathlib.Path(path)
    missing = []
    for p in (path, *path.parents):
        if p.exists():
            break
        missing.append(p)
    for p in reversed(missing):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another process: left to the check below
            continue
        os.chmod(p, 0o700)  # mkdir's mode is reduced by the umask, never raised by it
    st = path.stat()
    if st.st_mode & _OPEN_BITS and st.st_uid == os.geteuid():
        os.chmod(path, 0o700)
    return path


def private_opener(path: str | os.PathLike, flags: int) -> int:
    """``open(path, mode, opener=private_opener)``: a file created ``0600`` whatever the umask
    (an existing file keeps its mode: `tighten` is for those)."""
    return os.open(path, flags, 0o600)


def tighten(root: str | os.PathLike) -> list[str]:
    """Take group and other permission bits off `root` and everything under it (symbolic links are
    neither followed nor changed). Returns the paths it could not change (another user's)."""
    root = pathlib.Path(root)
    left: list[str] = []

    def fix(path: str) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & _OPEN_BITS:
            return
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~_OPEN_BITS)
        except PermissionError:
            left.append(path)

    if not root.exists():
        return left
    fix(str(root))
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            fix(os.path.join(dirpath, name))
    return left
