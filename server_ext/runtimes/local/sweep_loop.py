"""A local sweep's loop: its trials started, waited for, judged and told to the study, until the
sweep ends (`local_sweeps` submits and resumes sweeps and reads them; `sweep_studies` holds the
Optuna side; the decisions are `sweep_space`'s).

Guarantees of `SweepLoop.drive`:

- at most ``maxParallelTrials`` trials run at once and ``maxTrials`` are started in all (fewer for
  a grid with fewer points); trial ids are "1", "2", … in the order trials start, each recorded in
  the sweep before its job exists (a restart then knows of it); a trial is an internal job of the
  backend, ``<jobId>/trial-<id>``, with ``CLOUD_ML_TRIAL_ID``, ``CLOUD_ML_HP_METRIC_TAG`` and
  ``CLOUD_ML_JOB_ID`` (the sweep's jobId) in its environment;
- a trial's objective is the last value of the metric tag in its master's metrics file
  (``<trial dir>/master-replica-0.metrics``). It is SUCCEEDED when its job succeeded and it reported
  a finite value; FAILED when its job failed or it reported none; CANCELLED when the sweep stopped
  it; the study is told each outcome once;
- early stopping: every `watch_s` each running trial's new reports are given to the study (step =
  ``global_step``) and a trial the pruner prunes has its job cancelled; it is then SUCCEEDED with
  ``isTrialStoppedEarly: true`` and its last report as ``finalMetric`` (the study: PRUNED);
- the sweep is RUNNING once its first trial starts; SUCCEEDED when no trial is left to start or run
  and at least one succeeded; FAILED when none did, or as soon as `sweep_space.failure_limit`
  trials failed; cancelled → CANCELLED; in every case (a failure of the loop itself too) no trial
  job outlives its sweep.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import optuna
from optuna.trial import TrialState

from hub_ext.core.errors import PlatformError
from server_ext.errors import JobFinished, JobNotFound
from server_ext.jobs.backend import FINAL
from server_ext.jobs.hptuning import Spec
from server_ext.jobs.plan import JobPlan
from server_ext.runtimes.local import sweep_space as space
from server_ext.runtimes.local.store import JobRecord, JobRecords
from server_ext.runtimes.local.sweep_studies import Studies

log = logging.getLogger("mlplatform.jobs.local")
MASTER = "master-replica-0"


def _now() -> str:
    return space.rfc3339(time.time())


@dataclass
class Sweep:
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


class SweepLoop:
    """Drives the sweeps of one backend (`jobs`), their studies in `studies`."""

    watch_s = 0.5  # how often early stopping reads the running trials' reports

    def __init__(self, jobs: JobRecords, studies: Studies):
        self.jobs, self.studies = jobs, studies

    async def drive(self, s: Sweep) -> None:
        try:
            await self._loop(s)
        except Exception:  # the trials must not outlive their sweep (the backend's guard then FAILS it)
            await self._stop_running(s)
            raise

    async def _loop(self, s: Sweep) -> None:
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

    async def _more(self, s: Sweep) -> bool:
        if s.spec.algorithm != "GRID_SEARCH":
            return True
        grid = space.grid_space(s.spec)

        def left() -> int:
            used = [t for t in s.study.get_trials(deepcopy=False) if t.system_attrs.get("search_space") == grid]
            return space.grid_size(s.spec) - len({t.system_attrs.get("grid_id") for t in used})

        return await self.studies.call(left) > 0

    def _ask(self, s: Sweep, tid: str) -> tuple[int, dict]:  # on the worker thread
        trial = s.study.ask(space.distributions(s.spec))
        trial.set_user_attr("trialId", tid)
        return trial.number, trial.params

    async def _start(self, s: Sweep) -> None:
        rec, tid = s.rec, str(len(s.trials) + 1)
        number, params = await self.studies.call(self._ask, s, tid)
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
            await self.record(s, tid, "FAILED", TrialState.FAIL)
            return
        s.running[tid] = (rec.project, plan.job.job_id)
        log.info("sweep %s: trial %s started: %s", s.name, tid, " ".join(plan.args[len(s.template.args):]))

    async def _wait(self, s: Sweep) -> None:
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

    def _reports(self, s: Sweep, tid: str) -> list[space.Report]:  # blocking: in a thread
        path = self.jobs.job_dir(s.rec.project, space.trial_job_id(s.rec.job_id, tid)) / f"{MASTER}.metrics"
        try:
            return space.read_reports(path.read_text(errors="replace"), s.spec.metric)
        except OSError:
            return []

    async def _collect(self, s: Sweep) -> None:
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
                await self.studies.call(self._report, s, tid, rest, prune=False)
            if child["state"] == "SUCCEEDED" and metric:
                await self.record(s, tid, "SUCCEEDED", TrialState.COMPLETE, metric, child.get("endTime"))
            elif child["state"] == "CANCELLED" and tid in s.stopped_early and metric:
                await self.record(s, tid, "SUCCEEDED", TrialState.PRUNED, metric, child.get("endTime"), True)
            elif child["state"] == "CANCELLED":
                await self.record(s, tid, "CANCELLED", TrialState.FAIL, metric, child.get("endTime"))
            else:
                s.last_error = f"trial {tid}: " + (child.get("errorMessage") or "it reported no value of "
                                                   f"{s.spec.metric!r} (hypertune's metrics file)")
                log.warning("sweep %s: %s", s.name, s.last_error)
                await self.record(s, tid, "FAILED", TrialState.FAIL, metric, child.get("endTime"))

    async def record(self, s: Sweep, tid: str, state: str, told: TrialState, metric: dict | None = None,
                     end: str | None = None, early: bool = False) -> None:
        number = s.numbers.get(tid)
        if number is not None:
            if told == TrialState.COMPLETE:
                await self.studies.call(s.study.tell, number, metric["objectiveValue"], skip_if_finished=True)
            else:
                await self.studies.call(s.study.tell, number, state=told, skip_if_finished=True)
        entry = next(t for t in s.trials if t["trialId"] == tid)
        entry.update(state=state, endTime=end or _now(), isTrialStoppedEarly=early)
        if metric:
            entry["finalMetric"] = metric
        out = s.rec.job["trainingOutput"]
        out["completedTrialCount"] = str(space.counts(s.trials)[1])
        await self.jobs.update_record(s.rec)
        log.info("sweep %s: trial %s %s%s", s.name, tid, state, f" ({metric['objectiveValue']:g})" if metric else "")

    async def _stop_running(self, s: Sweep) -> None:
        for key in s.running.values():
            try:
                await self.jobs.cancel(*key)
            except (JobFinished, JobNotFound):
                pass
        while s.running:
            await self._wait(s)
            await self._collect(s)

    def _report(self, s: Sweep, tid: str, reports: list[space.Report], prune: bool = True) -> bool:
        """Give the study a trial's new reports; whether the pruner stops it (on the worker thread)."""
        storage = self.studies.store()
        trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(s.name),
                                                                   s.numbers[tid])
        trial = optuna.trial.Trial(s.study, trial_id)
        for r in reports:
            trial.report(r.value, r.step)
        if not prune or not trial.should_prune():
            return False
        trial.set_user_attr("stoppedEarly", True)
        return True

    async def _watch(self, s: Sweep) -> None:
        """Early stopping: new reports to the study; a trial the pruner stops has its job cancelled."""
        for tid, key in list(s.running.items()):
            if tid in s.stopped_early or tid not in s.numbers:
                continue
            last = s.reported.get(tid, -1)
            new = [r for r in await asyncio.to_thread(self._reports, s, tid) if r.step > last and r.value == r.value]
            if not new:
                continue
            s.reported[tid] = new[-1].step
            if await self.studies.call(self._report, s, tid, new):
                s.stopped_early.add(tid)
                log.info("sweep %s: trial %s stopped early at step %s (%g)", s.name, tid, new[-1].step, new[-1].value)
                try:
                    await self.jobs.cancel(*key)
                except JobFinished:
                    pass
