"""The accelerators of one machine for `LocalPlatformSpawner`: the hub's `LocalDevices` (what the
machine has and where each device is) and part `DeviceHold` (what one server holds of them).

Guarantees:
- `read_devices`: a declared inventory (a dict) as declared, else ``nvidia-smi -L`` (no GPUs when it
  is absent or fails); the allocations are kept in ``<state_dir>/devices.json`` across hub restarts.
- `make_private`: the state directory is ``0700`` and nothing in it, nor in the projects'
  ``credentials/``, is readable by group or others (files of another OS user are logged, not changed).
- `DeviceHold.reserve` reserves the accelerator atomically against the project's limit (the hub's
  `Ledger`), refusing (`UserInputError`) with the user's own servers that hold it named;
  `take` then takes devices from the inventory: never one given to another server; when none is
  free, a 409 ``web.HTTPError`` with ``when_full = "refuse"`` (or when the machine has fewer than
  asked), else it waits, saying "waiting for …" once. The spawner gives both back when the
  server stops or dies (`LocalPlatformSpawner._release`).
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tornado import web

from hub_ext.core.catalog import Accelerator
from hub_ext.core.entitlements import Ledger
from hub_ext.core.errors import UserInputError
from hub_ext.local.files import private_dir, tighten
from hub_ext.local.inventory import DeviceAllocator, declared_inventory, parse_nvidia_smi
from hub_ext.manifests.capacity import own_servers_note
from hub_ext.manifests.progress_text import assigned, places_from_nvidia_smi, wanting
from hub_ext.spawners.runtime import Plan


@dataclass(frozen=True)
class LocalDevices:
    """The machine's device allocator and where each device is (UUID → "GPU 0, slice 2"), kept by
    the hub's `PlatformService` per inventory and state directory."""
    allocator: DeviceAllocator
    places: Mapping[str, str]


def read_devices(inventory: Any, state_dir: str) -> LocalDevices:
    """The devices of a declared `inventory` (a dict), else of ``nvidia-smi -L``."""
    if isinstance(inventory, dict):
        devices, places = declared_inventory(inventory), {}
    else:
        devices, places = _nvidia_smi_devices()
    return LocalDevices(DeviceAllocator(devices, pathlib.Path(state_dir) / "devices.json"), places)


def _nvidia_smi_devices():
    """This machine's devices and where each is ("GPU 0, slice 2"), from ``nvidia-smi -L``."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return [], {}
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return [], {}
    return parse_nvidia_smi(out), places_from_nvidia_smi(out)


def make_private(state_dir: str, projects_dir: str, log: logging.Logger | logging.LoggerAdapter) -> bool:
    """The state directory ``0700``, and what is in it and in the projects' ``credentials/`` not
    readable by group or others; True (the hub keeps the answer: once per directories)."""
    private_dir(state_dir)
    left = tighten(state_dir)
    projects = pathlib.Path(projects_dir)
    if projects.is_dir():
        for credentials in sorted(projects.glob("*/credentials")):
            left += tighten(credentials)
    for path in left:
        log.warning("%s belongs to another OS user and is readable by others: make it private "
                    "(chmod go-rwx)", path)
    return True


class DeviceHold:
    """What the server `holder` (``<user>/<server name>``) of `user` (a JupyterHub user: its name
    and ``orm_spawners``) holds: its reservation in `ledger` and its devices of `devices()` (the
    hub's, read on first use)."""

    def __init__(self, ledger: Ledger, devices: Callable[[], LocalDevices], user, holder: str,
                 log: logging.Logger | logging.LoggerAdapter, log_name: str):
        self.ledger, self._devices = ledger, devices
        self.user, self.holder, self.log, self.log_name = user, holder, log, log_name

    @property
    def devices(self) -> LocalDevices:
        return self._devices()

    @property
    def allocator(self) -> DeviceAllocator:
        return self._devices().allocator

    def reserve(self, plan: Plan) -> None:
        try:
            self.ledger.reserve(plan.project, self.holder, plan.accelerator.name, plan.count)
        except UserInputError as e:
            in_use = sum(n for a, n in self.ledger.holdings(plan.project.name).values() if a == plan.accelerator.name)
            note = own_servers_note(self.holders(plan.accelerator, plan.project.name), in_use)
            raise UserInputError(e.field, f"{e.message}; {note}" if note else e.message, e.status) from None

    async def take(self, plan: Plan, when_full: str, poll_interval: float, said: Callable[[], list[str]],
                   say: Callable[[str], None]) -> list[str]:
        """The devices for `plan` (waiting while none is free, unless refused); `say` adds a progress
        message, `said()` those added so far."""
        acc, count = plan.accelerator, plan.count
        while True:
            devices = self.allocator.allocate(self.holder, acc, count)
            if devices is not None:
                self.log.info("%s gets %s %s: %s", self.log_name, count, acc.name, " ".join(devices))
                places = self.devices.places
                say(assigned(acc, count, [places.get(d) or f"device {d}" for d in devices]))
                return devices
            free, total = len(self.allocator.free(acc)), self.allocator.total(acc)
            message = f"waiting for {wanting(acc, count)} ({free} of {total} free)"
            if when_full == "refuse" or total < count:
                note = own_servers_note(self.holders(acc), total) or "try again later or pick another profile"
                raise web.HTTPError(409, f"no {acc.display_name} is free now ({free} of {total} free); {note}")
            if message not in said():
                say(message)
            await asyncio.sleep(poll_interval)

    def holders(self, acc: Accelerator, project: str | None = None) -> dict[str, int]:
        """The user's other servers → how many of `acc` each holds (in `project`'s reservations, if given)."""
        mine = f"{self.user.name}/"
        if project is not None:
            return {h[len(mine):]: n for h, (name, n) in self.ledger.holdings(project).items()
                    if h.startswith(mine) and h != self.holder and name == acc.name}
        serving = {d.uuid for d in self.allocator.devices if d.serves(acc)}
        return {name: len(serving.intersection(self.allocator.held_by(f"{mine}{name}")))
                for name in self.user.orm_spawners if f"{mine}{name}" != self.holder}
