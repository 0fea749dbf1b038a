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

`assigned(acc, count, places, node)` says what a spawn was given, on either runtime: locally the
devices ("assigned MIG slice 1g.5gb (GPU 0, slice 2)", from `places_from_nvidia_smi`, or the
device's UUID where the inventory is declared); on Kubernetes the node ("assigned MIG slice 1g.5gb
on node dgx-03": which slice of the node is the device plugin's choice, not the hub's).
"""

from __future__ import annotations

import re
from typing import Sequence

from hub_ext.core.catalog import Accelerator

_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
_ASSIGNED = re.compile(r"to (\S+)\s*$")
_IMAGE = re.compile(r'image "([^"]+)"')
_SMI_GPU = re.compile(r"GPU (\d+): .*\(UUID: (GPU-[^)]+)\)")
_SMI_MIG = re.compile(r"MIG \S+\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)")


def wanting(acc: Accelerator, count: int = 1) -> str:
    if count > 1:
        return f"{count} free {acc.display_name}"
    return f"a free {acc.mig_profile} MIG slice" if acc.type == "mig" else f"a free {acc.display_name}"


def free_text(acc: Accelerator | None, capacity: dict[str, tuple[int, int]]) -> str:
    if acc is None or acc.name not in capacity:
        return ""
    free, total = capacity[acc.name]
    return f" ({free} of {total} free)"


def scheduled_node(event: dict) -> str | None:
    """The node a Scheduled event assigned the pod to."""
    m = _ASSIGNED.search(event.get("message") or "") if event.get("reason") == "Scheduled" else None
    return m.group(1) if m else None


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
        node = scheduled_node(event)
        return f"assigned to node {node}" if node else "assigned to a node"
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


def assigned(acc: Accelerator, count: int = 1, places: Sequence[str] = (), node: str | None = None) -> str:
    """"assigned MIG slice 1g.5gb (GPU 0, slice 2)", "assigned 2 × NVIDIA A100 40GB (GPU 0; GPU 1)",
    "assigned MIG slice 1g.5gb on node dgx-03"."""
    if acc.type == "mig":
        what = f"{count} × MIG {acc.mig_profile} slices" if count > 1 else f"MIG slice {acc.mig_profile}"
    else:
        what = f"{count} × {acc.display_name}" if count > 1 else acc.display_name
    return f"assigned {what}" + (f" on node {node}" if node else "") + (f" ({'; '.join(places)})" if places else "")


def places_from_nvidia_smi(text: str) -> dict[str, str]:
    """Device UUID → where it is, from ``nvidia-smi -L``: "GPU 0", or "GPU 0, slice 2" for the
    MIG device 2 of GPU 0."""
    out: dict[str, str] = {}
    gpu = None
    for line in text.splitlines():
        if m := _SMI_GPU.match(line.strip()):
            gpu = m.group(1)
            out[m.group(2)] = f"GPU {gpu}"
        elif (m := _SMI_MIG.search(line)) and gpu is not None:
            out[m.group(2)] = f"GPU {gpu}, slice {m.group(1)}"
    return out
