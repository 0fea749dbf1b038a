"""The dataset loader's decisions, pure: which file each object becomes, whether two objects
collide, what must be copied and what is already there, and the counters the copying threads share
(`load` runs the program; `load_dir` and `load_storage` do the I/O).

Guarantees:

- `relative_path`: the prefix names a folder, so ``s3://b/images`` gives ``images/a.jpg`` the file
  ``a.jpg`` (never ``images-old/…``); a folder marker (a key ending in ``/``) has no file; a key
  that is not a safe relative path (an empty, ``.`` or ``..`` segment, a NUL) or whose first
  segment starts with ``.mlplatform-`` (`RESERVED`: the loader's own names) is `LoadError` BadKey,
  naming the key;
- `check_paths`: an object whose file would be another's folder is `LoadError` BadKey;
- `plan`: an object is kept only when its file has the object's size and the manifest records the
  object's size and ETag/MD5 for it; every other object is copied;
- `LoadError.permanent`: a retry cannot help (`PERMANENT` reasons);
- `Progress`: thread-safe counters (objects and bytes done, the manifest's entries); ``done``
  reports every byte.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterable, Mapping

RESERVED = ".mlplatform-"
PERMANENT = frozenset({"AccessDenied", "NotFound", "BadCredential", "BadSource", "BadKey", "NoSpace"})


class LoadError(Exception):
    """A load that cannot finish: `reason` (one word, see the module docstring) and what to do."""

    def __init__(self, reason: str, message: str):
        self.reason, self.message = reason, message
        super().__init__(message)

    @property
    def permanent(self) -> bool:
        return self.reason in PERMANENT


@dataclass(frozen=True)
class Obj:
    key: str  # the object's key in the bucket
    path: str  # its file, relative to DIR (posix)
    size: int
    etag: str  # S3 ETag / GCS MD5: what the manifest compares

def relative_path(key: str, prefix: str) -> str | None:
    """The file of `key` under DIR; None for a folder marker; `LoadError` BadKey for an unsafe key."""
    rel = key[len(prefix):]
    if not rel or rel.endswith("/"):
        return None
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or "\x00" in rel or parts[0].startswith(RESERVED):
        raise LoadError("BadKey", f"the object {key[:300]!r} has no safe file name in the dataset (an empty, '.' or "
                                  f"'..' path segment, or a name starting with {RESERVED!r}); rename it in the bucket")
    return rel


def check_paths(objects: Iterable[Obj]) -> None:
    """`LoadError` BadKey when one object's file would be another's folder."""
    paths = {o.path: o for o in objects}
    for o in paths.values():
        parts = o.path.split("/")
        for i in range(1, len(parts)):
            other = paths.get("/".join(parts[:i]))
            if other is not None:
                raise LoadError("BadKey", f"the objects {other.key[:300]!r} and {o.key[:300]!r} would be a file and a "
                                          "folder of the same name; rename one in the bucket")


def plan(objects: Iterable[Obj], recorded: Mapping[str, Mapping], present: Mapping[str, int]) -> tuple[list, list]:
    """(objects to copy, objects already there): there = the file has the object's size and the
    manifest records the object's size and ETag for it."""
    copy, keep = [], []
    for o in objects:
        rec = recorded.get(o.path) or {}
        same = present.get(o.path) == o.size and rec.get("size") == o.size and rec.get("etag") == o.etag
        (keep if same else copy).append(o)
    return copy, keep


class Progress:
    """Counters the copying threads update and the main thread prints; the manifest's entries."""

    def __init__(self, objects: list[Obj], kept: list[Obj]):
        self._lock = threading.Lock()
        self.objects_total, self.bytes_total = len(objects), sum(o.size for o in objects)
        self.objects_done, self.bytes_done = len(kept), sum(o.size for o in kept)
        self.copied = 0
        self.files = {o.path: {"size": o.size, "etag": o.etag} for o in kept}

    def add_bytes(self, n: int) -> None:
        with self._lock:
            self.bytes_done += n

    def finished(self, obj: Obj, size: int, etag: str) -> None:
        with self._lock:
            self.objects_done += 1
            self.copied += 1
            self.files[obj.path] = {"size": size, "etag": etag}

    def line(self, phase: str) -> dict:
        with self._lock:
            return {"phase": phase, "objects_done": self.objects_done, "objects_total": self.objects_total,
                    "bytes_done": min(self.bytes_done, self.bytes_total) if phase != "done" else self.bytes_total,
                    "bytes_total": self.bytes_total}

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self.files)
