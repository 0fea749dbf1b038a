"""The local job backend: Google's ``gcloud ai-platform local train`` as a `JobBackend`.

``backend = LocalBackend(state_dir)``, ``await backend.start()`` (or ``await LocalBackend.create(…)``),
then the `JobBackend` methods; ``await backend.close()`` at the end.

A job runs as one process per task (`JobPlan.task_names`): ``<python> -m <pythonModule> <args…>``
in ``<state_dir>/jobs/<project>/<jobId>/``, each in its own session (process group), stdout and
stderr written line by line, in order, into ``<task>.log`` there with each line's time and stream
in ``<task>.stamps`` (`local_procs`: `logs` gives them; stream-logs shows a stderr line as ERROR),
the environment from `local_env.task_env`. Code comes from
``packageUris`` (`local_package`): sdists/wheels (local paths, ``file://``, ``gs://``/``s3://``
fetched by `server_ext.runtimes.fetch`, or the package shipped with the job, `JobPlan.package`, copied
into the job's directory during `submit`) are installed with ``pip install --no-deps --target``
once per digest and project, and reused by every later job and trial with the same files
(`local_package.install`: pip's output goes to the installing job's master log, a one-line note
to the others'); a package directory is used in place (its
parent on ``PYTHONPATH``, as ``local train --package-path`` does). A custom container cannot run
here and is refused.

Guarantees:
- States: QUEUED at submit, then as `local_runner` runs the job (PREPARING, RUNNING, SUCCEEDED or
  FAILED); cancel → CANCELLING → CANCELLED once every process group ended (SIGTERM, SIGKILL after
  `grace_s`), unless the replicas' exits already decide the job. A final state means no process is
  left.
- Submit is all or nothing: a taken jobId (`JobExists`), a bad package URI, a shipped package whose
  bytes are not the plan's (sha256), a container image, a credential/dataset the project lacks or
  more processes than `max_processes` is refused before anything is created or started.
- At most `max_processes` processes per job: the constructor's argument (the server passes
  ``c.MLPlatformApp.local_max_processes``), else `local_limits.max_processes_from` the environment.
  More replicas are refused naming the count field (`local_limits.refuse_too_many`), and a sweep's
  ``maxParallelTrials`` (at most ``maxTrials``) × replicas per trial likewise
  (``trainingInput.hyperparameters.maxParallelTrials``).
- One backend owns a state directory (`own_state_dir`: a lock held from `start` to `close`); a
  second one, in any process, is refused with a `ConfigError` naming the directory and the owner.
- State lives in ``<state_dir>/jobs.sqlite`` (`local_store`). Each replica's exit status is also
  written next to its log by a ``/bin/sh`` wrapper (`local_procs`), so it survives the server. A new backend on
  the same state_dir shows finished jobs unchanged; re-adopts running ones (watched by polling
  pid + start time + boot id, so a reused pid is never taken for the job's process, and only a
  verified process is ever signalled); a job whose processes ended while no backend watched is
  judged from their exit files, and FAILED saying so where the status is unknown; a job that was
  still being prepared is FAILED.
- `close` stops background tasks only: the processes of running jobs keep running.
- Times are RFC 3339 UTC with ``Z``; every log line names the job as ``<project>/<jobId>``.
- A job with ``trainingInput.hyperparameters`` is a sweep (`local_sweeps`: an Optuna study whose
  trials are internal jobs of this backend, ``<jobId>/trial-<id>``, not listed); its tasks are
  read as ``trial-3`` and ``trial-3/worker-replica-1`` (`logs`), its trials' reports with
  `trial_metrics`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
import pathlib
import re
import shutil
import signal
import sys
from typing import AsyncIterator, Mapping

from hub_ext.core.errors import UserInputError
from hub_ext.local.files import private_dir
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL, LogLine
from server_ext.jobs.local.env import mounts_env, refuse_unrunnable
from server_ext.jobs.plan import JobPlan, task_name
from server_ext.runtimes.local import package as local_package
from server_ext.runtimes.local import runner as local_runner
from server_ext.runtimes.local.limits import max_processes_from, refuse_too_many
from server_ext.runtimes.local.procs import Replica, read_log
from server_ext.runtimes.local.runner import Live, now
from server_ext.runtimes.local.store import JobRecord, JobStore, own_state_dir
from server_ext.runtimes.local.sweep_space import initial_output
from server_ext.runtimes.local.sweeps import Sweeps, is_sweep

log = logging.getLogger("mlplatform.jobs.local")

_PROJECT = re.compile(r"[A-Za-z0-9_@][A-Za-z0-9._@-]{0,252}")


def _etag(job: Mapping) -> str:
    body = json.dumps({k: v for k, v in job.items() if k != "etag"}, sort_keys=True).encode()
    return base64.b64encode(hashlib.sha256(body).digest()[:12]).decode()


class LocalBackend:
    """`JobBackend` on this machine, and `local_store.JobRecords` for its sweeps. `env` replaces
    ``os.environ`` as every process's base environment."""

    def __init__(self, state_dir: pathlib.Path | str, python: str = sys.executable,
                 env: Mapping[str, str] | None = None, *, grace_s: float = 5.0, poll_s: float = 0.2,
                 max_processes: int | None = None):
        self.state_dir = pathlib.Path(state_dir)
        self.max_processes = max_processes_from(os.environ) if max_processes is None else int(max_processes)
        if self.max_processes < 1:
            raise ValueError(f"max_processes must be 1 or more, not {max_processes}")
        self.python = python
        self.grace_s, self.poll_s = grace_s, poll_s
        self._env = dict(env) if env is not None else None
        self._jobs: dict[tuple[str, str], JobRecord] = {}
        self._live: dict[tuple[str, str], Live] = {}
        self._tasks: set[asyncio.Task] = set()
        self._touched: set[tuple[str, str]] = set()  # records changed here: saved again on close
        self._store: JobStore | None = None
        self._lock: int | None = None  # the state directory's owner lock (a file descriptor)
        self._sweeps = Sweeps(self)

    @classmethod
    async def create(cls, state_dir: pathlib.Path | str, **kwargs) -> "LocalBackend":
        backend = cls(state_dir, **kwargs)
        await backend.start()
        return backend

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Own the state directory, open the state and recover every job (see the module docstring)."""
        self._lock = own_state_dir(self.state_dir)
        try:
            await self._recover()
        except BaseException:  # the next start must not find its own lock held
            if self._store is not None:
                await self._store.close()
                self._store = None
            os.close(self._lock)
            self._lock = None
            raise

    async def _recover(self) -> None:
        self._store = await JobStore.open(self.state_dir / "jobs.sqlite")
        sweeps = []
        for rec in await self._store.load():
            self._jobs[rec.key] = rec
            state = rec.job.get("state")
            if state in FINAL:
                continue
            if is_sweep(rec):  # resumed once every trial job is back
                sweeps.append(rec)
                continue
            if not rec.procs:
                if state == "CANCELLING":
                    await self.finish_record(rec, "CANCELLED")
                else:
                    await self.finish_record(rec, "FAILED", "The server stopped while the job was being prepared, "
                                                      "before its replicas started; submit it again.")
                continue
            live = Live()
            job_dir = self.job_dir(rec.project, rec.job_id)
            for task in rec.tasks:
                live.procs[task] = Replica.adopt(task, rec.procs.get(task) or {}, job_dir / f"{task}.exit")
            if state == "CANCELLING":
                live.cancel.set()
            self._live[rec.key] = live
            log.info("job %s/%s: re-adopting %s (pids %s)", rec.project, rec.job_id, state,
                     ", ".join(str(p.pid) for p in live.procs.values()))
            self._background(rec, live, local_runner.supervise(self, rec, live))
        self._sweeps.warm()
        for rec in sweeps:
            live = self._live[rec.key] = Live()
            if rec.job.get("state") == "CANCELLING":
                live.cancel.set()
            self._background(rec, live, self._sweeps.resume(rec, live.cancel))

    async def close(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._live.clear()
        if self._store is not None:
            for key in sorted(self._touched):  # a save the cancelled tasks were waiting for
                await self._store.save(self._jobs[key])
            await self._store.close()
            self._store = None
        await self._sweeps.close()
        if self._lock is not None:
            os.close(self._lock)  # releases the state directory
            self._lock = None

    def _background(self, rec: JobRecord, live: Live, coro) -> None:
        task = asyncio.create_task(self._guard(rec, live, coro), name=f"local-job-{rec.project}/{rec.job_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # cancelled before its first step (a close right after start), `_guard` never awaited `coro`:
        # close it, or Python warns "coroutine … was never awaited" (a no-op once it ran)
        task.add_done_callback(lambda t: coro.close() if t.cancelled() else None)

    async def _guard(self, rec: JobRecord, live: Live, coro) -> None:
        try:
            await coro
        except local_runner.Failed as e:
            await local_runner.stop_replicas(self, rec, live)
            cancelled = live.cancel.is_set()
            await self.finish_record(rec, "CANCELLED" if cancelled else "FAILED", None if cancelled else str(e))
        except Exception:  # a background task must end the job rather than vanish with it
            log.exception("job %s/%s: the local runtime failed", rec.project, rec.job_id)
            await local_runner.stop_replicas(self, rec, live)
            await self.finish_record(rec, "FAILED", "The local runtime failed to run the job; the server log has "
                                              "the details.")

    # ---- the JobBackend methods ----------------------------------------------------------------

    def job_dir(self, project: str, job_id: str) -> pathlib.Path:
        """Where a job's logs (``<task>.log``) and hypertune metrics (``<task>.metrics``) are."""
        return self.state_dir / "jobs" / project / job_id

    def _record(self, project: str, job_id: str) -> JobRecord:
        rec = self._jobs.get((project, job_id))
        if rec is None:
            raise JobNotFound(project, job_id)
        return rec

    # ---- the records, as `local_store.JobRecords` lends them to the sweeps ---------------------

    def find_record(self, project: str, job_id: str) -> JobRecord | None:
        return self._jobs.get((project, job_id))

    def ending(self, project: str, job_id: str) -> asyncio.Event | None:
        live = self._live.get((project, job_id))
        return None if live is None else live.done

    async def submit(self, plan: JobPlan, *, env: Mapping[str, str] | None = None) -> dict:
        """Create and start the job. `env`: extra variables for every replica (e.g. a trial's
        ``CLOUD_ML_TRIAL_ID``); they win over the computed ones except the cluster's."""
        if self._store is None:
            raise RuntimeError("LocalBackend.start() was not awaited")
        refuse_unrunnable(plan)
        refuse_too_many(plan, self.max_processes)
        if plan.sweep is not None:
            self._sweeps.check(plan)
        if not _PROJECT.fullmatch(plan.project):
            raise UserInputError("project", f"{plan.project!r} cannot name a local project directory")
        local_package.check(plan)
        mounts_env(plan)  # refuses a credential or dataset the project lacks
        key = (plan.project, plan.job.job_id)
        # the shipped sdist's file lives only until submit returns: copied (and checked) before anything is made
        kept = await asyncio.to_thread(local_package.keep, plan.package, self.state_dir) if plan.package else None
        try:
            if key in self._jobs:  # no await from here to the record being cached
                raise JobExists(*key)
            job = plan.job.to_json()
            job.update(state="QUEUED", createTime=now())
            if plan.sweep is not None:
                job["trainingOutput"] = initial_output(plan.sweep)
            job["etag"] = _etag(job)
            rec = JobRecord(plan.project, plan.job.job_id, plan.owner, job, [] if plan.sweep else plan.task_names())
            self._jobs[key] = rec
            try:
                await self._store.insert(rec)
            except BaseException:
                self._jobs.pop(key, None)
                raise
            job_dir = self.job_dir(*key)
            if job_dir.exists():  # left by a state file that was removed: never mix two jobs' logs
                await asyncio.to_thread(shutil.rmtree, job_dir)
            private_dir(job_dir.parent)
            job_dir.mkdir(mode=0o700)
            if kept is not None:
                kept.place(job_dir)
        finally:
            if kept is not None:
                kept.discard()
        base = dict(self._env if self._env is not None else os.environ)
        live = self._live[key] = Live()
        log.info("job %s/%s: submitted by %s, tasks %s", plan.project, plan.job.job_id, plan.owner,
                 ", ".join(rec.tasks))
        runner = self._sweeps.run(rec, plan, live.cancel) if plan.sweep else \
            local_runner.run(self, rec, plan, live, base, dict(env or {}))
        self._background(rec, live, runner)
        return json.loads(json.dumps(rec.job))

    async def get(self, project: str, job_id: str) -> dict:
        return json.loads(json.dumps(self._record(project, job_id).job))

    def running(self) -> bool:
        """Whether a job (or a sweep's trial) of any project has not ended yet."""
        return any(r.job.get("state") not in FINAL for r in self._jobs.values())

    async def list(self, project: str) -> list[dict]:
        return [json.loads(json.dumps(r.job)) for r in self._jobs.values()
                if r.project == project and "/" not in r.job_id]  # a sweep's trial jobs are not listed

    async def cancel(self, project: str, job_id: str) -> dict:
        rec = self._record(project, job_id)
        state = rec.job.get("state")
        if state in FINAL:
            raise JobFinished(job_id, state)
        if state == "CANCELLING":
            return json.loads(json.dumps(rec.job))
        log.info("job %s/%s: cancelling (%s)", project, job_id, state)
        self._set(rec, state="CANCELLING")
        answer = json.loads(json.dumps(rec.job))  # before the runner can move on
        live = self._live.get(rec.key)
        if live is not None:
            live.cancel.set()
            if live.installer is not None and live.installer.returncode is None:
                try:
                    os.killpg(live.installer.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        await self._save(rec)
        return answer

    def logs(self, project: str, job_id: str, task: str = "master-replica-0", *, follow: bool = False,
             after: int = 0) -> AsyncIterator[LogLine]:
        rec = self._record(project, job_id)
        name = shown = task_name(task)  # a sweep's lines are labelled with the asked name (trial-3)
        if is_sweep(rec):
            job_id, name = self._sweeps.trial_task(rec, name)
            rec = self._record(project, job_id)
        if name not in rec.tasks:
            raise UserInputError("task", f"the job has no task {task!r} (it has {', '.join(rec.tasks)})")
        path = self.job_dir(project, job_id) / f"{name}.log"
        return read_log(path, shown, max(0, int(after)), follow, lambda: self._task_ended(rec, name), self.poll_s)

    async def trial_metrics(self, project: str, job_id: str, trial_id: str) -> list[dict]:
        return await self._sweeps.trial_metrics(self._record(project, job_id), str(trial_id))

    # ---- the records ---------------------------------------------------------------------------

    def _set(self, rec: JobRecord, **fields) -> None:
        rec.job.update(fields)
        rec.job["etag"] = _etag(rec.job)
        self._touched.add(rec.key)

    async def _save(self, rec: JobRecord) -> None:
        if self._store is not None:
            await self._store.save(rec)

    async def update_record(self, rec: JobRecord, **fields) -> None:
        self._set(rec, **fields)
        await self._save(rec)

    async def finish_record(self, rec: JobRecord, state: str, message: str | None = None) -> None:
        fields = {"state": state, "endTime": now()}
        if message:
            fields["errorMessage"] = message
        await self.update_record(rec, **fields)
        live = self._live.pop(rec.key, None)
        if live is not None:
            live.done.set()
        if state == "SUCCEEDED" or state == "CANCELLED":
            log.info("job %s/%s: %s", rec.project, rec.job_id, state)
        else:
            log.warning("job %s/%s: %s: %s", rec.project, rec.job_id, state, message)

    # ---- logs ----------------------------------------------------------------------------------

    def _task_ended(self, rec: JobRecord, task: str) -> bool:
        if rec.job.get("state") in FINAL:
            return True
        live = self._live.get(rec.key)
        p = live.procs.get(task) if live is not None else None
        return p is not None and p.ended
