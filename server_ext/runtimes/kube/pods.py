"""The pods of the Kubernetes `JobBackend`'s jobs and trial jobs, read from the API (pods are not
watched): a task's pod found by its labels, a pod read by name, whether its container has ended,
and the raw lines of one ``pods/<pod>/log`` request. `kube_backend` streams a task's log with
them; `kube_sweeps` reads a trial's metric reports.

Guarantees:

- `task_pod` answers the task's newest pod (by creationTimestamp, then name: should a controller
  replace one), leaving out pods being deleted; None when there is none. `task_pod` and `get_pod`
  raise `UpstreamError` naming the job when the API refuses or cannot be reached.
- `read_log` yields every line of the log with its newline, the last one possibly without (a line
  still being written, or a log that does not end in one); a line may be any length. A refusal is
  the `hub_ext.kube.client.KubeError` of its answer (``code`` and ``reason``), a connection that cannot be
  made or breaks `hub_ext.kube.client.Unavailable` with ``code`` 0: the caller decides (a container that
  has not started is a 400, a pod that is gone `NotFound`; a follower reconnects). Bodies are
  never logged.
"""

from __future__ import annotations

from typing import AsyncIterator

import aiohttp

from hub_ext.core.errors import UpstreamError
from hub_ext.kube.client import Kube, KubeError, reason


def terminated(pod: dict | None, container: str) -> bool:
    """True when the container can write no more lines (or the pod is gone or going)."""
    if pod is None or pod["metadata"].get("deletionTimestamp"):
        return True
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    return any(s.get("name") == container and "terminated" in (s.get("state") or {})
               for s in status.get("containerStatuses") or [])


async def task_pod(kube: Kube, project: str, job_id: str, selector: str) -> tuple[str, str] | None:
    """(name, uid) of the task's pod (the newest, should a controller replace one), or None."""
    try:
        body = await kube.list(f"/api/v1/namespaces/{project}/pods", labelSelector=selector)
    except KubeError as e:
        raise UpstreamError(f"find the pods of job {job_id}", reason(e)) from None
    pods = [o for o in body.get("items") or [] if not o["metadata"].get("deletionTimestamp")]
    if not pods:
        return None
    meta = max(pods, key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]))["metadata"]
    return meta["name"], meta.get("uid", "")


async def get_pod(kube: Kube, project: str, name: str, job_id: str) -> dict | None:
    try:
        return await kube.get(f"/api/v1/namespaces/{project}/pods/{name}")
    except KubeError as e:
        raise UpstreamError(f"read the pod of job {job_id}", reason(e)) from None


def read_log(kube: Kube, project: str, pod: str, container: str, follow: bool,
             timestamps: bool = False, tail: int | None = None) -> AsyncIterator[bytes]:
    """The raw lines of one log request (the last may lack its newline; with `tail`, only the last
    `tail` lines): `Kube.stream`'s."""
    query = [("container", container)] + ([("follow", "true")] if follow else [])
    query += [("timestamps", "true")] if timestamps else []
    query += [("tailLines", str(tail))] if tail else []
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=kube.timeout,
                                    sock_read=None if follow else max(kube.timeout, 60))
    return kube.stream(f"/api/v1/namespaces/{project}/pods/{pod}/log", query, "*/*", timeout)
