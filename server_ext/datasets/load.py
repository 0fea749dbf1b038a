"""Copy every object under ``s3://bucket/prefix`` or ``gs://bucket/prefix`` into a directory: the
program a dataset's loader Job runs (``python -m server_ext.datasets.load --source URI --dest DIR``,
`hub_ext.operator.rules.datasets.loader_job`).

Source (`hub_ext.manifests.dataset_source.parse_source`, the one parser the controller uses too): the
prefix names a folder, so ``s3://b/images`` copies ``images/a.jpg`` to ``DIR/a.jpg`` and
``images/x/b.jpg`` to ``DIR/x/b.jpg`` (never ``images-old/…``); ``s3://b`` copies the whole
bucket. Folder markers (keys ending in ``/``) are skipped. A key that is not a safe relative path
(an empty, ``.`` or ``..`` segment, a NUL), that would be both a file and a folder, or whose first
segment starts with ``.mlplatform-`` (the loader's own names) fails the load, naming the key:
nothing is left out without a word.

Credentials and endpoints: read from the environment exactly as `server_ext.runtimes.fetch` reads
them (its `Stores`): AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_PROFILE, AWS_REGION,
AWS_ENDPOINT_URL_S3, GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST; none → anonymous
(public buckets); the node's ambient identity is never used. An AWS_CONFIG_FILE that does not exist
counts as none (`Stores`' rule: the operator, which reads a credential's metadata only, names the
config file of every AWS credential; without it the region is AWS_REGION's or us-east-1).

Guarantees (exactly once in effect, resumable):
- each object is written under ``DIR/.mlplatform-tmp/`` (emptied at start) and renamed into place,
  so a file in DIR is always a whole object;
- ``DIR/.mlplatform-load.json`` (`MANIFEST`) records the source folder and, per file, the size and ETag
  (S3) or MD5 (GCS) of the object it was copied from; it is rewritten atomically at every progress
  line while copying and at the end. An object whose file is there with the object's size, and
  whose recorded ETag/MD5 for the same source is the object's, is not copied again: a restarted
  run (a new pod after a crash, a lost node, a restarted operator) finishes the load without
  copying twice what was done, and nothing is lost;
- after a complete listing and before copying, every file and folder in DIR that is not an object
  of the source is removed, and any symbolic link or special file: a changed source reloads into
  the same directory, which ends holding exactly the source's objects. An empty listing is
  refused (``NotFound``), never taken as "remove everything";
- copies run in `--parallel` threads (default 8; the S3 client keeps 10 connections).

Output, on stdout, one JSON object a line (the controller reads the last lines of the pod's log):
- while listing, every `--interval` seconds: ``{"phase": "listing", "objects_listed": n}``;
- while copying, every `--interval` seconds: ``{"phase": "copying", "objects_done": n,
  "objects_total": n, "bytes_done": n, "bytes_total": n}`` (done counts the objects already there);
- at the end (exit 0): the same with ``"phase": "done"`` and ``objects_copied``, ``objects_kept``,
  ``files_removed``;
- on failure one line ``{"phase": "failed", "error": "<what to fix>", "reason": "<Reason>"}``: exit
  `EXIT_PERMANENT` (2) when a retry cannot help (`PERMANENT`: AccessDenied, NotFound,
  BadCredential, BadKey, NoSpace: fix the source, the credential or the size), exit 1 otherwise
  (the storage failed or was unreachable, an object changed while copying, the pod was stopped:
  the Job retries). No line contains a secret value: text taken from a library's exception is
  scrubbed of the credential file's secrets (`Stores.scrub`).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import errno
import json
import os
import pathlib
import shutil
import signal
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.operator.rules.datasets import EXIT_PERMANENT, Source, parse_source
from server_ext.jobs.package_uri import Location
from server_ext.runtimes.fetch import Stores, write_body

MANIFEST = ".mlplatform-load.json"
TMP_DIR = ".mlplatform-tmp"
RESERVED = ".mlplatform-"
PERMANENT = frozenset({"AccessDenied", "NotFound", "BadCredential", "BadSource", "BadKey", "NoSpace"})
FIELD = "--source"
_DENIED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "AllAccessDisabled",
           "InvalidToken", "AccountProblem"}


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


# -- pure decisions ------------------------------------------------------------------------------

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


# -- the directory ---------------------------------------------------------------------------------

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


# -- object storage --------------------------------------------------------------------------------

def _location(src: Source) -> Location:
    return Location(src.uri, FIELD, src.scheme, src.bucket, src.prefix)


def _sdk_errors(scheme: str) -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]
    if scheme == "s3":
        from botocore.exceptions import BotoCoreError, ClientError
        errors += [BotoCoreError, ClientError]
    else:
        import requests
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from google.resumable_media import DataCorruption, InvalidResponse
        errors += [requests.RequestException, GoogleAPIError, GoogleAuthError, DataCorruption, InvalidResponse]
    return tuple(errors)


def _error(e: BaseException, src: Source, stores: Stores, action: str, key: str | None) -> LoadError:
    """One SDK or disk failure as a `LoadError` the user can act on (scrubbed of secrets)."""
    where = f"{action} {src.scheme}://{src.bucket}/{key if key is not None else src.prefix}"
    if isinstance(e, OSError) and not isinstance(e, _sdk_errors(src.scheme)[1:]):  # the disk's, not the storage's
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return LoadError("NoSpace", f"the dataset's volume is full while {where}; give the dataset a larger size")
        return LoadError("WriteError", f"could not write the dataset's volume while {where}: "
                                       f"{e.strerror or type(e).__name__}")
    if src.scheme == "s3":
        from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

        if isinstance(e, ClientError):
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code == "NoSuchBucket":
                return LoadError("NotFound", f"the bucket {src.bucket!r} does not exist ({where})")
            if code in ("NoSuchKey", "404", "NotFound"):
                return LoadError("SourceChanged", f"{where}: the object was removed while loading; the load starts over")
            if code in _DENIED or status in (401, 403):
                return LoadError("AccessDenied", f"access denied ({code}) {where}: the dataset's credential must be an "
                                                 "aws-credential allowed to list and read this bucket")
            return LoadError("StorageError", f"S3 answered {status} {code} {where}")
        if isinstance(e, NoCredentialsError):
            return LoadError("BadCredential", f"no AWS credentials {where}")
        if isinstance(e, EndpointConnectionError):
            return LoadError("Unreachable", f"could not reach S3 {where}: {stores.scrub(str(e))}")
    else:
        from google.api_core import exceptions as gexc
        from google.auth.exceptions import RefreshError

        if isinstance(e, gexc.NotFound):
            if key is not None:
                return LoadError("SourceChanged", f"{where}: the object was removed while loading; the load starts over")
            return LoadError("NotFound", f"the bucket {src.bucket!r} does not exist ({where})")
        if isinstance(e, (gexc.Forbidden, gexc.Unauthorized, RefreshError)):
            return LoadError("AccessDenied", f"access denied {where}: the dataset's credential must be a "
                                             "gcp-credential allowed to list and read this bucket")
        if isinstance(e, gexc.GoogleAPICallError):
            return LoadError("StorageError", f"Cloud Storage answered {e.code} {where}")
    return LoadError("StorageError", f"{where}: {stores.scrub(f'{type(e).__name__}: {e}')}")


def _guarded(src: Source, stores: Stores, action: str, key: str | None, fn: Callable, *args: Any) -> Any:
    try:
        return fn(*args)
    except LoadError:
        raise
    except UserInputError as e:  # Stores: a credential file that is missing or not of its kind
        raise LoadError("BadCredential", e.message) from None
    except UpstreamError as e:  # Stores: an endpoint that is not a URL
        raise LoadError("StorageError", str(e)) from None
    except _sdk_errors(src.scheme) as e:
        raise _error(e, src, stores, action, key) from None


def _list(src: Source, stores: Stores, seen: list[int], stop: threading.Event) -> list[Obj]:
    client = stores.client(_location(src))
    out: list[Obj] = []
    if src.scheme == "s3":
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=src.bucket, Prefix=src.prefix)
        items = ((o["Key"], o["Size"], o.get("ETag", "")) for page in pages for o in page.get("Contents") or [])
    else:
        items = ((b.name, b.size, b.md5_hash or b.etag or str(b.generation or ""))
                 for b in client.list_blobs(src.bucket, prefix=src.prefix or None))
    for key, size, etag in items:
        if stop.is_set():
            raise LoadError("Interrupted", "the loader was stopped")
        path = relative_path(key, src.prefix)
        if path is not None:
            out.append(Obj(key, path, int(size or 0), str(etag)))
            seen[0] = len(out)
    return out


class _Counting:
    """A file writer that counts the bytes and stops when told."""

    def __init__(self, f, progress: "Progress", stop: threading.Event):
        self.f, self.progress, self.stop = f, progress, stop

    def write(self, data: bytes) -> int:
        if self.stop.is_set():
            raise LoadError("Interrupted", "the loader was stopped")
        self.progress.add_bytes(len(data))
        return self.f.write(data)


def _copy(src: Source, stores: Stores, obj: Obj, dest: pathlib.Path, progress: "Progress",
          stop: threading.Event) -> None:
    part = dest / TMP_DIR / uuid.uuid4().hex
    client = stores.client(_location(src))
    try:
        with open(part, "wb") as f:
            out = _Counting(f, progress, stop)
            etag = obj.etag
            if src.scheme == "s3":
                answer = client.get_object(Bucket=src.bucket, Key=obj.key)
                etag = str(answer.get("ETag") or etag)
                write_body(answer["Body"], out)
            else:
                client.bucket(src.bucket).blob(obj.key).download_to_file(out)
        size = part.stat().st_size
        target = dest / obj.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
        progress.finished(obj, size, etag)
    finally:
        part.unlink(missing_ok=True)


# -- the load --------------------------------------------------------------------------------------

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


def _ticking(futures: set, interval: float, stop: threading.Event, tick: Callable[[], None]) -> None:
    """Wait for `futures`, calling `tick` every `interval` seconds; the first failure is raised
    (after `stop` is set, so the others stop at their next chunk)."""
    pending = set(futures)
    last = time.monotonic()
    while pending:
        done, pending = cf.wait(pending, timeout=max(0.05, interval - (time.monotonic() - last)),
                                return_when=cf.FIRST_EXCEPTION)
        failed = [f for f in done if f.exception() is not None]
        if failed or stop.is_set():
            stop.set()
            for f in pending:
                f.cancel()
            cf.wait(pending)
            raise failed[0].exception() if failed else LoadError("Interrupted", "the loader was stopped")
        if time.monotonic() - last >= interval:
            tick()
            last = time.monotonic()


def emit_line(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def load(uri: str, dest: pathlib.Path, env: Mapping[str, str], *, parallel: int = 8, interval: float = 1.0,
         emit: Callable[[dict], None] = emit_line, stop: threading.Event | None = None,
         stores: Stores | None = None) -> dict:
    """Load `uri` into `dest` (see the module docstring) with the stores of `env` (or `stores`);
    the final line. Raises `LoadError`."""
    try:
        src = parse_source(uri)
    except ValueError as e:
        raise LoadError("BadSource", f"the source {e}") from None
    folder = f"{src.scheme}://{src.bucket}/{src.prefix}"  # the manifest's name of the source (s3://b/p = s3://b/p/)
    stores = stores or Stores(env)
    stop = stop or threading.Event()
    dest = pathlib.Path(dest)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(dest / TMP_DIR, ignore_errors=True)
        (dest / TMP_DIR).mkdir()
    except OSError as e:
        raise LoadError("WriteError", f"cannot write the dataset's volume at {dest}: {e.strerror}") from None
    with cf.ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="load") as pool:
        seen = [0]
        listing = pool.submit(_guarded, src, stores, "listing", None, _list, src, stores, seen, stop)
        _ticking({listing}, interval, stop, lambda: emit({"phase": "listing", "objects_listed": seen[0]}))
        objects = listing.result()
        if not objects:
            raise LoadError("NotFound", f"there are no objects under {src.uri}; check the bucket and the prefix")
        check_paths(objects)
        try:
            present, removed = prune(dest, {o.path for o in objects})
        except OSError as e:
            raise LoadError("WriteError", f"could not tidy the dataset's volume: {e.strerror}") from None
        copy, keep = plan(objects, read_manifest(dest, folder), present)
        progress = Progress(objects, keep)

        def tick() -> None:
            emit(progress.line("copying"))
            write_manifest(dest, folder, progress.snapshot())

        futures = {pool.submit(_guarded, src, stores, "reading", o.key, _copy, src, stores, o, dest, progress, stop)
                   for o in copy}
        try:
            _ticking(futures, interval, stop, tick)
        finally:  # what was copied is recorded, whatever stopped the load
            write_manifest(dest, folder, progress.snapshot())
    shutil.rmtree(dest / TMP_DIR, ignore_errors=True)
    final = {**progress.line("done"), "objects_copied": progress.copied, "objects_kept": len(keep),
             "files_removed": removed}
    emit(final)
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server_ext.datasets.load",
                                     description="Copy the objects under an S3 or GCS prefix into a directory.")
    parser.add_argument("--source", required=True, help="s3://bucket/prefix or gs://bucket/prefix")
    parser.add_argument("--dest", required=True, type=pathlib.Path, help="the directory to fill (the dataset's PVC)")
    parser.add_argument("--parallel", type=int, default=8, help="objects copied at once")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # stop at the next chunk, recording what was copied
    stores = Stores(os.environ)
    try:
        load(args.source, args.dest, os.environ, parallel=args.parallel, interval=args.interval, stop=stop,
             stores=stores)
    except LoadError as e:
        emit_line({"phase": "failed", "reason": e.reason, "error": stores.scrub(e.message)})
        return EXIT_PERMANENT if e.permanent else 1
    except Exception as e:  # a bug: say so in the one line the controller reads, the traceback above it
        text = traceback.format_exc()
        for secret in stores.secrets:
            text = text.replace(secret, "[redacted]")
        sys.stderr.write(text)
        emit_line({"phase": "failed", "reason": "InternalError",
                "error": f"the loader failed unexpectedly ({type(e).__name__}); see the loader pod's log"})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
