"""Early-stopped Katib Trials get their observation (`rules.observations` says why Katib leaves them
without one, and what it is): the leader watches Trials cluster-wide and, for one in a project
namespace that is ``EarlyStopped`` without an observation, reads its metric logs from Katib's DB
manager (``--katib-db-manager``) and writes ``status.observation`` (a merge patch of the Trial's
status, as Katib's own controller would have written it; nothing else of the Trial changes).

Each Trial is handled by one task at a time; a failed read or write is logged and tried again
(`RETRY_S`, doubling, `TRIES` times; the watch's next listing, every few minutes, starts it again).
A Trial whose logs hold no value of its objective metric yet (its collector reports before it asks
to stop the trial) is looked at again the same way. A replica that becomes the leader looks at
every Trial once. Without ``--katib-db-manager`` (empty) nothing is registered. Counted on
``/metrics`` as ``mlplatform_operator_trial_observations_total{result="written"|"failed"}``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

import kopf

from hub_ext.kube.client import MERGE_PATCH, KubeError
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.katib_db import KatibDb, KatibDbError
from hub_ext.operator.rules import observations

log = logging.getLogger("mlplatform.operator.trials")
TRIALS = "/apis/kubeflow.org/v1beta1"
RETRY_S, TRIES = 1.0, 6


def trial_path(namespace: str, name: str) -> str:
    return f"{TRIALS}/namespaces/{namespace}/trials/{name}"


class ObservationFiller:
    def __init__(self, ctx: OperatorContext, db: KatibDb):
        self.ctx, self.db = ctx, db
        self._busy: dict[tuple[str, str], asyncio.Task] = {}

    def seen(self, trial: Mapping) -> None:
        """Start filling `trial` in unless it has its observation or a task already."""
        meta = trial.get("metadata") or {}
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if not observations.lacks_observation(trial) or key in self._busy:
            return
        task = asyncio.create_task(self._fill(*key), name=f"trial-observation {key[0]}/{key[1]}")
        self._busy[key] = task
        task.add_done_callback(lambda _: self._busy.pop(key, None))

    async def _fill(self, namespace: str, name: str) -> None:
        delay = RETRY_S
        for attempt in range(TRIES):
            if not self.ctx.leader.leading:
                return
            try:
                if await self._fill_once(namespace, name):
                    return
                why = "its logs hold no value of its objective metric yet"
            except (KubeError, KatibDbError, ValueError) as e:
                why = getattr(e, "reason", None) or str(e)
            if attempt == TRIES - 1:
                log.warning("trial %s/%s: its observation could not be written: %s", namespace, name, why)
                self.ctx.metrics.inc("mlplatform_operator_trial_observations_total", result="failed")
                return
            await asyncio.sleep(delay)
            delay *= 2

    async def _fill_once(self, namespace: str, name: str) -> bool:
        """True when there is nothing left to do."""
        if not await self.ctx.projects.contains(namespace):
            return True
        trial = await self.ctx.kube.get(trial_path(namespace, name))
        if trial is None or not observations.lacks_observation(trial):
            return True
        logs = [entry for metric in observations.metric_names(trial)
                for entry in await self.db.metric_logs(name, metric)]
        found = observations.observation(logs, trial)
        if not any(m["latest"] != observations.UNAVAILABLE for m in found["metrics"]):
            return False
        await self.ctx.kube.request("PATCH", trial_path(namespace, name) + "/status",
                                    {"status": {"observation": found}}, content_type=MERGE_PATCH)
        log.info("trial %s/%s (early stopped): observation written from Katib's %d metric logs", namespace,
                 name, len(logs))
        self.ctx.metrics.inc("mlplatform_operator_trial_observations_total", result="written")
        return True

    async def elected(self) -> None:
        try:
            listing = await self.ctx.kube.list(f"{TRIALS}/trials")
        except KubeError as e:  # Katib not installed (404), or its API down: the watch brings them later
            log.info("early-stopped trials not looked at on election: %s", e.reason)
            return
        for trial in listing.get("items") or []:
            self.seen(trial)

    async def stopped(self) -> None:
        """No longer the leader: its tasks end, and the DB manager's channel closes (opened again on use)."""
        tasks = list(self._busy.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.db.close()


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> ObservationFiller | None:
    address = ctx.settings.katib_db_manager
    if not address:
        return None
    filler = ObservationFiller(ctx, KatibDb(address))

    def wanted(body: Mapping, **_: Any) -> bool:
        return ctx.leader.leading and observations.lacks_observation(body)

    @kopf.on.event("kubeflow.org", "v1beta1", "trials", id="early-stopped-trials", registry=registry, when=wanted)
    async def early_stopped_trials(event: Mapping, **_: Any) -> None:
        if event.get("type") != "DELETED":
            filler.seen(event["object"])

    ctx.leader.on_elected(filler.elected)
    ctx.leader.on_stopped(filler.stopped)
    return filler
