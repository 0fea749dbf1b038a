"""Copy every object under ``s3://bucket/prefix`` or ``gs://bucket/prefix`` into a directory: the
program a dataset's loader Job runs (``python -m server_ext.datasets.load --source URI --dest DIR``,
`hub_ext.operator.rules.datasets.loader_job`).

The parts: `load_plan` (the decisions, pure), `load_dir` (DIR: the manifest, pruning),
`load_storage` (listing and copying objects, failures as `LoadError`); this module runs them.

Source (`hub_ext.manifests.dataset_source.parse_source`, the one parser the controller uses too): the
prefix names a folder, so ``s3://b/images`` copies ``images/a.jpg`` to ``DIR/a.jpg`` and
``images/x/b.jpg`` to ``DIR/x/b.jpg`` (never ``images-old/…``); ``s3://b`` copies the whole
bucket. Folder markers (keys ending in ``/``) are skipped. A key that is not a safe relative path
(an empty, ``.`` or ``..`` segment, a NUL), that would be both a file and a folder, or whose first
segment starts with ``.mlplatform-`` (the loader's own names) fails the load, naming the key:
nothing is left out without a word.

Credentials and endpoints: read from the environment exactly as the code fetcher reads them
(`server_ext.runtimes.stores.Stores`): AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_PROFILE,
AWS_REGION, AWS_ENDPOINT_URL_S3, GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST; none → anonymous
(public buckets); the node's ambient identity is never used. An AWS_CONFIG_FILE that does not exist
counts as none (`Stores`' rule: the operator, which reads a credential's metadata only, names the
config file of every AWS credential; without it the region is AWS_REGION's or us-east-1).

Guarantees (exactly once in effect, resumable):
- each object is written under ``DIR/.mlplatform-tmp/`` (emptied at start) and renamed into place,
  so a file in DIR is always a whole object;
- ``DIR/.mlplatform-load.json`` (`load_dir.MANIFEST`) records the source folder and, per file, the size and ETag
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
  `EXIT_PERMANENT` (2) when a retry cannot help (`load_plan.PERMANENT`: AccessDenied, NotFound,
  BadCredential, BadKey, NoSpace: fix the source, the credential or the size), exit 1 otherwise
  (the storage failed or was unreachable, an object changed while copying, the pod was stopped:
  the Job retries). No line contains a secret value: text taken from a library's exception is
  scrubbed of the credential file's secrets (`Stores.scrub`).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import shutil
import signal
import sys
import threading
import time
import traceback
from typing import Callable, Mapping

from hub_ext.operator.rules.datasets import EXIT_PERMANENT, parse_source
from server_ext.datasets.load_dir import TMP_DIR, prune, read_manifest, write_manifest
from server_ext.datasets.load_plan import LoadError, Progress, check_paths, plan
from server_ext.datasets.load_storage import copy_object, guarded, list_objects
from server_ext.runtimes.stores import Stores


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
        listing = pool.submit(guarded, src, stores, "listing", None, list_objects, src, stores, seen, stop)
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

        futures = {pool.submit(guarded, src, stores, "reading", o.key, copy_object, src, stores, o, dest, progress,
                               stop) for o in copy}
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
