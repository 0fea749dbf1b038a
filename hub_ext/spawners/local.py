"""`LocalPlatformSpawner` (entry point ``platform-local``): the platform on one machine.

Single-user servers are local processes (JupyterHub's `SimpleLocalProcessSpawner`: every server
runs as the hub's own OS user, with its home under `home_dir_template`). On top of that it applies
the plan pure code made (`Runtime.plan`): the project and profile the user may use, the profile's
option choices (its settings applied as KubeSpawner applies an override: a dict-valued trait such
as ``environment`` merged recursively, a None removing a key; each spawn starts from the configured
values, `apply_settings`), and the accelerator, which it reserves atomically against the project's limit
(`Ledger`) and then takes from the device inventory, handing the devices to the server as
``CUDA_VISIBLE_DEVICES`` (UUIDs; one device is never given to two servers; devices come back on
stop, and after a hub restart from the allocator's state file). The allocator is the hub's one
(`LocalDevices`, kept by the hub's `PlatformService`), and the plan carries the chosen credentials
and datasets with their environment (`spawn_plan`).

Trust model: one machine of trusted users (``docs/platform.md``, "Trust model"). The hub enforces
who may use which project, profile and how many accelerators, but every server runs as the same OS
user, so users can read each other's files (homes, credentials, job records and logs) and nothing
stops a process from ignoring ``CUDA_VISIBLE_DEVICES``. CPU and memory limits of a profile are not
enforced here (they are on Kubernetes). Use `PlatformSpawner` on a cluster for isolation between
users. What is kept from *other OS accounts* of the machine: the state directory is made ``0700``
and what an earlier run left open in it (and in the projects' ``credentials/``) is tightened when
the spawner first uses it, and the servers run with umask ``077`` (`popen_kwargs`), so their job
records, logs and files are created ``0600``.

The server's environment: the hub's interpreter's ``bin`` directory comes first on ``PATH`` (where
``python``, ``jupyterhub-singleuser`` and ``kubectl-ai_platform`` of the platform's environment
are), and terminals are non-login shells (`terminal_command`): jupyter_server_terminals otherwise
runs ``bash -l`` for a server without a tty, whose ``/etc/profile`` resets ``PATH``. Each server
has its own job state (``MLPLATFORM_STATE_DIR``, `job_state_dir`): the default server
``<state_dir>/jobs/<user>``, a named one ``<state_dir>/jobs/<user>/servers/<slug of its name>``,
so two servers never run job backends on one state.

Progress events (JupyterHub's `progress()` shape, ``{"progress": int, "message": str}``), each
sent once and in order: "waiting for a free 1g.5gb MIG slice (0 of 2 free)", then what the server
was given, "assigned MIG slice 1g.5gb (GPU 0, slice 2)" (where ``nvidia-smi -L`` placed it; the
device's UUID for a declared inventory), then "starting". A refusal for want of an accelerator
(the project's limit, or none free) names the user's own servers that hold it, if any.

JupyterHub's extension points are kept (`start`, `stop`, `poll`, `progress`, `get_env`, `get_args`,
`get_state`/`load_state`/`clear_state`; the form and the pre-spawn hook are `PlatformConfig`'s);
the configuration is the traits of `PlatformConfig` and the class's own. What it does is in parts,
each with its guarantees in its module: the hub's `LocalDevices` (`devices_here`), what one server
holds of them (`DeviceHold`, `hold`), the plan's settings on the traits (`ConfiguredTraits`,
`configured`), a named server a refused API request made (`NewServerRow`, `new_row`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from jupyterhub.spawner import SimpleLocalProcessSpawner
from tornado import web
from traitlets import Any as AnyTrait
from traitlets import Float, List, Unicode, default

from hub_ext.core.errors import ConfigError, UserInputError
from hub_ext.core.mounts import Available
from hub_ext.core.slugs import safe_slug
from hub_ext.local.files import PRIVATE_UMASK, project_files
from hub_ext.local.inventory import DeviceAllocator
from hub_ext.manifests.datasets import row_of
from hub_ext.spawners.configured import ConfiguredTraits
from hub_ext.spawners.experience import NewServerRow
from hub_ext.spawners.form import render_form
from hub_ext.spawners.local_devices import DeviceHold, LocalDevices, make_private, read_devices
from hub_ext.spawners.platform import PlatformConfig
from hub_ext.spawners.runtime import Plan

_PLACEMENT = ("extra_resource_limits", "node_selector", "tolerations")  # the device allocation stands for them


class LocalPlatformSpawner(PlatformConfig, SimpleLocalProcessSpawner):
    """A local-process spawner that applies a `Plan` (see the module's docstring)."""
    inventory = AnyTrait(
        None,
        allow_none=True,
        help="""Accelerator devices of this machine. None: read `nvidia-smi -L` (no GPUs if it is absent).
        A dict declares them instead (for machines without GPUs, or to offer a subset):

        c.LocalPlatformSpawner.inventory = {"GPU-demo-0": {"type": "gpu"},
                                            "MIG-demo-1": {"type": "mig", "profile": "1g.5gb"}}""",
    ).tag(config=True)

    state_dir = Unicode(
        help="""Where the device allocations are kept across hub restarts.

        c.LocalPlatformSpawner.state_dir = "/srv/jupyterhub/mlplatform"
        """,
    ).tag(config=True)

    projects_dir = Unicode(
        help="""Where projects live as directories: <project>/credentials/<name>.json (GCP service-account
        key) or <name>.aws (AWS shared-credentials file), and <project>/datasets/<name>/. Default:
        <state_dir>/projects.

        c.LocalPlatformSpawner.projects_dir = "/srv/mlplatform/projects"
        """,
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configured = ConfiguredTraits(self)
        self.new_row = NewServerRow(self)

    @default("projects_dir")
    def _default_projects_dir(self):
        return os.path.join(self.state_dir, "projects")

    wait_poll_interval = Float(1.0, help="Seconds between checks while waiting for a free device.").tag(config=True)

    @default("state_dir")
    def _default_state_dir(self):
        return os.path.abspath("mlplatform-state")

    terminal_command = List(
        Unicode(),
        help="""The shell of the servers' terminals (`ServerApp.terminado_settings["shell_command"]`).
        Default: bash (else sh), not a login shell, so the server's PATH (the platform's tools first)
        stays as it is. An empty list keeps jupyter_server_terminals' choice (``$SHELL -l``).

        c.LocalPlatformSpawner.terminal_command = ["/bin/zsh"]
        """,
    ).tag(config=True)

    @default("terminal_command")
    def _default_terminal_command(self):
        return [next((sh for sh in ("/bin/bash", "/usr/bin/bash") if os.access(sh, os.X_OK)), "/bin/sh")]

    @default("popen_kwargs")
    def _default_popen_kwargs(self):
        return {"umask": PRIVATE_UMASK}  # what the servers (and their jobs) write is their OS user's only

    # ---- parts ------------------------------------------------------------------------------------
    def make_state_private(self) -> None:
        """The state directory ``0700`` and nothing in it, nor in the projects' ``credentials/``,
        readable by group or others (once per hub and directories; `make_private`)."""
        self.platform.part(("private", self.state_dir, self.projects_dir),
                           lambda: make_private(self.state_dir, self.projects_dir, self.log))

    @property
    def devices_here(self) -> LocalDevices:
        """The hub's `LocalDevices` for this spawner's inventory and state directory."""
        return self.platform.part(("devices", repr(self.inventory), self.state_dir), self._read_devices)

    def _read_devices(self) -> LocalDevices:
        self.make_state_private()
        return read_devices(self.inventory, self.state_dir)

    @property
    def allocator(self) -> DeviceAllocator:
        return self.devices_here.allocator

    @property
    def holder(self) -> str:
        return f"{self.user.name}/{self.name}"

    @property
    def hold(self) -> DeviceHold:
        """What this server holds of the machine's accelerators (the project's reservation, devices)."""
        return DeviceHold(self.runtime.ledger, lambda: self.devices_here, self.user, self.holder, self.log,
                          self._log_name)

    def _say(self, message: str) -> None:
        """Add a progress message (`progress` sends each once, in order)."""
        self._progress_messages = [*getattr(self, "_progress_messages", []), message]

    async def project_files(self, project: str) -> Available:
        return project_files(self.projects_dir, project)

    async def dataset_rows(self, project: str) -> list[dict]:
        """The project's datasets as the hub's datasets page shows them (directories: always ready)."""
        return [row_of(d, project) for d in (await self.project_files(project)).datasets]

    def _datasets_are_directories(self) -> web.HTTPError:
        return web.HTTPError(501, f"this runtime keeps datasets as directories under {self.projects_dir}/<project>/"
                                  "datasets/<name>: add or remove them there")

    async def add_dataset(self, project: str, request, created_by: str) -> dict:
        """Not here: datasets are directories (501 naming where)."""
        raise self._datasets_are_directories()

    async def delete_dataset(self, project: str, name: str, deleted_by: str, admin: bool = False) -> None:
        raise self._datasets_are_directories()

    async def usage(self, project: str) -> dict[str, int]:
        return self.runtime.ledger.usage(project)

    async def capacity(self) -> dict[str, tuple[int, int]]:
        return {name: (len(self.allocator.free(acc)), self.allocator.total(acc))
                for name, acc in self.runtime.accelerators.items()}

    # ---- the form ---------------------------------------------------------------------------------
    async def _options_form(self, spawner=None) -> str:
        rt = self.runtime
        projects = self.user_projects()
        files = {p.name: await self.project_files(p.name) for p in projects}
        return render_form(projects, rt.profiles, await self.capacity(), files, hub_url=self.hub_url())

    @default("options_form")
    def _default_options_form(self):
        return LocalPlatformSpawner._options_form

    # ---- lifecycle ----------------------------------------------------------------------------------
    async def make_plan(self) -> Plan:
        try:
            return await self.spawn_plan(self.user_options)
        except (UserInputError, ConfigError) as e:
            raise self.refused(e) from None

    def apply_settings(self, plan: Plan) -> None:
        """The plan's settings on this spawner's traits, as KubeSpawner applies an override: a
        dict-valued one merged into the configured value (`apply_override`: recursive, None removes
        a key), others replacing it; Kubernetes placement is skipped (the device allocation stands
        for it here). Every trait an earlier spawn changed gets its configured value back first."""
        self.configured.restore()
        self.configured.apply(plan.settings, skip=_PLACEMENT)

    async def start(self):
        try:
            return await self._start()
        except web.HTTPError as e:
            self.new_row.forget_if_refused(e.status_code)
            raise

    async def _start(self):
        self._progress_messages = []
        self.make_state_private()
        plan = await self.make_plan()
        self._plan = plan
        self._reserved_in = plan.project.name
        self.apply_settings(plan)
        self.devices = []
        if plan.accelerator is not None:
            hold = self.hold
            try:
                hold.reserve(plan)
            except UserInputError as e:
                raise self.refused(e) from None
            try:
                self.devices = await hold.take(plan, self.when_full, self.wait_poll_interval,
                                               lambda: getattr(self, "_progress_messages", []), self._say)
            except BaseException:
                self._release()
                raise
        self._say("starting")
        try:
            return await super().start()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        """Give back this server's reservation (if it made one) and its devices."""
        project = getattr(self, "_reserved_in", None)
        if project is not None:
            self.runtime.ledger.release(project, self.holder)
        self.allocator.release(self.holder)
        self.devices = []

    async def stop(self, now=False):
        try:
            await super().stop(now=now)
        finally:
            self._release()

    async def poll(self):
        status = await super().poll()
        if status is not None and getattr(self, "_reserved_in", None) and not self._spawn_pending:
            self._release()  # the server died (or did not survive a restart): its devices come back
        return status

    def job_state_dir(self) -> str:
        """The server's own job state (server_ext's local backend): ``<state_dir>/jobs/<user>`` for the
        default server, ``<state_dir>/jobs/<user>/servers/<safe slug of the name>`` for a named one."""
        base = os.path.join(self.state_dir, "jobs", self.user.name)
        return os.path.join(base, "servers", safe_slug(self.name)) if self.name else base

    def get_args(self):
        args = list(super().get_args())
        if self.terminal_command and not any("terminado_settings" in a for a in args):
            args.append("--ServerApp.terminado_settings=" + json.dumps({"shell_command": list(self.terminal_command)}))
        return args

    def get_env(self):
        env = super().get_env()
        tools = os.path.dirname(sys.executable)  # the platform's environment: python, kubectl-ai_platform
        rest = [d for d in env.get("PATH", os.defpath).split(os.pathsep) if d and d != tools]
        env["PATH"] = os.pathsep.join([tools, *rest])
        plan = getattr(self, "_plan", None)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(getattr(self, "devices", []) or [])
        if plan is not None:
            env["MLPLATFORM_PROJECT"] = plan.project.name
            env["MLPLATFORM_PROFILE"] = plan.profile.slug
        # the notebook server's jobs (server_ext): this server's own job state, the projects' files
        env["MLPLATFORM_STATE_DIR"] = self.job_state_dir()
        env["MLPLATFORM_PROJECTS_DIR"] = self.projects_dir
        if plan is not None:
            env.update(plan.mounts.env)  # file paths only, never their content
        return env

    async def progress(self):
        sent = 0
        while True:
            done = not getattr(self, "_spawn_future", None) or self._spawn_future.done()
            messages = getattr(self, "_progress_messages", [])
            for message in messages[sent:]:
                yield {"progress": 50 if message == "starting" else 30 if message.startswith("assigned") else 10,
                       "message": message}
            sent = len(messages)
            if done:
                return
            await asyncio.sleep(0.5)

    # ---- state across hub restarts ----------------------------------------------------------------
    def get_state(self):
        state = super().get_state()
        plan = getattr(self, "_plan", None)
        if plan is not None:
            state["mlplatform"] = {"project": plan.project.name, "profile": plan.profile.slug,
                                   "accelerator": plan.accelerator.name if plan.accelerator else None,
                                   "count": plan.count, "devices": list(getattr(self, "devices", []))}
        elif getattr(self, "_saved_state", None):
            state["mlplatform"] = self._saved_state
        return state

    def load_state(self, state):
        super().load_state(state)
        saved = state.get("mlplatform")
        if saved and saved.get("accelerator"):
            self.devices = list(saved.get("devices") or [])
            self.runtime.ledger.restore(saved["project"], self.holder, saved["accelerator"], saved["count"])
            self._reserved_in = saved["project"]
            self._saved_state = saved

    def clear_state(self):
        super().clear_state()
        if self._spawn_pending:
            return  # LocalProcessSpawner.poll() clears state before the process exists: keep what start() took
        if getattr(self, "_reserved_in", None):
            self._release()
        self.devices = []
        self._plan = self._saved_state = self._reserved_in = None
