"""Where a local job's code comes from: its ``packageUris`` resolved to files to install and
directories to run in place, the package shipped with it (``--package-path``) included.

- `check(plan)`: the refusals made at submit, before anything is created: an unknown scheme (a
  ``configmap://`` URI that is not the job's own shipped package included; `local_env.package_sources`),
  a ``gs://``/``s3://`` entry where this server cannot fetch, a local path that does not exist.
- `keep(package, state_dir)`: `JobService.create` builds the sdist into a temporary directory that
  is removed as soon as ``submit`` returns, so submit keeps a copy first. The sdist is copied, and
  hashed as it is copied, into a private directory of the state dir (the job's directory is on the
  same filesystem, so `Kept.place` is a rename); a copy whose sha256 is not the plan's is refused
  with `UserInputError` naming ``--package-path``. The copy is therefore the very bytes the job's
  URI names — ``configmap://<job>-package/<file>`` or the staging bucket's
  ``…/packages/<sha256>/<file>`` — and that URI is never read: the local runtime reads no ConfigMap,
  fetches nothing it already holds and uploads nothing to the staging bucket.
- `locate(plan, job_dir, env, job)`: fetches the remote entries into ``<job_dir>/packages/`` and
  returns (the sdists/wheels to install, in ``packageUris`` order, the shipped one from
  ``<job_dir>/shipped/``; the package directories, whose parents go on ``PYTHONPATH``). A fetch that
  fails raises `PackagesUnavailable`, whose message is the job's errorMessage.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass
from typing import Mapping

from hub_ext.errors import PlatformError, UserInputError
from hub_ext.local_files import private_dir, private_opener

from .local_env import PackageSource, package_sources
from .plan import JobPlan, ShippedPackage

SHIPPED_DIR = "shipped"
_CHUNK = 1 << 20


class PackagesUnavailable(Exception):
    """The job's packages could not be fetched; the message is the job's errorMessage."""


def fetcher():
    """`server_ext.jobs.fetch.fetch_all`, or None where that module is not installed."""
    try:
        from .fetch import fetch_all
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
        raise UserInputError("--package-path", f"the built package {package.path} no longer exists") from None
    except BaseException:
        kept.discard()
        raise
    if digest.hexdigest() != package.sha256:
        kept.discard()
        raise UserInputError("--package-path", f"the built package {package.filename} changed after it was built "
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
