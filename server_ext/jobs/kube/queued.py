"""Where a job Kueue holds stands in its project's queue: ``statusMessage`` beside ``QUEUED``. Pure.

Where Kueue holds the accelerators (`hub_ext.manifests.queues`), a job that does not fit is
suspended whole (no pod is made) and reads ``QUEUED`` (`server_ext.jobs.kube.status`); its
Workload says why. `queue_messages` gives, per job object name, the words of
`hub_ext.manifests.queue_text.queue_sentence` ("queued: 1 workload ahead of you in the project
'vision' for the job's accelerators; the project's quota of a100 is in use (2 more needed)") for every job
whose Workload is still waiting; a job admitted, ended or without a Workload has none.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from hub_ext.manifests.queue_text import owned_by, queue_sentence, waiting

WANTED = "the job's accelerators"


def queue_messages(objects: Iterable[Mapping], workloads: Iterable[Mapping], project: str) -> dict[str, str]:
    workloads = list(workloads)
    if not workloads:
        return {}
    out = {}
    for obj in objects:
        name = obj["metadata"]["name"]
        wl = owned_by(workloads, obj.get("kind", ""), name)
        if wl is not None and waiting(wl):
            out[name] = queue_sentence(wl, workloads, project, WANTED, {}) or ""
    return {k: v for k, v in out.items() if v}
