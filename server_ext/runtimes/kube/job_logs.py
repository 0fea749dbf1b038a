"""One task's log, read from its pods on the Kubernetes API (`KubeBackend.logs` finds the task and
its pods' selector and container, this module reads them).

What `TaskLog.lines` guarantees:

- it reads ``pods/<pod>/log`` of the task's main container (``timestamps=true``): lines numbered
  from 1 per task, the first `after` skipped; each line's ``time`` is the kubelet's (RFC 3339 UTC as
  given, `timed`); its ``stream`` is None (``stream=Stdout|Stderr`` is alpha in Kubernetes 1.37:
  stdout and stderr come merged);
- with ``follow`` it waits for the pod to exist and its container to start (ending if the job ends
  first: `ended`), streams, reconnects after a dropped stream without repeating a line, and ends
  when the container has terminated and every line was sent (a replaced pod continues the
  numbering); without ``follow`` it ends at the current end of the log. A last line without its
  newline is sent only once the container has ended (or without ``follow``);
- `TaskLog.progress` reads the last `PROGRESS_TAIL` lines once (``tailLines``) for the last
  progress line: what a Training Operator v1 job reports (`server_ext.jobs.progress`);
- between tries it waits with `pause` (until a job of the project changes, or a poll interval:
  pods are not watched); an error other than a pod not there yet, a container not started or
  (following) an unavailable server is `UpstreamError` with the API's reason.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from typing import AsyncIterator, Awaitable, Callable

from hub_ext.core.errors import UpstreamError
from hub_ext.kube.client import Kube, KubeError, NotFound, Unavailable, reason
from server_ext.jobs import progress
from server_ext.jobs.backend import LogLine
from server_ext.runtimes.kube import pods as kube_pods

log = logging.getLogger("mlplatform.jobs.kube")
PROGRESS_TAIL = 200  # log lines looked at for a job's last progress line


@dataclass(frozen=True)
class TaskLog:
    """The log of task `task` of job `job_id` in `project`: the `container` of the pods `selector` finds;
    its lines carry the task as the caller named it (`label`)."""
    kube: Kube
    project: str
    job_id: str
    task: str
    label: str
    selector: str
    container: str

    async def lines(self, follow: bool, after: int, ended: Callable[[], bool],
                    pause: Callable[[], Awaitable[None]]) -> AsyncIterator[LogLine]:
        project, job_id, task, label = self.project, self.job_id, self.task, self.label
        selector, container = self.selector, self.container
        pod_name = pod_uid = None
        base = read = 0  # lines of pods replaced earlier; complete lines of this pod's log read so far
        while True:
            if pod_name is None:
                found = await kube_pods.task_pod(self.kube, project, job_id, selector)
                if found is None:
                    if not follow or ended():
                        return
                    await pause()
                    continue
                if pod_uid is not None and found[1] != pod_uid:  # a controller replaced the pod: a new log
                    base, read = base + read, 0
                pod_name, pod_uid = found
            partial = b""
            try:
                reader = kube_pods.read_log(self.kube, project, pod_name, container, follow, timestamps=True)
                async with contextlib.aclosing(reader) as lines:
                    async for raw in lines:
                        if not raw.endswith(b"\n"):
                            partial = raw  # the last one: kept only once the container has ended
                            continue
                        read += 1
                        if base + read > after:
                            when, text = timed(raw)
                            yield LogLine(base + read, label, text, when)
            except KubeError as e:
                if follow and isinstance(e, Unavailable) and e.code == 0:  # no answer, or the stream broke
                    log.info("job %s in %s: log stream of %s broke (%s); reconnecting", job_id, project, task,
                             reason(e))
                    await pause()
                    continue
                waiting = e.code == 400 and "waiting to start" in e.body  # the container has not started
                if not (waiting or isinstance(e, NotFound) or (follow and isinstance(e, Unavailable))):
                    raise UpstreamError(f"read the log of {task} of job {job_id}", reason(e)) from None
                if not follow or ended():
                    return
                if isinstance(e, NotFound):
                    pod_name = None
                await pause()
                continue
            if not follow and not partial:
                return
            pod = await kube_pods.get_pod(self.kube, project, pod_name, job_id)
            done = kube_pods.terminated(pod, container)
            if partial and (done or not follow):
                read += 1
                if base + read > after:
                    when, text = timed(partial)
                    yield LogLine(base + read, label, text, when)
            if done or not follow:
                return
            if pod is not None and pod["metadata"].get("uid") != pod_uid:
                pod_name = None  # replaced under the same name: look it up again
            await pause()


    async def progress(self, tail: int = PROGRESS_TAIL) -> dict | None:
        """The last progress line (`server_ext.jobs.progress`) among the last `tail` lines of the
        task's newest pod; None when there is none, no pod, or its log cannot be read."""
        try:
            found = await kube_pods.task_pod(self.kube, self.project, self.job_id, self.selector)
            if found is None:
                return None
            reader = kube_pods.read_log(self.kube, self.project, found[0], self.container, False,
                                        timestamps=True, tail=tail)
            async with contextlib.aclosing(reader) as lines:
                return progress.latest([(text, when) for when, text in [timed(raw) async for raw in lines]])
        except (KubeError, UpstreamError) as e:
            log.debug("job %s in %s: no progress from the log of %s: %s", self.job_id, self.project, self.task, e)
            return None


def _text(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\n") else text


_STAMPED = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ?(.*)", re.DOTALL)


def timed(raw: bytes) -> tuple[str | None, str]:
    """(time, text) of a line read with ``timestamps=true`` (the kubelet's RFC 3339 time, then a
    space); (None, the line) for one without a time."""
    match = _STAMPED.fullmatch(raw)
    if match is None:
        return None, _text(raw)
    return match.group(1).decode(), _text(match.group(2))
