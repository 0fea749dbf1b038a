"""Where one start's notebook pod stands in its project's Kueue queue (part `QueueWatch` of
`PlatformSpawner`, for its progress stream), and how many wait per accelerator (`waiting_counts`,
for the spawn form).

Guarantees: `sentence` lists the project's Workloads at most once every `POLL` seconds (between
two lists it repeats the last answer) and says where the pod's Workload stands
(`hub_ext.manifests.queue_text.queue_sentence`); None while Kueue has made no Workload for the pod
yet, or when the Workloads cannot be read (the stage told before stays). `started` is the last
word of a start that succeeded: "admitted ..." where the watch said the pod was waiting and no list
caught the admission since (the pod may start within one `POLL`), else None. `waiting_counts`
lists each project's Workloads once: (project, accelerator) → the waiting ones that ask for it
(`queue_text.waiting_for`); a project whose Workloads cannot be read is left out (not known).
"""

from __future__ import annotations

import time
from typing import Iterable, Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.kube.client import Kube, KubeError, path_of
from hub_ext.manifests.progress_text import wanting
from hub_ext.manifests.queue_text import admitted_sentence, owned_by, queue_sentence, waiting, waiting_for
from hub_ext.manifests.queues import flavor_name

POLL = 2.0


class QueueWatch:
    def __init__(self, kube: Kube, accelerators: Mapping[str, Accelerator]):
        self.kube = kube
        self.flavors = {flavor_name(a): a.display_name for a in accelerators.values()}
        self._last: tuple[float, str | None] = (0.0, None)
        self._waiting = False  # the last Workload seen was waiting

    async def sentence(self, namespace: str, pod: str, acc: Accelerator, count: int) -> str | None:
        at, said = self._last
        if time.monotonic() - at < POLL:
            return said
        try:
            workloads = (await self.kube.list(path_of("Workload", namespace))).get("items") or []
        except (KubeError, RuntimeError):  # RuntimeError: the hub's client closed meanwhile (it stops)
            workloads = None
        said = None
        if workloads is not None:
            mine = owned_by(workloads, "Pod", pod)
            if mine is not None:
                self._waiting = waiting(mine)
                said = queue_sentence(mine, workloads, namespace, wanting(acc, count), self.flavors)
        self._last = (time.monotonic(), said)
        return said

    def started(self, acc: Accelerator, count: int) -> str | None:
        if not self._waiting:
            return None
        self._waiting = False
        return admitted_sentence(wanting(acc, count))


async def waiting_counts(kube: Kube, projects: Iterable[str],
                         accelerators: Mapping[str, Accelerator]) -> dict[tuple[str, str], int]:
    out = {}
    for project in projects:
        try:
            workloads = (await kube.list(path_of("Workload", project))).get("items") or []
        except (KubeError, RuntimeError):
            continue
        for name, acc in accelerators.items():
            out[(project, name)] = waiting_for(workloads, acc.resource, acc.node_selector_dict())
    return out
