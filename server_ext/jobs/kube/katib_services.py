"""Katib's services of a sweep (its suggestion service and, with early stopping, medianstop: the pod
of the Deployment Katib makes per Experiment) as a user is told of them. Pure: no I/O.

Katib does not say why its service does not answer: its Suggestion reads ``DeploymentNotReady`` and
the Experiment waits, with no trial, for ever. The pod does say: a container waiting in
``ErrImagePull`` / ``ImagePullBackOff`` (the cluster has no such image), ``CrashLoopBackOff`` (it
starts and dies), ``CreateContainerConfigError`` and the like. `trouble(experiment, pods)` turns
that into the sweep's ``statusMessage``, naming the algorithm as the user asked for it and what to do.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from server_ext.jobs.kube.katib import EXPERIMENT_LABEL

SERVICE_LABEL = "katib.kubeflow.org/suggestion"  # on the pods of Katib's service Deployments
EARLY_STOPPING_CONTAINER = "early-stopping"  # Katib's name for medianstop's container in that pod
STUCK = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff", "CreateContainerConfigError",
         "CreateContainerError", "RunContainerError")
# Katib's algorithm → what the user wrote for it (AI Platform's names where the platform mapped them)
ASKED_AS = {"bayesianoptimization": "the default algorithm", "grid": "GRID_SEARCH",
            "random": "RANDOM_SEARCH", "medianstop": "enableTrialEarlyStopping"}


def slim_pod(pod: Mapping) -> dict:
    """What `trouble` reads of a service pod: its name, labels, version and containers' states."""
    meta = pod.get("metadata") or {}
    statuses = ((pod.get("status") or {}).get("containerStatuses")) or []
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "labels") if k in meta},
            "status": {"containerStatuses": [{"name": s.get("name"), "state": s.get("state") or {}}
                                             for s in statuses]}}


def pods_of(experiment: Mapping, pods: Iterable[Mapping]) -> list[Mapping]:
    """The service pods of `experiment` (by Katib's experiment label)."""
    name = (experiment.get("metadata") or {}).get("name")
    return [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(EXPERIMENT_LABEL) == name]


def trouble(experiment: Mapping, pods: Iterable[Mapping]) -> str:
    """Why the sweep's Katib service cannot start, in words, or ``""``."""
    spec = experiment.get("spec") or {}
    for pod in pods_of(experiment, pods):
        for st in ((pod.get("status") or {}).get("containerStatuses")) or []:
            waiting = (st.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") not in STUCK:
                continue
            early = st.get("name") == EARLY_STOPPING_CONTAINER
            algorithm = str(((spec.get("earlyStopping") if early else spec.get("algorithm")) or {})
                            .get("algorithmName") or "")
            asked = ASKED_AS.get(algorithm)
            which = f"{algorithm}, for {asked}" if asked else algorithm
            instead = "submit it without early stopping" if early else "submit it with another algorithm"
            why = waiting["reason"] + (f": {waiting['message']}" if waiting.get("message") else "")
            return (f"the sweep's Katib service ({which}) cannot start in this cluster ({why}); ask your "
                    f"platform team to install it, or cancel this sweep and {instead}")
    return ""
