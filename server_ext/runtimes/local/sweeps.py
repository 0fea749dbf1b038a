"""Hyperparameter sweeps on the local runtime: an Optuna study whose trials are local jobs.

`LocalBackend.submit(plan)` with ``plan.sweep`` set hands the sweep here (`Sweeps.run`). The sweep
is a job record like any other (its ``trainingOutput`` is the answer's); each trial is an internal
job of the same backend, ``<jobId>/trial-<id>`` (hidden from `list`; its directory is
``<sweep's dir>/trial-<id>/``), running the plan's replicas with the trial's ``--name=value`` flags
appended and ``CLOUD_ML_TRIAL_ID``, ``CLOUD_ML_HP_METRIC_TAG`` and ``CLOUD_ML_JOB_ID`` (the sweep's
jobId, as AI Platform's trials saw it) in their environment. Decisions are `local_sweep_space`'s.

Guarantees:
- The study lives in Optuna's RDB storage, ``<state_dir>/sweeps.sqlite``, named ``<project>/<jobId>``;
  every Optuna call runs on one worker thread, so the event loop never blocks on it and calls
  never race. Each study trial of this sweep carries the user attribute ``trialId``.
- At most ``maxParallelTrials`` trials run at once and ``maxTrials`` are started in all (fewer for a
  grid with fewer points). Trial ids are "1", "2", … in the order trials start. A sweep whose
  parallel trials (``maxParallelTrials``, at most ``maxTrials``) × replicas per trial exceed the
  backend's `LocalBackend.max_processes` is refused at submit, naming ``maxParallelTrials``.
- A trial's objective is the last value of the metric tag in its master's metrics file
  (``<trial dir>/master-replica-0.metrics``). The trial is SUCCEEDED when its job succeeded and it
  reported a finite value; FAILED when its job failed or it reported none; CANCELLED when the sweep
  stopped it (cancel, or too many failures).
- Early stopping (``enableTrialEarlyStopping``): every `watch_s` each running trial's new reports
  are given to the study (step = ``global_step``) and a trial that MedianPruner prunes has its job
  cancelled. As on AI Platform such a trial is SUCCEEDED with ``isTrialStoppedEarly: true`` and its
  last report as ``finalMetric``; the study records it as PRUNED.
- The sweep is RUNNING once its first trial starts; SUCCEEDED when no trial is left to start or
  run and at least one succeeded; FAILED when none did, or as soon as `failure_limit` trials failed
  (the running ones are then stopped); cancel → CANCELLING → CANCELLED once every trial ended.
- Restart: a finished sweep is shown unchanged. An unfinished one resumes: its running trials are
  re-adopted with their jobs (`LocalBackend.start`) and judged when they end, a trial recorded but
  never started is FAILED, and new trials continue until ``maxTrials``; a sweep whose study was
  not created yet is FAILED (submit it again).
- ``resumePreviousJobId``: the previous sweep's study trials (finished ones as they are, running
  ones as failed) are copied into the new study before its first trial, so the sampler continues
  from them (a grid skips the points already run) and the study's best value can only improve. The
  new job's ``trainingOutput`` lists its own trials only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import alembic.command  # noqa: F401  (imported here, not first by Optuna on the worker thread: two
import alembic.migration  # noqa: F401  threads importing alembic at once can deadlock on import locks)
import optuna
from optuna.trial import TrialState

from hub_ext.core.errors import PlatformError, UserInputError
from hub_ext.local.files import private_dir, private_opener
from server_ext.errors import JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL
from server_ext.jobs.hptuning import FIELD, Spec, at_once, parse_spec
from server_ext.runtimes.local import sweep_space as space
from server_ext.jobs.plan import JobPlan, task_name
from server_ext.runtimes.local.package import SHIPPED_DIR
from server_ext.runtimes.local.store import JobRecord, JobRecords

log = logging.getLogger("mlplatform.jobs.local")
# Optuna's records go through the standard logging tree (the server's log configuration, or
# nothing below WARNING in the kubectl plugin) instead of its own stderr handler.
optuna.logging.disable_default_handler()
optuna.logging.enable_propagation()
MASTER = "master-replica-0"


def _connect(path: str) -> sqlite3.Connection:
    """The study storage's connections: WAL (readers never wait for the writer) and ``synchronous=NORMAL``
    (a commit is durable once the WAL is synced at checkpoints: a crash of the server loses nothing,
    a power cut the last moments — which a restarted sweep treats as trials that never reported)."""
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _now() -> str:
    return space.rfc3339(time.time())


def is_sweep(rec: JobRecord) -> bool:
    return "/" not in rec.job_id and bool((rec.job.get("trainingInput") or {}).get("hyperparameters"))


@dataclass
class _Sweep:
    rec: JobRecord
    spec: Spec
    cancel: asyncio.Event  # set when the sweep is cancelled
    study: optuna.Study
    template: JobPlan
    numbers: dict[str, int] = field(default_factory=dict)  # trialId → study trial number
    running: dict[str, tuple[str, str]] = field(default_factory=dict)  # trialId → the trial job's key
    reported: dict[str, int] = field(default_factory=dict)  # trialId → last step given to the study
    stopped_early: set[str] = field(default_factory=set)
    last_error: str = ""

    @property
    def trials(self) -> list[dict]:
        return self.rec.job["trainingOutput"].setdefault("trials", [])

    @property
    def name(self) -> str:
        return f"{self.rec.project}/{self.rec.job_id}"


class Sweeps:
    """The sweeps of one `LocalBackend`, which owns the records, jobs and background tasks and is
    reached only through `local_store.JobRecords`."""

    watch_s = 0.5  # how often early stopping reads the running trials' reports

    def __init__(self, jobs: JobRecords):
        self.jobs = jobs
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="local-sweeps")
        self._storage: optuna.storages.RDBStorage | None = None

    async def _call(self, fn, *args, **kwargs) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def _store(self) -> optuna.storages.RDBStorage:  # on the worker thread
        if self._storage is None:
            private_dir(self.jobs.state_dir)
            path = str(self.jobs.state_dir / "sweeps.sqlite")
            os.close(private_opener(path, os.O_RDWR | os.O_CREAT))  # 0600, and so its -wal and -shm
            self._storage = optuna.storages.RDBStorage(f"sqlite:///{path}",
                                                       engine_kwargs={"creator": functools.partial(_connect, path)})
        return self._storage

    def warm(self) -> None:
        """Open the study storage on the worker thread now (creating its tables takes ~0.5 s), without
        waiting: the first sweep's calls queue behind it."""
        def open_storage() -> None:
            try:
                self._store()
            except Exception:  # the first sweep that needs it raises it again, then to its job
                log.exception("sweeps: opening %s failed", self.jobs.state_dir / "sweeps.sqlite")

        self._pool.submit(open_storage)

    async def close(self) -> None:
        await asyncio.to_thread(self._pool.shutdown, True)

    # ---- submit and resume ---------------------------------------------------------------------

    def check(self, plan: JobPlan) -> None:
        """The sweep's own refusals, before anything is created."""
        spec = plan.sweep
        space.check_grid(spec)
        each, most, parallel = plan.total_replicas, self.jobs.max_processes, at_once(spec)
        if parallel * each > most:
            raise UserInputError(f"{FIELD}.maxParallelTrials",
                                 f"{parallel} trials at once × {each} replica{'s' if each > 1 else ''} "
                                 f"each is more than the {most} processes the local runtime runs for one job "
                                 f"(at most {most // each} trials at once here; "
                                 "c.MLPlatformApp.local_max_processes or $MLPLATFORM_LOCAL_MAX_PROCESSES)")
        if spec.resume_from:
            prev = self.jobs.find_record(plan.project, spec.resume_from)
            if prev is None or not is_sweep(prev):
                raise UserInputError(f"{FIELD}.resumePreviousJobId",
                                     f"no hyperparameter tuning job {spec.resume_from!r} in project {plan.project!r}")

    def _sampler(self, rec: JobRecord, spec: Spec):
        return dict(sampler=space.sampler(spec, space.seed_of(rec.project, rec.job_id)), pruner=space.pruner(spec))

    def _create(self, rec: JobRecord, spec: Spec, template: str) -> optuna.Study:  # on the worker thread
        storage, name = self._store(), f"{rec.project}/{rec.job_id}"
        try:  # left by a state file that was removed: never mix two sweeps' trials
            optuna.delete_study(study_name=name, storage=storage)
        except KeyError:
            pass
        study = optuna.create_study(storage=storage, study_name=name, direction=space.direction(spec),
                                    **self._sampler(rec, spec))
        if spec.resume_from:
            try:
                prev = optuna.load_study(study_name=f"{rec.project}/{spec.resume_from}", storage=storage)
            except KeyError:
                prev = None
            for t in prev.get_trials(deepcopy=False) if prev is not None else []:
                study.add_trial(space.copied_trial(t, spec.resume_from))
        study.set_user_attr("template", template)  # last: its presence says the study is complete
        return study

    def _load(self, rec: JobRecord, spec: Spec) -> optuna.Study | None:  # on the worker thread
        try:
            study = optuna.load_study(study_name=f"{rec.project}/{rec.job_id}", storage=self._store(),
                                      **self._sampler(rec, spec))
        except KeyError:
            return None
        return study if "template" in study.user_attrs else None

    async def run(self, rec: JobRecord, plan: JobPlan, cancel: asyncio.Event) -> None:
        """The submitted sweep, from its study's creation to its end (a `LocalBackend` background task);
        `cancel` is set when it is cancelled."""
        if cancel.is_set():
            return await self.jobs.finish_record(rec, "CANCELLED")
        await self.jobs.update_record(rec, state="PREPARING")
        uris = plan.package_uris
        if plan.package is not None:
            kept = str(self.jobs.job_dir(rec.project, rec.job_id) / SHIPPED_DIR / plan.package.filename)
            uris = tuple(kept if u == plan.package.uri else u for u in uris)
        template = space.template_json(plan, uris)
        study = await self._call(self._create, rec, plan.sweep, template)
        if plan.sweep.resume_from:
            log.info("sweep %s/%s: continues %s (%d trials)", rec.project, rec.job_id, plan.sweep.resume_from,
                     len(await self._call(study.get_trials, deepcopy=False)))
        await self._drive(_Sweep(rec, plan.sweep, cancel, study, space.template_of(template)))

    async def resume(self, rec: JobRecord, cancel: asyncio.Event) -> None:
        """An unfinished sweep found by `LocalBackend.start` (its trial jobs are loaded already)."""
        spec = parse_spec(rec.job["trainingInput"]["hyperparameters"])
        study = await self._call(self._load, rec, spec)
        if study is None:
            if cancel.is_set():
                return await self.jobs.finish_record(rec, "CANCELLED")
            return await self.jobs.finish_record(rec, "FAILED", "The server stopped while the sweep was being "
                                                                "prepared, before its first trial; submit it again.")
        s = _Sweep(rec, spec, cancel, study, space.template_of(study.user_attrs["template"]))
        for t in await self._call(study.get_trials, deepcopy=False):
            tid = t.user_attrs.get("trialId")
            if tid is not None:
                s.numbers[tid] = t.number  # a later trial with the same id (an orphan's retry) wins
                if t.intermediate_values:
                    s.reported[tid] = max(t.intermediate_values)
                if t.user_attrs.get("stoppedEarly"):
                    s.stopped_early.add(tid)
        for entry in s.trials:
            if entry["state"] in FINAL:
                continue
            key = (rec.project, space.trial_job_id(rec.job_id, entry["trialId"]))
            if self.jobs.find_record(*key) is not None:
                s.running[entry["trialId"]] = key
            else:
                await self._record(s, entry["trialId"], "FAILED", TrialState.FAIL)
        running_numbers = {s.numbers.get(tid) for tid in s.running}
        for t in await self._call(study.get_trials, deepcopy=False, states=(TrialState.RUNNING,)):
            if "trialId" in t.user_attrs and t.number not in running_numbers:  # asked, never recorded
                await self._call(study.tell, t.number, state=TrialState.FAIL, skip_if_finished=True)
        log.info("sweep %s: resuming (%d trials, %d running)", s.name, len(s.trials), len(s.running))
        await self._drive(s)

    # ---- the sweep's loop ----------------------------------------------------------------------

    async def _drive(self, s: _Sweep) -> None:
        try:
            await self._loop(s)
        except Exception:  # the trials must not outlive their sweep (the backend's guard then FAILS it)
            await self._stop_running(s)
            raise

    async def _loop(self, s: _Sweep) -> None:
        spec = s.spec
        while True:
            await self._collect(s)
            if s.cancel.is_set():
                await self._stop_running(s)
                return await self.jobs.finish_record(s.rec, "CANCELLED")
            failed, succeeded = space.counts(s.trials)
            if space.sweep_failed(spec, failed, succeeded):
                await self._stop_running(s)
                return await self.jobs.finish_record(s.rec, "FAILED", f"{failed} trials failed (the sweep fails "
                                                                      f"at {space.failure_limit(spec)}); the last: "
                                                                      f"{s.last_error}")
            while (len(s.running) < spec.max_parallel and len(s.trials) < spec.max_trials
                   and not s.cancel.is_set() and await self._more(s)):
                await self._start(s)
            if not s.running:
                if succeeded:
                    return await self.jobs.finish_record(s.rec, "SUCCEEDED")
                return await self.jobs.finish_record(s.rec, "FAILED", f"No trial succeeded; the last: {s.last_error}")
            await self._wait(s)
            if spec.early_stopping:
                await self._watch(s)

    async def _more(self, s: _Sweep) -> bool:
        if s.spec.algorithm != "GRID_SEARCH":
            return True
        grid = space.grid_space(s.spec)

        def left() -> int:
            used = [t for t in s.study.get_trials(deepcopy=False) if t.system_attrs.get("search_space") == grid]
            return space.grid_size(s.spec) - len({t.system_attrs.get("grid_id") for t in used})

        return await self._call(left) > 0

    def _ask(self, s: _Sweep, tid: str) -> tuple[int, dict]:  # on the worker thread
        trial = s.study.ask(space.distributions(s.spec))
        trial.set_user_attr("trialId", tid)
        return trial.number, trial.params

    async def _start(self, s: _Sweep) -> None:
        rec, tid = s.rec, str(len(s.trials) + 1)
        number, params = await self._call(self._ask, s, tid)
        s.numbers[tid] = number
        values = space.from_study(s.spec, params)
        s.trials.append({"trialId": tid, "hyperparameters": space.hyperparameters(s.spec, values),
                         "state": "RUNNING", "startTime": _now(), "isTrialStoppedEarly": False})
        preparing = rec.job["state"] in ("QUEUED", "PREPARING")  # not CANCELLING: a cancel may have come meanwhile
        first = {"state": "RUNNING", "startTime": s.trials[-1]["startTime"]} if preparing else {}
        await self.jobs.update_record(rec, **first)  # recorded before its job exists: a restart then knows of it
        plan = space.trial_plan(s.template, s.spec, rec.job_id, tid, values)
        env = {"CLOUD_ML_TRIAL_ID": tid, "CLOUD_ML_HP_METRIC_TAG": s.spec.metric, "CLOUD_ML_JOB_ID": rec.job_id}
        try:
            await self.jobs.submit(plan, env=env)
        except PlatformError as e:
            s.last_error = f"trial {tid} could not start: {e}"
            await self._record(s, tid, "FAILED", TrialState.FAIL)
            return
        s.running[tid] = (rec.project, plan.job.job_id)
        log.info("sweep %s: trial %s started: %s", s.name, tid, " ".join(plan.args[len(s.template.args):]))

    async def _wait(self, s: _Sweep) -> None:
        """Until a trial job ends or the sweep is cancelled (or `watch_s`, with early stopping)."""
        events = [s.cancel]
        for key in s.running.values():
            done = self.jobs.ending(*key)
            if done is None:
                return
            events.append(done)
        waits = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waits, timeout=self.watch_s if s.spec.early_stopping else 30.0,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    def _reports(self, s: _Sweep, tid: str) -> list[space.Report]:  # blocking: in a thread
        path = self.jobs.job_dir(s.rec.project, space.trial_job_id(s.rec.job_id, tid)) / f"{MASTER}.metrics"
        try:
            return space.read_reports(path.read_text(errors="replace"), s.spec.metric)
        except OSError:
            return []

    async def _collect(self, s: _Sweep) -> None:
        """Record every trial whose job has ended."""
        for tid, key in list(s.running.items()):
            child = self.jobs.find_record(*key).job
            if child["state"] not in FINAL or self.jobs.ending(*key) is not None:
                continue
            del s.running[tid]
            reports = await asyncio.to_thread(self._reports, s, tid)
            metric = space.final_metric(reports)
            rest = [r for r in reports if r.step > s.reported.get(tid, -1) and r.value == r.value]
            if s.spec.early_stopping and rest and child["state"] == "SUCCEEDED":  # the pruner compares by step
                await self._call(self._report, s, tid, rest, prune=False)
            if child["state"] == "SUCCEEDED" and metric:
                await self._record(s, tid, "SUCCEEDED", TrialState.COMPLETE, metric, child.get("endTime"))
            elif child["state"] == "CANCELLED" and tid in s.stopped_early and metric:
                await self._record(s, tid, "SUCCEEDED", TrialState.PRUNED, metric, child.get("endTime"), True)
            elif child["state"] == "CANCELLED":
                await self._record(s, tid, "CANCELLED", TrialState.FAIL, metric, child.get("endTime"))
            else:
                s.last_error = f"trial {tid}: " + (child.get("errorMessage") or "it reported no value of "
                                                   f"{s.spec.metric!r} (hypertune's metrics file)")
                log.warning("sweep %s: %s", s.name, s.last_error)
                await self._record(s, tid, "FAILED", TrialState.FAIL, metric, child.get("endTime"))

    async def _record(self, s: _Sweep, tid: str, state: str, told: TrialState, metric: dict | None = None,
                      end: str | None = None, early: bool = False) -> None:
        number = s.numbers.get(tid)
        if number is not None:
            if told == TrialState.COMPLETE:
                await self._call(s.study.tell, number, metric["objectiveValue"], skip_if_finished=True)
            else:
                await self._call(s.study.tell, number, state=told, skip_if_finished=True)
        entry = next(t for t in s.trials if t["trialId"] == tid)
        entry.update(state=state, endTime=end or _now(), isTrialStoppedEarly=early)
        if metric:
            entry["finalMetric"] = metric
        out = s.rec.job["trainingOutput"]
        out["completedTrialCount"] = str(space.counts(s.trials)[1])
        await self.jobs.update_record(s.rec)
        log.info("sweep %s: trial %s %s%s", s.name, tid, state, f" ({metric['objectiveValue']:g})" if metric else "")

    async def _stop_running(self, s: _Sweep) -> None:
        for key in s.running.values():
            try:
                await self.jobs.cancel(*key)
            except (JobFinished, JobNotFound):
                pass
        while s.running:
            await self._wait(s)
            await self._collect(s)

    def _report(self, s: _Sweep, tid: str, reports: list[space.Report], prune: bool = True) -> bool:
        """Give the study a trial's new reports; whether the pruner stops it (on the worker thread)."""
        storage = self._store()
        trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(s.name),
                                                                   s.numbers[tid])
        trial = optuna.trial.Trial(s.study, trial_id)
        for r in reports:
            trial.report(r.value, r.step)
        if not prune or not trial.should_prune():
            return False
        trial.set_user_attr("stoppedEarly", True)
        return True

    async def _watch(self, s: _Sweep) -> None:
        """Early stopping: new reports to the study; a trial the pruner stops has its job cancelled."""
        for tid, key in list(s.running.items()):
            if tid in s.stopped_early or tid not in s.numbers:
                continue
            last = s.reported.get(tid, -1)
            new = [r for r in await asyncio.to_thread(self._reports, s, tid) if r.step > last and r.value == r.value]
            if not new:
                continue
            s.reported[tid] = new[-1].step
            if await self._call(self._report, s, tid, new):
                s.stopped_early.add(tid)
                log.info("sweep %s: trial %s stopped early at step %s (%g)", s.name, tid, new[-1].step, new[-1].value)
                try:
                    await self.jobs.cancel(*key)
                except JobFinished:
                    pass

    # ---- reading a sweep -----------------------------------------------------------------------

    def trial_task(self, rec: JobRecord, task: str) -> tuple[str, str]:
        """``trial-3`` / ``trial-3/worker-replica-1`` → (the trial job's id, its task)."""
        if not task.startswith("trial-"):
            raise UserInputError("task", f"a hyperparameter tuning job's logs are its trials': trial-1, "
                                         f"trial-1/worker-replica-0, … (not {task!r})")
        trial, _, inner = task.partition("/")
        job_id = space.trial_job_id(rec.job_id, trial.removeprefix("trial-"))
        if self.jobs.find_record(rec.project, job_id) is None:
            raise UserInputError("task", f"the sweep has no {trial} (yet)")
        return job_id, task_name(inner) if inner else MASTER

    async def trial_metrics(self, rec: JobRecord, trial_id: str) -> list[dict]:
        trials = rec.job.get("trainingOutput", {}).get("trials", []) if is_sweep(rec) else []
        if not any(t["trialId"] == trial_id for t in trials):
            raise JobNotFound(rec.project, f"{rec.job_id}/trials/{trial_id}")
        spec = parse_spec(rec.job["trainingInput"]["hyperparameters"])
        path = self.jobs.job_dir(rec.project, space.trial_job_id(rec.job_id, trial_id)) / f"{MASTER}.metrics"
        text = await asyncio.to_thread(lambda: path.read_text(errors="replace") if path.exists() else "")
        return space.series(space.read_reports(text, spec.metric))
