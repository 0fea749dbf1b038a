"""A local job's package is installed once per digest and reused (`local_package.install`): a
second job with the same sdist runs no pip (its log says so in one line; every line of either log
carries its time and stream, pip's and the platform's notes too), two jobs starting at once
install it once, and a changed sdist (new bytes) is installed again."""

from __future__ import annotations

import asyncio
import io
import tarfile

import pytest

from server_ext.runtimes.local.backend import LocalBackend
from tests.local.test_local_backend import make_plan, sdist, texts, uid, wait_for  # noqa: F401 (sdist: fixture)

pytestmark = pytest.mark.local

PIP = "Successfully installed mlplatform-example-trainer"


@pytest.fixture
async def backend(tmp_path):
    b = await LocalBackend.create(tmp_path / "state", grace_s=2.0, poll_s=0.05)
    yield b
    await b.close()


async def run(b: LocalBackend, package, *, at_once: int = 1) -> list[list[str]]:
    """Submit `at_once` jobs of `package` together; each one's master log once it SUCCEEDED."""
    ids = [uid("reuse") for _ in range(at_once)]
    for job_id in ids:
        await b.submit(make_plan(job_id, ["--epochs=1", "--sleep=0"], [str(package)]))
    jobs = await asyncio.gather(*(wait_for(b, "alice", job_id) for job_id in ids))
    assert [j["state"] for j in jobs] == ["SUCCEEDED"] * at_once, jobs
    return [await texts(b, "alice", job_id) for job_id in ids]


def changed_copy(sdist, where):
    """The same sdist with one byte of code changed (same file name, new digest)."""
    out = where / sdist.name
    with tarfile.open(sdist) as src, tarfile.open(out, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("trainer/task.py"):
                data += b"# changed\n"
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


async def test_the_second_job_reuses_the_install_and_a_changed_package_installs_again(backend, sdist, tmp_path):
    (first,) = await run(backend, sdist)
    site_root = backend.state_dir / "packages" / "alice"
    assert first[0].startswith(f"Installing {sdist.name} into {site_root}/") and any(PIP in t for t in first)

    (second,) = await run(backend, sdist)
    assert second[0].startswith(f"Using {sdist.name} installed before (sha256 ") and str(site_root) in second[0]
    assert not any(PIP in t or "Processing" in t for t in second)  # no pip run: its lines are not there
    assert second[1:] and not second[1].startswith(("Using", "Installing"))  # the trainer's own output next
    assert len(first) - len(second) >= 3
    # every line, the platform's notes and pip's output included, carries its time and stream
    for job in (await backend.list("alice"))[:2]:
        lines = [line async for line in backend.logs("alice", job["jobId"])]
        assert lines and all(line.time and line.stream for line in lines), [
            (line.text, line.time, line.stream) for line in lines if not (line.time and line.stream)]

    changed = changed_copy(sdist, tmp_path)
    (third,) = await run(backend, changed)
    assert third[0].startswith(f"Installing {sdist.name} into {site_root}/") and any(PIP in t for t in third)
    assert third[0] != first[0]  # another directory: another digest
    # the code later jobs run cannot be changed in place by a job (its files are read-only)
    code = [p for p in site_root.rglob("task.py")]
    assert code and all(not p.stat().st_mode & 0o222 for p in code)
    installs = sorted(p.name for p in site_root.iterdir() if p.is_dir())
    assert len(installs) == 2 and not any(name.startswith(".") for name in installs)  # no half install left


async def test_jobs_starting_together_install_once(backend, sdist):
    logs = await run(backend, sdist, at_once=3)
    firsts = sorted(log[0].split(" ")[0] for log in logs)
    assert firsts == ["Installing", "Using", "Using"], [log[0] for log in logs]
    assert sum(any(PIP in t for t in log) for log in logs) == 1
