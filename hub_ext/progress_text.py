"""Spawn progress in plain words, from the Kubernetes events of a notebook pod. Pure.

`describe(event, accelerator, capacity)` turns one Event (a dict) into a sentence for the
spawn page, or None for events that say nothing new to a user (Created, and the like):

- FailedScheduling, Insufficient <accelerator resource> → "waiting for a free 1g.5gb MIG slice
  (0 of 2 free)"; Insufficient cpu/memory → "waiting for a node with enough CPU"; no node
  with the accelerator at all → "no node offers …"
- Scheduled → "assigned to node dgx-03"; Pulling → "pulling the image …"; Pulled → "image ready";
  Started → "starting the notebook server"
- FailedMount / FailedAttachVolume → "waiting for a volume to be attached (…)"
- BackOff, Failed, FailedCreatePodSandBox → "the notebook container failed: …"
"""

from __future__ import annotations

import re

from .catalog import Accelerator

_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
_ASSIGNED = re.compile(r"to (\S+)\s*$")
_IMAGE = re.compile(r'image "([^"]+)"')


def wanting(acc: Accelerator, count: int = 1) -> str:
    if count > 1:
        return f"{count} free {acc.display_name}"
    return f"a free {acc.mig_profile} MIG slice" if acc.type == "mig" else f"a free {acc.display_name}"


def free_text(acc: Accelerator | None, capacity: dict[str, tuple[int, int]]) -> str:
    if acc is None or acc.name not in capacity:
        return ""
    free, total = capacity[acc.name]
    return f" ({free} of {total} free)"


def describe(event: dict, acc: Accelerator | None = None, count: int = 1,
             capacity: dict[str, tuple[int, int]] | None = None) -> str | None:
    reason, message = event.get("reason") or "", event.get("message") or ""
    capacity = capacity or {}
    if reason == "FailedScheduling":
        short = {r.rstrip(".,;") for r in _INSUFFICIENT.findall(message)}
        if acc is not None and acc.resource in short:
            return f"waiting for {wanting(acc, count)}{free_text(acc, capacity)}"
        if "cpu" in short or "memory" in short:
            what = " and ".join(w for w, k in (("CPU", "cpu"), ("memory", "memory")) if k in short)
            return f"waiting for a node with enough {what}"
        if acc is not None and ("node affinity" in message or "node selector" in message):
            return f"no node offers {acc.display_name} now; waiting"
        return "waiting for a node that can run the server"
    if reason == "Scheduled":
        m = _ASSIGNED.search(message)
        return f"assigned to node {m.group(1)}" if m else "assigned to a node"
    if reason == "Pulling":
        m = _IMAGE.search(message)
        return f"pulling the image {m.group(1)} (the first start on a node can take minutes)" if m else \
            "pulling the image"
    if reason == "Pulled":
        return "image ready"
    if reason == "Started":
        return "starting the notebook server"
    if reason in ("FailedMount", "FailedAttachVolume"):
        return "waiting for a volume to be attached"
    if reason in ("BackOff", "Failed", "FailedCreatePodSandBox"):
        return f"the notebook container failed: {message[:300]}"
    return None
