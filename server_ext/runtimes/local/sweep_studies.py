"""The local sweeps' Optuna studies: where they are stored, and the one thread every Optuna call
runs on (`local_sweeps` runs the sweeps; `sweep_loop` drives their trials).

Guarantees of `Studies`:

- the studies live in Optuna's RDB storage, ``<state_dir>/sweeps.sqlite`` (made 0600 in a private
  directory, and so its -wal and -shm), named ``<project>/<jobId>``; its connections use WAL
  (readers never wait for the writer) and ``synchronous=NORMAL`` (`_connect`);
- every Optuna call runs on one worker thread (`call`), so the event loop never blocks on it and
  calls never race; `warm` opens the storage there (creating its tables takes ~0.5 s) without
  waiting, and a failure to open it is logged and raised again by the first sweep that needs it;
- `create` first deletes a study of the same name (left by a state file that was removed: two
  sweeps' trials never mix), copies the previous sweep's trials for ``resumePreviousJobId``, and
  sets the ``template`` attribute last: `load` gives None for a study without it (never complete).
  Both use the sweep's sampler and pruner (`sweep_space.sampler`, seeded by the project and jobId).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import pathlib
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import alembic.command  # noqa: F401  (imported here, not first by Optuna on the worker thread: two
import alembic.migration  # noqa: F401  threads importing alembic at once can deadlock on import locks)
import optuna

from hub_ext.local.files import private_dir, private_opener
from server_ext.jobs.hptuning import Spec
from server_ext.runtimes.local import sweep_space as space
from server_ext.runtimes.local.store import JobRecord

log = logging.getLogger("mlplatform.jobs.local")
# Optuna's records go through the standard logging tree (the server's log configuration, or
# nothing below WARNING in the kubectl plugin) instead of its own stderr handler.
optuna.logging.disable_default_handler()
optuna.logging.enable_propagation()


def _connect(path: str) -> sqlite3.Connection:
    """The study storage's connections: WAL (readers never wait for the writer) and ``synchronous=NORMAL``
    (a commit is durable once the WAL is synced at checkpoints: a crash of the server loses nothing,
    a power cut the last moments — which a restarted sweep treats as trials that never reported)."""
    db = sqlite3.connect(path, timeout=30, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


class Studies:
    """The studies of the sweeps of one state directory."""

    def __init__(self, state_dir: pathlib.Path):
        self.state_dir = state_dir
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="local-sweeps")
        self._storage: optuna.storages.RDBStorage | None = None

    async def call(self, fn, *args, **kwargs) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def store(self) -> optuna.storages.RDBStorage:  # on the worker thread
        if self._storage is None:
            private_dir(self.state_dir)
            path = str(self.state_dir / "sweeps.sqlite")
            os.close(private_opener(path, os.O_RDWR | os.O_CREAT))  # 0600, and so its -wal and -shm
            self._storage = optuna.storages.RDBStorage(f"sqlite:///{path}",
                                                       engine_kwargs={"creator": functools.partial(_connect, path)})
        return self._storage

    def warm(self) -> None:
        """Open the study storage on the worker thread now (creating its tables takes ~0.5 s), without
        waiting: the first sweep's calls queue behind it."""
        def open_storage() -> None:
            try:
                self.store()
            except Exception:  # the first sweep that needs it raises it again, then to its job
                log.exception("sweeps: opening %s failed", self.state_dir / "sweeps.sqlite")

        self._pool.submit(open_storage)

    async def close(self) -> None:
        await asyncio.to_thread(self._pool.shutdown, True)

    def sampler(self, rec: JobRecord, spec: Spec):
        return dict(sampler=space.sampler(spec, space.seed_of(rec.project, rec.job_id)), pruner=space.pruner(spec))

    def create(self, rec: JobRecord, spec: Spec, template: str) -> optuna.Study:  # on the worker thread
        storage, name = self.store(), f"{rec.project}/{rec.job_id}"
        try:  # left by a state file that was removed: never mix two sweeps' trials
            optuna.delete_study(study_name=name, storage=storage)
        except KeyError:
            pass
        study = optuna.create_study(storage=storage, study_name=name, direction=space.direction(spec),
                                    **self.sampler(rec, spec))
        if spec.resume_from:
            try:
                prev = optuna.load_study(study_name=f"{rec.project}/{spec.resume_from}", storage=storage)
            except KeyError:
                prev = None
            for t in prev.get_trials(deepcopy=False) if prev is not None else []:
                study.add_trial(space.copied_trial(t, spec.resume_from))
        study.set_user_attr("template", template)  # last: its presence says the study is complete
        return study

    def load(self, rec: JobRecord, spec: Spec) -> optuna.Study | None:  # on the worker thread
        try:
            study = optuna.load_study(study_name=f"{rec.project}/{rec.job_id}", storage=self.store(),
                                      **self.sampler(rec, spec))
        except KeyError:
            return None
        return study if "template" in study.user_attrs else None
