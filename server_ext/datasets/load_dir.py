"""The directory a dataset is loaded into (``DIR``, the dataset's volume): its manifest and what is
removed from it (`load` runs the program).

Guarantees:

- ``DIR/.mlplatform-load.json`` (`MANIFEST`) records the source folder and, per file, the size and
  ETag (S3) or MD5 (GCS) of the object it was copied from; `read_manifest` gives nothing for another
  source or a manifest it cannot read; `write_manifest` replaces it atomically (written under
  ``DIR/.mlplatform-tmp/``, `TMP_DIR`, then renamed);
- `prune`: every file in DIR that is not a wanted object's, every symbolic link and special file,
  and the folders left empty are removed (the manifest and `TMP_DIR` stay); the sizes of the wanted
  files present are returned, for `load_plan.plan`.
"""

from __future__ import annotations

import json
import os
import pathlib
import uuid
from typing import Mapping

MANIFEST = ".mlplatform-load.json"
TMP_DIR = ".mlplatform-tmp"


def read_manifest(dest: pathlib.Path, source: str) -> dict[str, dict]:
    """The files the manifest records for `source` ({} for another source or no readable manifest)."""
    try:
        doc = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) and doc.get("source") == source else None
    return {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}


def write_manifest(dest: pathlib.Path, source: str, files: Mapping[str, Mapping]) -> None:
    tmp = dest / TMP_DIR / f"manifest-{uuid.uuid4().hex}"
    tmp.write_text(json.dumps({"source": source, "files": dict(sorted(files.items()))}, separators=(",", ":")),
                   encoding="utf-8")
    os.replace(tmp, dest / MANIFEST)


def prune(dest: pathlib.Path, wanted: set[str]) -> tuple[dict[str, int], int]:
    """Remove from `dest` every file not in `wanted` (relative paths), every link and special file,
    and the folders left empty; (size of each wanted file present, how many files and links were removed)."""
    folders = {"/".join(p.split("/")[:i]) for p in wanted for i in range(1, p.count("/") + 1)}
    present: dict[str, int] = {}
    removed = 0
    for root, dirs, files in os.walk(dest):
        base = pathlib.Path(root)
        rel_root = base.relative_to(dest).as_posix()
        rel_root = "" if rel_root == "." else rel_root + "/"
        if not rel_root:
            dirs[:] = [d for d in dirs if d != TMP_DIR]
            files = [f for f in files if f != MANIFEST]
        for d in list(dirs):
            if (base / d).is_symlink():  # os.walk lists links to folders here and does not follow them
                (base / d).unlink()
                dirs.remove(d)
                removed += 1
        for f in files:
            path, rel = base / f, rel_root + f
            if rel in wanted and path.is_file() and not path.is_symlink():
                present[rel] = path.stat().st_size
            else:
                path.unlink()
                removed += 1
    for root, dirs, _files in os.walk(dest, topdown=False):
        for d in dirs:
            rel = (pathlib.Path(root) / d).relative_to(dest).as_posix()
            if rel != TMP_DIR and rel not in folders:
                try:
                    (pathlib.Path(root) / d).rmdir()
                except OSError:  # not empty: it holds wanted files (it was a wanted file's folder)
                    pass
    return present, removed
