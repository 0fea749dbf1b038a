"""Benchmark (not a test: prints figures, asserts nothing) of the dataset loader's throughput
against the emulators, beside a plain copy with the same client library, in one run.

    .venv/bin/python -m tests.bench.dataset_loader [--objects 1000] [--mb 100] [--rounds 3]   (or: make bench)

The stores are the local tier's (`tests.local.object_stores`): moto's S3 server in a thread of
this process with IAM authentication on (every request is signed and checked), and
gcp-storage-emulator in a subprocess, both in memory on loopback. A folder of ``--objects``
objects totalling ``--mb`` MB (MB = 10^6 bytes; sizes log-uniform over four decades, scaled to
the total, in 10 sub-folders) is put in each. Then, per store and round, each into a fresh
directory, each as a process of its own (the same interpreter, timed from start to exit, so both
pay their start and imports; CPU = the child's user + system):

- **our loader**: ``python -m server_ext.datasets.load --source s3://…|gs://… --dest DIR`` as the
  loader Job runs it (its default ``--parallel 8``; the credential FILES and endpoint named by the
  environment as the Job sets them: AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE,
  AWS_ENDPOINT_URL_S3; GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST);
- **plain copy**: this module's ``--plain-copy`` mode with the same environment. S3 as
  ``aws s3 sync`` does it: boto3 lists, then s3transfer's TransferManager (10 threads, a client
  with 10 connections, as the CLI's defaults) downloads every object whose file is missing or
  differs in size or time (size and ETag from the listing, so no HeadObject per object), and sets
  each file's time to the object's LastModified, as the CLI's subscribers do. GCS as
  ``gsutil -m cp -n`` would: google-cloud-storage lists, then
  ``transfer_manager.download_many_to_path`` (10 threads, ``skip_if_exists``).

Then each runs again over its complete directory (nothing to copy: our loader lists and checks
its manifest; the plain copy lists and checks sizes and times, or existence). Rounds alternate
which copy goes first. Figures are medians over the rounds (min and max beside); each run's
files are counted afterwards and a run that did not leave every object's bytes is reported.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
MB = 1_000_000
THREADS = 10  # the aws CLI's max_concurrent_requests; gsutil -m on 2 cores: 2 processes x 5 threads
STORE_VARS = ("AWS_", "GOOGLE_", "STORAGE_EMULATOR_HOST")
MANIFEST = ".mlplatform-load.json"  # server_ext.datasets.load_dir.MANIFEST (not imported: the plain copy's child
#                                      process imports this module, and should import no more than it uses)


# -- pure ---------------------------------------------------------------------------------------------

def object_sizes(n: int, total: int, seed: int = 17) -> list[int]:
    """`n` sizes, log-uniform over four decades, summing to `total` exactly."""
    rng = random.Random(seed)
    weights = [10 ** rng.uniform(0, 4) for _ in range(n)]
    scale = total / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    sizes[sizes.index(max(sizes))] += total - sum(sizes)
    return sizes


def object_names(n: int) -> list[str]:
    return [f"part-{i % 10}/obj-{i:05}.bin" for i in range(n)]


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """median (min–max)"""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


# -- filling the stores -------------------------------------------------------------------------------

def fill(store, prefix: str, names: list[str], sizes: list[int]) -> None:
    is_s3 = hasattr(store, "key_id")
    clients: dict[int, object] = {}

    def put(item: tuple[str, int]) -> None:
        client = clients.setdefault(threading.get_ident(), store.client())
        data = os.urandom(item[1])
        if is_s3:
            client.put_object(Bucket=store.bucket, Key=f"{prefix}/{item[0]}", Body=data)
        else:
            client.bucket(store.bucket).blob(f"{prefix}/{item[0]}").upload_from_string(data)

    with cf.ThreadPoolExecutor(8) as pool:
        list(pool.map(put, zip(names, sizes)))


# -- the plain copy (run as a child process: --plain-copy) ---------------------------------------------

def plain_copy(source: str, dest: pathlib.Path, threads: int) -> dict:
    scheme, _, rest = source.partition("://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    dest.mkdir(parents=True, exist_ok=True)
    return (_s3_sync if scheme == "s3" else _gcs_cp)(bucket, prefix, dest, threads)


def _s3_sync(bucket: str, prefix: str, dest: pathlib.Path, threads: int) -> dict:
    import boto3
    from boto3.s3.transfer import TransferConfig, create_transfer_manager
    from botocore.config import Config
    from s3transfer.subscribers import BaseSubscriber

    class FromListing(BaseSubscriber):
        """The size and ETag from the listing, so s3transfer sends no HeadObject first (the CLI's
        ProvideSizeSubscriber; s3transfer 0.11+ wants the ETag too)."""

        def __init__(self, size: int, etag: str):
            self.size, self.etag = size, etag

        def on_queued(self, future, **kwargs) -> None:
            future.meta.provide_transfer_size(self.size)
            future.meta.provide_object_etag(self.etag)

    client = boto3.client("s3", config=Config(max_pool_connections=threads))  # env: files, endpoint
    todo, kept = [], 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents") or []:
            rel = obj["Key"][len(prefix):]
            if not rel or rel.endswith("/"):
                continue
            path, mtime = dest / rel, obj["LastModified"].timestamp()
            try:
                st = path.stat()
                if st.st_size == obj["Size"] and int(st.st_mtime) == int(mtime):
                    kept += 1
                    continue
            except FileNotFoundError:
                pass
            todo.append((obj["Key"], path, obj["Size"], obj["ETag"], mtime))
    for folder in {p.parent for _, p, _, _, _ in todo}:
        folder.mkdir(parents=True, exist_ok=True)
    with create_transfer_manager(client, TransferConfig(max_concurrency=threads)) as manager:
        futures = [(manager.download(bucket, key, str(path), subscribers=[FromListing(size, etag)]), path,
                    mtime) for key, path, size, etag, mtime in todo]
        for future, path, mtime in futures:
            future.result()
            os.utime(path, (mtime, mtime))
    return {"copied": len(todo), "kept": kept}


def _gcs_cp(bucket: str, prefix: str, dest: pathlib.Path, threads: int) -> dict:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from google.cloud.storage import transfer_manager

    emulator = os.environ["STORAGE_EMULATOR_HOST"]  # the emulator takes no tokens (our loader: the same)
    client = storage.Client(project="bench", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": emulator})
    names = [b.name[len(prefix):] for b in client.list_blobs(bucket, prefix=prefix or None)
             if not b.name.endswith("/")]
    present = sum((dest / n).exists() for n in names)
    results = transfer_manager.download_many_to_path(
        client.bucket(bucket), names, destination_directory=str(dest), blob_name_prefix=prefix,
        worker_type=transfer_manager.THREAD, max_workers=threads, skip_if_exists=True, raise_exception=True)
    return {"copied": len(names) - present, "kept": present, "results": len(results)}


# -- timing the two programs ---------------------------------------------------------------------------

def run(cmd: list[str], env: dict[str, str], log: pathlib.Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the child, exit code, its last stdout line)."""
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode, lines[-1] if lines else ""


def copied(last_line: str) -> int | None:
    """How many objects a run copied, from its last line (ours: ``objects_copied``; the plain copy's: ``copied``)."""
    try:
        doc = json.loads(last_line)
    except ValueError:
        return None
    return doc.get("objects_copied", doc.get("copied")) if isinstance(doc, dict) else None


def tree_bytes(d: pathlib.Path) -> tuple[int, int]:
    files = [p for p in d.rglob("*") if p.is_file() and p.name != MANIFEST]
    return len(files), sum(p.stat().st_size for p in files)


def bench_store(name: str, store, env: dict[str, str], source: str, n: int, total: int, rounds: int,
                work: pathlib.Path) -> None:
    programs = {
        "our loader": [sys.executable, "-m", "server_ext.datasets.load", "--source", source, "--dest"],
        f"plain copy, {THREADS} threads": [sys.executable, "-m", "tests.bench.dataset_loader", "--plain-copy", source,
                                           "--threads", str(THREADS), "--dest"],
    }
    fresh: dict[str, list[tuple[float, float]]] = {k: [] for k in programs}
    again: dict[str, list[tuple[float, float]]] = {k: [] for k in programs}
    notes: list[str] = []
    for r in range(rounds):
        order = list(programs) if r % 2 == 0 else list(programs)[::-1]
        for label in order:
            dest = work / f"{name}-{r}-{label.split(',')[0].replace(' ', '-')}"
            for phase, into in (("fresh", fresh), ("again", again)):
                wall, cpu, code, last = run(programs[label] + [str(dest)], env, work / f"{dest.name}-{phase}.log")
                files, size = tree_bytes(dest)
                if code != 0 or files != n or size != total:
                    notes.append(f"round {r + 1}, {label}, {phase}: exit {code}, {files} files, {size} bytes; "
                                 f"last line: {last[:300]}")
                if phase == "again" and copied(last) != 0:
                    notes.append(f"round {r + 1}, {label}, again: copied {copied(last)}: {last[:300]}")
                into[label].append((wall, cpu))
            shutil.rmtree(dest, ignore_errors=True)
    print(f"\n{name}: {n} objects, {total / MB:.1f} MB, {rounds} rounds; median (min–max)")
    print(f"{'into a fresh directory':<32} {'s':>20} {'MB/s':>20} {'objects/s':>20} {'CPU s':>8}")
    for label, runs in fresh.items():
        walls = [w for w, _ in runs]
        print(f"{label:<32} {spread(walls):>20} {spread([total / MB / w for w in walls], '{:.1f}'):>20} "
              f"{spread([n / w for w in walls], '{:.0f}'):>20} {statistics.median(c for _, c in runs):>8.2f}")
    print(f"{'again, over the complete one':<32} {'s':>20}")
    for label, runs in again.items():
        print(f"{label:<32} {spread([w for w, _ in runs]):>20} {'':>20} {'':>20} "
              f"{statistics.median(c for _, c in runs):>8.2f}")
    for note in notes:
        print("  !", note)


def main(n: int, mb: float, rounds: int, stores: list[str]) -> None:
    from tests.local.object_stores import gcs_server, s3_server

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-loader-"))
    total = int(mb * MB)
    names, sizes = object_names(n), object_sizes(n, total)
    ordered = sorted(sizes)
    print(f"object sizes: min {ordered[0]} B, median {ordered[n // 2]} B, max {ordered[-1]} B")
    base = {k: v for k, v in os.environ.items() if not k.startswith(STORE_VARS)}
    try:
        if "s3" in stores:
            with s3_server() as store:
                prefix = f"bench-{uuid.uuid4().hex[:6]}"
                start = time.perf_counter()
                fill(store, prefix, names, sizes)
                print(f"S3: filled in {time.perf_counter() - start:.1f} s")
                env = {**base, **store.credentials_env(work / "s3-credential")}
                bench_store("S3 (moto server, IAM auth on)", store, env, f"s3://{store.bucket}/{prefix}", n, total,
                            rounds, work)
        if "gcs" in stores:
            with gcs_server(work / "gcs-emulator.log") as store:
                prefix = f"bench-{uuid.uuid4().hex[:6]}"
                start = time.perf_counter()
                fill(store, prefix, names, sizes)
                print(f"GCS: filled in {time.perf_counter() - start:.1f} s")
                env = {**base, **store.credentials_env(work / "gcs-credential")}
                bench_store("GCS (gcp-storage-emulator)", store, env, f"gs://{store.bucket}/{prefix}", n, total,
                            rounds, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", default="s3,gcs", help="comma-separated: s3, gcs")
    parser.add_argument("--plain-copy", metavar="URI", help=argparse.SUPPRESS)  # the child mode
    parser.add_argument("--dest", type=pathlib.Path, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=THREADS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_copy:
        print(json.dumps(plain_copy(args.plain_copy, args.dest, args.threads)))
    else:
        main(args.objects, args.mb, args.rounds, args.stores.split(","))
