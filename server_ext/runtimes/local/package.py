"""Where a local job's code comes from: its ``packageUris`` resolved to files to install and
directories to run in place, the package shipped with it (``--package-path``) included.

- `check(plan)`: the refusals made at submit, before anything is created: an unknown scheme (a
  ``configmap://`` URI that is not the job's own shipped package included; `local_env.package_sources`),
  a ``gs://``/``s3://`` entry where this server cannot fetch, a local path that does not exist.
- `keep(package, state_dir)`: `JobService.create` builds the sdist into a temporary directory that
  is removed as soon as ``submit`` returns, so submit keeps a copy first. The sdist is copied, and
  hashed as it is copied, into a private directory of the state dir (the job's directory is on the
  same filesystem, so `Kept.place` is a rename); a copy whose sha256 is not the plan's is refused
  with `UserInputError` naming ``package.path``. The copy is therefore the very bytes the job's
  URI names — ``configmap://<job>-package/<file>`` or the staging bucket's
  ``…/packages/<sha256>/<file>`` — and that URI is never read: the local runtime reads no ConfigMap,
  fetches nothing it already holds and uploads nothing to the staging bucket.
- `locate(plan, job_dir, env, job)`: fetches the remote entries into ``<job_dir>/packages/`` and
  returns (the sdists/wheels to install, in ``packageUris`` order, the shipped one from
  ``<job_dir>/shipped/``; the package directories, whose parents go on ``PYTHONPATH``). A fetch that
  fails raises `PackagesUnavailable`, whose message is the job's errorMessage.
- `install(files, …)`: the sdists/wheels installed once per digest and reused. The digest
  (`install_key`) is the sha256 of the interpreter (its real path, size and mtime) and of each
  file's name and bytes, in order: the same package for the same Python is the same install, a
  changed package (new bytes) a new one. The install lives in
  ``<state_dir>/packages/<project>/<digest>/site`` (per project, so one project's jobs do not share
  an install with another's; every job of the server runs as the same OS account, so this is
  separation, not a boundary), shared by every job and trial of the project that uses it; its
  files are read-only, so a job cannot change in place the code later jobs and parallel trials
  run (a trainer should write its outputs to its job directory, not beside its code). It is made atomically: under an exclusive lock on ``<digest>.lock`` (waited for without
  blocking the event loop, given up on cancel), pip installs into a temporary directory that is
  renamed into place only once pip succeeded, so two trials starting at once never both install,
  and no job ever sees a half install (a temporary directory left by a crash is removed by the
  next install). The first job's log gets "Installing … into …" and pip's output; a job that
  reuses it one line, "Using … installed before (…) from …"; every one of these lines is stamped
  with its time and stream, as the trainer's are (`local_procs.tagged`, `local_procs.note`). pip failing raises `InstallFailed`.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from hub_ext.core.errors import PlatformError, UserInputError
from hub_ext.local.files import PRIVATE_UMASK, private_dir, private_opener
from server_ext.jobs.local.env import PackageSource, package_sources
from server_ext.jobs.package_delivery import FIELD
from server_ext.jobs.plan import JobPlan, ShippedPackage
from server_ext.runtimes.local.procs import note, tagged

SHIPPED_DIR = "shipped"
INSTALLS_DIR = "packages"  # under the state directory: <project>/<digest>/site
_CHUNK = 1 << 20
_LOCK_POLL_S = 0.05


class PackagesUnavailable(Exception):
    """The job's packages could not be fetched; the message is the job's errorMessage."""


class InstallFailed(Exception):
    """pip failed; `code` is its exit status (its output is in the log)."""

    def __init__(self, code: int):
        super().__init__(f"pip exited with status {code}")
        self.code = code


def fetcher():
    """`server_ext.runtimes.fetch.fetch_all`, or None where that module is not installed."""
    try:
        from server_ext.runtimes.fetch import fetch_all
    except ImportError:
        return None
    return fetch_all


def sources(plan: JobPlan) -> list[PackageSource]:
    return package_sources(plan.package_uris, plan.package.uri if plan.package else None)


def check(plan: JobPlan) -> None:
    for source in sources(plan):
        if source.kind == "remote" and fetcher() is None:
            raise UserInputError("trainingInput.packageUris", f"{source.value}: this server cannot fetch "
                                                              "gs:// or s3:// packages; give a local path")
        if source.kind == "local" and not os.path.exists(source.value):
            raise UserInputError(source.field, f"{source.value} does not exist on this machine")


@dataclass
class Kept:
    """A verified copy of a shipped sdist, waiting in a private directory for its job's directory."""

    file: pathlib.Path

    def place(self, job_dir: pathlib.Path) -> pathlib.Path:
        """Move the copy to ``<job_dir>/shipped/<file>``; its new path."""
        target = job_dir / SHIPPED_DIR / self.file.name
        private_dir(target.parent)
        os.replace(self.file, target)
        return target

    def discard(self) -> None:
        """Remove the private directory (and the copy, unless it was placed)."""
        shutil.rmtree(self.file.parent, ignore_errors=True)


def keep(package: ShippedPackage, state_dir: pathlib.Path) -> Kept:
    """Copy the shipped sdist under `state_dir`, checking its sha256 (blocking: run it in a thread)."""
    private_dir(state_dir)
    private = pathlib.Path(tempfile.mkdtemp(prefix=".incoming-", dir=state_dir))
    kept = Kept(private / package.filename)
    digest = hashlib.sha256()
    try:
        with open(package.path, "rb") as src, open(kept.file, "wb", opener=private_opener) as out:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
    except FileNotFoundError:
        kept.discard()
        raise UserInputError(FIELD, f"the built package {package.path} no longer exists") from None
    except BaseException:
        kept.discard()
        raise
    if digest.hexdigest() != package.sha256:
        kept.discard()
        raise UserInputError(FIELD, f"the built package {package.filename} changed after it was built "
                                    f"(sha256 {digest.hexdigest()}, expected {package.sha256})")
    return kept


async def locate(plan: JobPlan, job_dir: pathlib.Path, env: Mapping[str, str],
                 job: str) -> tuple[list[pathlib.Path], list[str]]:
    """(files to install, directories to put the parents of on PYTHONPATH); `env` has the credentials."""
    found = sources(plan)
    remote = [s.value for s in found if s.kind == "remote"]
    fetched: dict[str, pathlib.Path] = {}
    if remote:
        fetch_all = fetcher()
        if fetch_all is None:
            raise PackagesUnavailable("Fetching gs:// and s3:// packages is not available on this server.")
        try:
            paths = await fetch_all(remote, job_dir / "packages", env, job=job)
        except PlatformError as e:
            raise PackagesUnavailable(f"Fetching the job's packages failed: {e}") from None
        fetched = dict(zip(remote, paths))
    if plan.package is not None:
        fetched[plan.package.uri] = job_dir / SHIPPED_DIR / plan.package.filename
    files: list[pathlib.Path] = []
    dirs: list[str] = []
    for s in found:
        path = pathlib.Path(fetched.get(s.value) or s.value).resolve()
        if path.is_dir():
            dirs.append(str(path.parent))
        else:
            files.append(path)
    return files, dirs


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def install_key(files: Sequence[pathlib.Path], python: str) -> str:
    """The digest of an install: the interpreter and every file's name and bytes (blocking)."""
    real = os.path.realpath(python)
    st = os.stat(real)
    digest = hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    for path in files:
        digest.update(f"\0{path.name}\0{_sha256(path)}".encode())
    return digest.hexdigest()


async def _lock(path: pathlib.Path, cancelled: asyncio.Event) -> int | None:
    """An exclusive lock on `path` (a file descriptor to close to release it); None once `cancelled`."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if cancelled.is_set():
                os.close(fd)
                return None
            await asyncio.sleep(_LOCK_POLL_S)


def _read_only_files(site: pathlib.Path) -> None:
    """Every file of an install loses its write permission: a job cannot change, in place, the code
    later jobs and parallel trials run (directories stay writable, so the owner may delete it all)."""
    for path in site.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(path.stat().st_mode & 0o555)


async def install(files: Sequence[pathlib.Path], *, python: str, state_dir: pathlib.Path, project: str,
                  log_path: pathlib.Path, env: Mapping[str, str], cancelled: asyncio.Event,
                  started: Callable[[asyncio.subprocess.Process | None], None]) -> pathlib.Path | None:
    """The ``site`` directory holding `files` installed (see the module docstring); None when
    `cancelled` first. `started` is told pip's process (then None), so a cancel can stop it."""
    key = await asyncio.to_thread(install_key, files, python)
    root = state_dir / INSTALLS_DIR / project
    await asyncio.to_thread(private_dir, root)
    target = root / key
    names = ", ".join(p.name for p in files)
    fd = await _lock(root / f"{key}.lock", cancelled)
    if fd is None:
        return None
    try:
        if (target / "site").is_dir():
            os.utime(target)  # when it was last used
            note(log_path, f"Using {names} installed before (sha256 {key[:12]}) from {target / 'site'}")
            return target / "site"
        for stale in [*root.glob(f".{key}-*"), target]:  # a crashed install's, or a directory without its site
            await asyncio.to_thread(shutil.rmtree, stale, True)  # (only the lock's holder installs this key)
        work = pathlib.Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            note(log_path, f"Installing {names} into {target / 'site'}")
            with open(log_path, "ab", opener=private_opener) as out:
                process = await asyncio.create_subprocess_exec(*tagged(log_path, [
                    python, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
                    "--target", str(work / "site"), *map(str, files)]), stdin=asyncio.subprocess.DEVNULL,
                    stdout=out, stderr=asyncio.subprocess.STDOUT, env=dict(env), cwd=work,
                    start_new_session=True, umask=PRIVATE_UMASK)
            started(process)
            try:
                code = await process.wait()
            finally:
                started(None)
            if cancelled.is_set():
                return None
            if code != 0:
                raise InstallFailed(code)
            await asyncio.to_thread(_read_only_files, work / "site")
            os.rename(work, target)
        finally:
            await asyncio.to_thread(shutil.rmtree, work, True)  # gone already once renamed
        return target / "site"
    finally:
        os.close(fd)
