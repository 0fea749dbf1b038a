"""The local runtime's accelerator devices, and which server holds which.

`parse_nvidia_smi(text)` reads ``nvidia-smi -L`` output, MIG devices included (a GPU split into
MIG devices offers only its slices, not itself); `declared_inventory(raw)` reads the same from
configuration, for machines without GPUs (the demo) or to pin a subset. `DeviceAllocator` hands
devices out as ``CUDA_VISIBLE_DEVICES`` UUIDs: one device is never given to two holders, devices
come back on release, and holdings are written to a JSON file so they survive a hub restart.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from hub_ext.core.catalog import MIG_PROFILE, Accelerator
from hub_ext.core.errors import ConfigError, Problem

_GPU_LINE = re.compile(r"GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[^)]+)\)")
_MIG_LINE = re.compile(r"\s+MIG (?P<profile>\S+)\s+Device\s+(?P<index>\d+): \(UUID: (?P<uuid>MIG-[^)]+)\)")


@dataclass(frozen=True)
class Device:
    uuid: str
    type: str  # "gpu" | "mig"
    product: str  # e.g. "NVIDIA A100-SXM4-40GB"
    profile: str | None = None  # MIG profile, e.g. "1g.5gb"

    def serves(self, acc: Accelerator) -> bool:
        if acc.type != self.type:
            return False
        if acc.type == "mig" and acc.mig_profile != self.profile:
            return False
        # GPU Feature Discovery spells products with '-' for spaces ("NVIDIA-A100-SXM4-40GB")
        return acc.product is None or acc.product.replace(" ", "-") == self.product.replace(" ", "-")


def parse_nvidia_smi(text: str) -> list[Device]:
    devices: list[Device] = []
    gpu: tuple[str, str] | None = None
    gpu_has_mig = False
    for line in text.splitlines():
        m = _GPU_LINE.fullmatch(line.rstrip())
        if m:
            if gpu and not gpu_has_mig:
                devices.append(Device(gpu[0], "gpu", gpu[1]))
            gpu, gpu_has_mig = (m["uuid"], m["name"]), False
            continue
        m = _MIG_LINE.fullmatch(line.rstrip())
        if m and gpu:
            gpu_has_mig = True
            devices.append(Device(m["uuid"], "mig", gpu[1], m["profile"]))
    if gpu and not gpu_has_mig:
        devices.append(Device(gpu[0], "gpu", gpu[1]))
    return devices


def declared_inventory(raw: Any) -> list[Device]:
    """``{"GPU-demo-0": {"type": "gpu", "product": "NVIDIA A100-SXM4-40GB"},
    "MIG-demo-1": {"type": "mig", "profile": "1g.5gb"}}`` → Devices."""
    problems: list[Problem] = []
    if not isinstance(raw, Mapping):
        raise ConfigError([Problem("inventory", "must be a mapping of device UUIDs to {'type': ...}")])
    out = []
    for uuid, entry in raw.items():
        path = f"inventory[{uuid!r}]"
        if not isinstance(entry, Mapping) or entry.get("type") not in ("gpu", "mig"):
            problems.append(Problem(f"{path}.type", "must be 'gpu' or 'mig'"))
            continue
        extra = sorted(set(entry) - {"type", "product", "profile"})
        for key in extra:
            problems.append(Problem(f"{path}.{key}", "unknown key"))
        profile = entry.get("profile")
        if entry["type"] == "mig" and (not isinstance(profile, str) or not MIG_PROFILE.fullmatch(profile)):
            problems.append(Problem(f"{path}.profile", f"must be a MIG profile such as '1g.5gb', not {profile!r}"))
            continue
        out.append(Device(str(uuid), entry["type"], str(entry.get("product", "NVIDIA A100-SXM4-40GB")),
                          profile if entry["type"] == "mig" else None))
    if problems:
        raise ConfigError(problems)
    return out


class DeviceAllocator:
    """Devices by holder (a server id such as ``alice/`` or ``alice/big``), persisted to `state_file`."""

    def __init__(self, devices: Iterable[Device], state_file: str | os.PathLike | None = None):
        self.devices = list(devices)
        self.state_file = pathlib.Path(state_file) if state_file else None
        self._held: dict[str, list[str]] = {}
        if self.state_file and self.state_file.exists():
            known = {d.uuid for d in self.devices}
            saved = json.loads(self.state_file.read_text() or "{}")
            self._held = {h: [u for u in uuids if u in known] for h, uuids in saved.items()}

    def _save(self) -> None:
        if not self.state_file:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".devices-")
        with os.fdopen(fd, "w") as f:
            json.dump(self._held, f, sort_keys=True)
        os.replace(tmp, self.state_file)

    def _in_use(self) -> set[str]:
        return {u for uuids in self._held.values() for u in uuids}

    def free(self, acc: Accelerator) -> list[Device]:
        used = self._in_use()
        return [d for d in self.devices if d.serves(acc) and d.uuid not in used]

    def total(self, acc: Accelerator) -> int:
        return sum(1 for d in self.devices if d.serves(acc))

    def allocate(self, holder: str, acc: Accelerator, count: int) -> list[str] | None:
        """UUIDs for `holder`, or None when fewer than `count` are free (nothing is taken then)."""
        if holder in self._held:
            return list(self._held[holder])
        free = self.free(acc)
        if len(free) < count:
            return None
        self._held[holder] = [d.uuid for d in free[:count]]
        self._save()
        return list(self._held[holder])

    def held_by(self, holder: str) -> list[str]:
        return list(self._held.get(holder, []))

    def release(self, holder: str) -> None:
        if self._held.pop(holder, None) is not None:
            self._save()
