"""Hyperparameter sweeps on the local runtime: an Optuna study whose trials are local jobs.

`LocalBackend.submit(plan)` with ``plan.sweep`` set hands the sweep here (`Sweeps.run`). The sweep
is a job record like any other (its ``trainingOutput`` is the answer's); each trial is an internal
job of the same backend, ``<jobId>/trial-<id>`` (hidden from `list`; its directory is
``<sweep's dir>/trial-<id>/``), running the plan's replicas with the trial's ``--name=value`` flags
appended and ``CLOUD_ML_TRIAL_ID``, ``CLOUD_ML_HP_METRIC_TAG`` and ``CLOUD_ML_JOB_ID`` (the sweep's
jobId, as AI Platform's trials saw it) in their environment. Decisions are `local_sweep_space`'s.

The parts: `sweep_studies` (the Optuna studies, their storage and thread), `sweep_loop` (a sweep's
trials started, judged and told to the study), `sweep_space` (the decisions); this module submits,
resumes and reads sweeps.

Guarantees:
- The study lives in Optuna's RDB storage, ``<state_dir>/sweeps.sqlite``, named ``<project>/<jobId>``;
  every Optuna call runs on one worker thread (`sweep_studies.Studies`). Each study trial of this
  sweep carries the user attribute ``trialId``.
- At most ``maxParallelTrials`` trials run at once and ``maxTrials`` are started in all (fewer for a
  grid with fewer points). Trial ids are "1", "2", … in the order trials start. A sweep whose
  parallel trials (``maxParallelTrials``, at most ``maxTrials``) × replicas per trial exceed the
  backend's `LocalBackend.max_processes` is refused at submit, naming ``maxParallelTrials``.
- Trials, their outcomes, early stopping (``enableTrialEarlyStopping``: MedianPruner; such a trial
  is SUCCEEDED with ``isTrialStoppedEarly: true``, as on AI Platform) and the sweep's own state as
  `sweep_loop.SweepLoop.drive` says; cancel → CANCELLING → CANCELLED once every trial ended.
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
import logging

from optuna.trial import TrialState

from hub_ext.core.errors import UserInputError
from server_ext.errors import JobNotFound
from server_ext.jobs.backend import FINAL
from server_ext.jobs.hptuning import FIELD, at_once, parse_spec
from server_ext.jobs.plan import JobPlan, task_name
from server_ext.runtimes.local import sweep_space as space
from server_ext.runtimes.local.package import SHIPPED_DIR
from server_ext.runtimes.local.store import JobRecord, JobRecords
from server_ext.runtimes.local.sweep_loop import MASTER, Sweep, SweepLoop
from server_ext.runtimes.local.sweep_studies import Studies

log = logging.getLogger("mlplatform.jobs.local")


def is_sweep(rec: JobRecord) -> bool:
    return "/" not in rec.job_id and bool((rec.job.get("trainingInput") or {}).get("hyperparameters"))


class Sweeps:
    """The sweeps of one `LocalBackend`, which owns the records, jobs and background tasks and is
    reached only through `local_store.JobRecords`."""

    def __init__(self, jobs: JobRecords):
        self.jobs = jobs
        self.studies = Studies(self.jobs.state_dir)
        self.loop = SweepLoop(jobs, self.studies)

    def warm(self) -> None:
        """Open the study storage now, without waiting (`Studies.warm`)."""
        self.studies.warm()

    async def close(self) -> None:
        await self.studies.close()

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
        study = await self.studies.call(self.studies.create, rec, plan.sweep, template)
        if plan.sweep.resume_from:
            log.info("sweep %s/%s: continues %s (%d trials)", rec.project, rec.job_id, plan.sweep.resume_from,
                     len(await self.studies.call(study.get_trials, deepcopy=False)))
        await self.loop.drive(Sweep(rec, plan.sweep, cancel, study, space.template_of(template)))

    async def resume(self, rec: JobRecord, cancel: asyncio.Event) -> None:
        """An unfinished sweep found by `LocalBackend.start` (its trial jobs are loaded already)."""
        spec = parse_spec(rec.job["trainingInput"]["hyperparameters"])
        study = await self.studies.call(self.studies.load, rec, spec)
        if study is None:
            if cancel.is_set():
                return await self.jobs.finish_record(rec, "CANCELLED")
            return await self.jobs.finish_record(rec, "FAILED", "The server stopped while the sweep was being "
                                                                "prepared, before its first trial; submit it again.")
        s = Sweep(rec, spec, cancel, study, space.template_of(study.user_attrs["template"]))
        for t in await self.studies.call(study.get_trials, deepcopy=False):
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
                await self.loop.record(s, entry["trialId"], "FAILED", TrialState.FAIL)
        running_numbers = {s.numbers.get(tid) for tid in s.running}
        for t in await self.studies.call(study.get_trials, deepcopy=False, states=(TrialState.RUNNING,)):
            if "trialId" in t.user_attrs and t.number not in running_numbers:  # asked, never recorded
                await self.studies.call(study.tell, t.number, state=TrialState.FAIL, skip_if_finished=True)
        log.info("sweep %s: resuming (%d trials, %d running)", s.name, len(s.trials), len(s.running))
        await self.loop.drive(s)

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
