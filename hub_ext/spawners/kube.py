"""`PlatformSpawner` (entry point ``platform``): the platform on a Kubernetes cluster.

A KubeSpawner whose pod is decided by the platform's plan (`Runtime.plan`, the same catalogue,
form and entitlements as the local runtime), in the chosen project's namespace:

- Before the pod: the project is provisioned (`hub_ext.manifests.tenancy` objects, applied by
  `Provisioner`: idempotent, cached in the hub's `PlatformService`, all or nothing); the choice of profile,
  options, credentials and datasets is validated (400/403 naming the field); the project's
  accelerator quota and the free capacity are checked from the watch caches (no API request):
  with ``when_full = "refuse"`` a spawn that cannot get its accelerator is refused before
  anything is created; with ``"wait"`` the pod waits in the scheduler's queue and progress says
  for what. Datasets still loading are refused, or waited for (``when_dataset_loading``), the
  wait's progress the loader's own ("12 of 1000 objects, 1.2 MB of 100 MB", and how far along).
- With a callable ``profile_list``, a team project's published catalogue lists no profiles, a
  personal one its owner's latest result (`KubeParts.provision`).
- The pod, from the plan alone (`spawn_plan`: it carries the chosen mounts and their
  environment): each dict-valued setting of the plan merged into the configured one as KubeSpawner
  merges overrides (recursively; None removes a key); tolerations, volumes and mounts added; the
  project's ServiceAccount (in a team project the member's own), its token mounted; the chosen
  credentials and datasets mounted read-only (`hub_ext.manifests.mounts`), their *paths* in
  ``GOOGLE_APPLICATION_CREDENTIALS``, ``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE`` and
  ``MLPLATFORM_DATASETS``; names and labels from KubeSpawner's safe slugs.
- The hub's API token for the server is not a plain env value in the pod spec (anyone who may
  read pods would see it, kubespawner#398): it lives in a Secret ``<pod>-hub-token`` and the env
  refers to it.
- Progress: plain sentences (`hub_ext.manifests.progress_text`) instead of raw events; a pod refused by
  the ResourceQuota says so in words, unless the hub's own view of the project's pods shows room
  under its limit: then it is the quota's accounting lagging a deleted pod, retried meanwhile.
  Once the pod is scheduled: what it was given ("assigned MIG slice 1g.5gb on node dgx-03"; which
  slice of the node is the device plugin's choice).

KubeSpawner's extension points are kept (`load_user_options`, `start`, `progress`, `get_env`,
`run_post_stop_hook`, `load_state`/`get_state`; the form and the pre-spawn hook are
`PlatformConfig`'s); the configuration is the traits of `PlatformConfig`, `MountConfig`,
`DatasetConfig` and `TenancyConfig` (trait groups, each read into its settings) and the class's own.
What it does is in parts, each with its guarantees in its module: the hub's `KubeParts` (`shared`),
one start's accelerator check and claim (`Admission`, `admission`), the plan's settings on the
traits (`ConfiguredTraits`, `configured`), the token Secret (`HubTokenSecret`, `token_secret`),
the writable dataset copies (`ServerCopies`, `copies`), a named server a refused API request made
(`NewServerRow`, `new_row`).
"""

from __future__ import annotations

import asyncio
import datetime

from jupyterhub.utils import maybe_future
from kubernetes_asyncio.client.exceptions import ApiException  # raised by KubeSpawner's own API calls only
from kubespawner import KubeSpawner
from tornado import web
from traitlets import Bool, Float, Unicode, default

from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError, UpstreamError, UserInputError
from hub_ext.core.mounts import Available
from hub_ext.kube.client import Kube, reason
from hub_ext.manifests.datasets import percent, progress_of, pvc_manifest, row
from hub_ext.manifests.mounts import volumes
from hub_ext.manifests.queues import QUEUE_LABEL, SERVERS_QUEUE
from hub_ext.manifests.tenancy import PROJECT_LABEL, pod_account
from hub_ext.spawners.admission import Admission
from hub_ext.spawners.configured import ConfiguredTraits
from hub_ext.spawners.dataset_config import DatasetConfig
from hub_ext.spawners.experience import NewServerRow
from hub_ext.spawners.form import QueueView, render_form
from hub_ext.spawners.hub_token import HubTokenSecret, delete_later, secret_name
from hub_ext.spawners.kube_progress import StartProgress
from hub_ext.spawners.kube_shared import KubeParts
from hub_ext.spawners.mount_config import MountConfig
from hub_ext.spawners.platform import PlatformConfig
from hub_ext.spawners.runtime import Plan
from hub_ext.spawners.server_copies import ServerCopies
from hub_ext.spawners.tenancy_config import TenancyConfig

_RESET = ("namespace", "extra_resource_limits", "node_selector", "tolerations", "volumes", "volume_mounts",
          "extra_labels", "service_account", "automount_service_account_token")


class PlatformSpawner(PlatformConfig, MountConfig, DatasetConfig, TenancyConfig, KubeSpawner):
    """A KubeSpawner that applies a `Plan` (see the module's docstring)."""
    platform_kind = "kubernetes"
    makes_copies = True  # `PlatformConfig.spawn_plan` accepts ``<dataset>:copy`` choices: `ServerCopies`
    admission: Admission | None = None  # the accelerator check and claim of the start in progress
    _configured_start_timeout: float | None = None  # start_timeout as configured (`run_pre_spawn_hook`)
    member_identity_template = Unicode(
        "", help="""The Kubernetes user name of a hub user ({username}), where the cluster has such identities
        (OIDC): their member RoleBinding in each project then binds it too. Empty: members act only through
        their pods (in a team project each member's own ServiceAccount, which goes when they leave).

        c.PlatformSpawner.member_identity_template = "oidc:{username}"
        """).tag(config=True)
    member_reconcile_interval = Float(
        300, help="""Seconds between rounds of the membership reconciler (hub_ext.web.reconcile): member
        RoleBindings no hub user is granted any more (left the group, deleted, blocked) are removed
        from team projects and the leavers' servers there are stopped; also once at hub start.
        0: no periodic rounds (admins may still POST /hub/api/mlplatform/reconcile).

        c.PlatformSpawner.member_reconcile_interval = 300
        """).tag(config=True)
    api_token_secret = Bool(
        True, help="""Keep the server's hub API token in a Secret the pod's env refers to, not in the pod spec.

        c.PlatformSpawner.api_token_secret = True
        """).tag(config=True)
    wait_poll_interval = Float(2.0, help="Seconds between checks while waiting for a dataset.").tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configured = ConfiguredTraits(self, always=_RESET)
        self.new_row = NewServerRow(self)

    @default("enable_user_namespaces")
    def _default_user_namespaces(self):
        return True  # one cluster-wide pod watch; each server's namespace is its project

    @default("fs_gid")
    def _default_fs_gid(self):
        return 100  # credentials are mounted 0440 with this group

    @default("container_security_context")
    def _default_container_security_context(self):
        # Pod Security "restricted" (warned about in every project), as far as the image allows:
        # no added capabilities, the runtime's seccomp profile, not root unless uid 0 is configured
        sc = {"capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
        return {**sc, "runAsNonRoot": True} if self.uid not in (None, 0) else sc

    @default("options_form")
    def _default_options_form(self):
        return PlatformSpawner._options_form

    # ---- parts ------------------------------------------------------------------------------------
    @property
    def shared(self) -> KubeParts:
        """The hub's `KubeParts` for this spawner's API server and mount settings (`PlatformService.part`)."""
        settings = self.mount_settings()
        key = ("kubernetes", asyncio.get_running_loop(), self.api.api_client.configuration.host, repr(settings))
        return self.platform.part(key, lambda: KubeParts(
            Kube(self.api.api_client, timeout=self.k8s_api_request_timeout), settings))

    @property
    def token_secret(self) -> HubTokenSecret:
        """The server's hub token Secret where the server is now (pod name and namespace change)."""
        return HubTokenSecret(self.shared.kube, self.namespace, self.pod_name, self.log, self._log_name)

    @property
    def copies(self) -> ServerCopies:
        """The server's writable dataset copies where the server is now."""
        return ServerCopies(self.shared.kube, self.namespace, self.pod_name, self.log, self._log_name)

    async def capacity(self) -> dict[str, tuple[int, int]]:
        view = self.shared.view
        await view.start()
        return view.capacity(self.runtime.accelerators)

    async def usage(self, project: str) -> dict[str, int] | None:
        """Accelerators the project's pods (servers and jobs) hold now; None when unknown."""
        await self.shared.view.start()
        return self.shared.view.usage(self.runtime.accelerators, project)

    async def project_files(self, project: str) -> Available:
        # the hub reads a project's Secrets with the rights it binds there: make sure it is provisioned
        # (cached: no request once it is)
        await self.provision()
        return await self.shared.resources.available(project)

    async def add_credential(self, project: str, name: str, creds, description: str, created_by: str) -> None:
        await self.provision()  # the project may not exist yet (cached: no request when it does)
        await self.shared.resources.add_credential(project, name, creds, description, created_by)

    async def delete_credential(self, project: str, name: str, deleted_by: str, admin: bool = False) -> None:
        await self.shared.resources.delete_credential(project, name, deleted_by, admin)

    async def add_dataset(self, project: str, request, created_by: str) -> dict:
        """Make the PVC of a checked `hub_ext.manifests.datasets.DatasetRequest`; its row (`hub_ext.manifests.datasets.row`)."""
        await self.provision()  # the project may not exist yet (cached: no request when it does)
        body = pvc_manifest(project, request, self.dataset_settings(), self.mount_settings(), created_by)
        return row(await self.shared.resources.add_dataset(body), self.mount_settings())

    async def delete_dataset(self, project: str, name: str, deleted_by: str, admin: bool = False) -> None:
        await self.shared.resources.delete_dataset(project, name, deleted_by, admin)

    async def dataset_rows(self, project: str) -> list[dict]:
        """The project's datasets as the hub's page shows them, with the loader's progress."""
        return await self.shared.resources.dataset_rows(project)

    # ---- projects ---------------------------------------------------------------------------------
    async def provision(self) -> list[Project]:
        """Make sure every project of the user exists as it should (idempotent; cached)."""
        if self.runtime.dynamic is not None and not self.runtime.profiles:  # not called yet: the API, credentials
            await self._profiles_or_refusal()
        template, name = self.member_identity_template, self.user.name
        projects = self.user_projects()
        members = [(name, template.format(username=name) if template else "")]
        tenancy = await self.shared.queueing(self.tenancy_settings())
        self._queued = tenancy.kueue
        await self.shared.provision(self.runtime, projects, name, members, tenancy)
        return projects

    # ---- the form ---------------------------------------------------------------------------------
    async def _options_form(self, spawner=None) -> str:
        try:
            projects = await self.provision()
            files = {p.name: await self.project_files(p.name) for p in projects}
        except UpstreamError as e:
            raise self.refused(e) from None
        ahead = await self.queue_ahead([p.name for p in projects])
        queue = None if ahead is None else QueueView(self.queue_start_timeout, ahead)
        return render_form(projects, self.runtime.profiles, await self.capacity(), files, queue, self.hub_url())

    async def queue_ahead(self, projects: list[str]) -> dict[tuple[str, str], int] | None:
        """`KubeParts.queue_ahead` for these projects: None where Kueue does not hold the accelerators."""
        return await self.shared.queue_ahead(self.tenancy_settings(), projects, self.runtime.accelerators)

    # ---- before the pod: plan, checks, traits -----------------------------------------------------
    async def load_user_options(self):
        """Replaces KubeSpawner's profile handling: validate the choice into a plan and apply it."""
        self.configured.restore()  # every trait an earlier plan changed (a failed spawn leaves the same object)
        self._stage, self.admission, self._plan = "preparing your project", None, None
        self._stage_percent = None  # how far a dataset the start waits for has loaded
        try:
            plan = await self.spawn_plan(self.user_options, allow_loading=self.when_dataset_loading == "wait")
            self.admission = Admission(self.shared, self.runtime.accelerators, self.user.name, self.pod_name)
            await self.admission.check(plan, self.when_full, queued=getattr(self, "_queued", False))
            plan = self.copies.with_claims(await self._wait_for_datasets(plan))
            self._apply(plan)
            await self.copies.make(plan)
            if self.api_token_secret:
                try:
                    await self.token_secret.write(self.api_token, self.user.name)
                except UpstreamError as e:
                    if "NotFound" not in e.reason:
                        raise
                    self.shared.provisioner.forget()  # the namespace went away behind the hub's back
                    await self.provision()
                    await self.token_secret.write(self.api_token, self.user.name)
        except (UserInputError, UpstreamError, ConfigError) as e:
            if self.admission is not None:
                self.admission.release()
            raise self.refused(e) from None
        self._stage = self.admission.wait or "creating the notebook pod"

    async def _wait_for_datasets(self, plan: Plan) -> Plan:
        """The plan once none of its datasets is loading any more (chosen again from the project's
        files after each wait: a failed load is refused)."""
        while plan.mounts.loading:
            d = plan.mounts.loading[0]
            self._stage = f"waiting for the dataset {d.name!r} to finish loading" + (f" ({d.message})" if d.message else "")
            pvcs = self.shared.resources.pvcs
            pvc = next((p for p in pvcs.items(plan.project.name) if p["metadata"]["name"] == d.name), None)
            self._stage_percent = percent(progress_of(pvc)) if pvc is not None else None
            await asyncio.sleep(self.wait_poll_interval)
            plan = await self.spawn_plan(self.user_options, allow_loading=True)
        self._stage_percent = None
        return plan

    def _apply(self, plan: Plan) -> None:
        ns = plan.project.name
        self.configured.apply(plan.settings, added=("tolerations", "volumes", "volume_mounts"))
        if ns != self.namespace:
            self._pvc_exists = False  # a home PVC is per namespace: KubeSpawner must make it in this one
        self.namespace = ns
        self.dns_name = self.dns_name_template.format(namespace=ns, name=self.pod_name)
        self.service_account = pod_account(plan.project, self.user.name)  # a team member: their own
        self.automount_service_account_token = True
        vols, mounts = volumes(plan.mounts.credentials, plan.mounts.datasets, self.mount_settings(), self.uid == 0)
        self.volumes = list(self.volumes) + vols
        self.volume_mounts = list(self.volume_mounts) + mounts
        self.extra_labels = {**self.extra_labels, PROJECT_LABEL: ns, "mlplatform.io/profile": plan.profile.slug}
        if getattr(self, "_queued", False):  # Kueue admits the pod (its scheduling gate) once its queue has room:
            self.extra_labels[QUEUE_LABEL] = SERVERS_QUEUE  # the servers' queue, which never borrows
        self._platform_env = {**plan.mounts.env, "MLPLATFORM_PROJECT": ns, "MLPLATFORM_PROFILE": plan.profile.slug,
                              "MLPLATFORM_BACKEND": "kubernetes"}
        self._plan = plan
        self._planned_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")

    async def _ensure_namespace(self):
        """Nothing: the project's provisioning made the namespace (KubeSpawner's POST was a 409 each start)."""

    def get_env(self):
        env = super().get_env()
        env.update(getattr(self, "_platform_env", {}))  # paths only, never content
        if self.api_token_secret and self.api_token:
            ref = {"valueFrom": {"secretKeyRef": {"name": secret_name(self.pod_name), "key": "token"}}}
            for name, value in list(env.items()):
                if value == self.api_token:
                    env[name] = {"name": name, **ref}
        return env

    # ---- lifecycle -------------------------------------------------------------------------------
    async def run_pre_spawn_hook(self):
        """Where Kueue holds the accelerators, the start may wait in the queue: JupyterHub (and
        KubeSpawner's wait for the pod) then allow it `queue_start_timeout` (read after this hook)."""
        await maybe_future(super().run_pre_spawn_hook())
        if self._configured_start_timeout is None:
            self._configured_start_timeout = self.start_timeout
        try:
            queued = (await self.shared.queueing(self.tenancy_settings())).kueue
        except UpstreamError:
            queued = False  # the start's provisioning refuses it in words
        self.start_timeout = max(self._configured_start_timeout, self.queue_start_timeout) if queued \
            else self._configured_start_timeout

    def start(self):
        started = super().start()
        self._start_future = asyncio.ensure_future(self._translated(started))
        return self._start_future

    async def _translated(self, started):
        self._starting = True
        try:
            return await started
        except ApiException as e:  # KubeSpawner's own pod creation, not the platform's `Kube`
            refusal = self._pod_refusal(e)
            self.new_row.forget_if_refused(refusal[0])
            raise web.HTTPError(*refusal) from None
        except Exception as e:  # what the start made goes with JupyterHub's stop of it (`run_post_stop_hook`)
            self.new_row.forget_if_refused(e.status_code if isinstance(e, web.HTTPError) else 500)
            raise
        finally:
            self._starting = False
            if self.admission is not None:
                self.admission.release()

    async def _make_create_pod_request(self, pod, request_timeout):
        try:
            return await super()._make_create_pod_request(pod, request_timeout)
        except ApiException as e:  # KubeSpawner's own request, not the platform's `Kube`
            if (e.status == 403 and "exceeded quota" in reason(e) and self.admission is not None
                    and await self.admission.quota_lags(getattr(self, "_plan", None), self.namespace)):
                self.log.info("the quota of %s has not released a stopped pod's accelerator yet; retrying",
                              self._log_name)
                return False  # KubeSpawner's exponential_backoff tries again
            raise

    def _pod_refusal(self, e: ApiException) -> tuple[int, str]:
        text = reason(e)
        if e.status == 403 and "quota" in text:
            self.log.info("quota refused the pod of %s: %s", self._log_name, text)
            admission = self.admission or Admission(self.shared, self.runtime.accelerators, self.user.name, self.pod_name)
            return 403, admission.quota_refusal(getattr(self, "_plan", None), self.namespace)
        self.log.warning("the pod of %s was refused: %s", self._log_name, text)
        return 502, f"could not create the notebook pod: {text}".replace("%", "%%")

    async def run_post_stop_hook(self):
        """The server's token Secret and writable copies go once it has stopped. Here, not in `stop`:
        every stop JupyterHub makes runs this hook (`User.stop`), but it calls `stop` only when
        `poll` finds the pod, so a server whose pod was never made (a hub killed between the
        Secret and the pod), was deleted or was evicted would have left both behind. `stop` alone
        also runs mid-start, where KubeSpawner deletes a leftover pod before making its own. A start
        that failed is stopped too (`User.spawn`), so this is also what a refused start leaves. Only
        in the project the server's options chose: a start refused before it was applied made
        nothing, and the spawner's namespace is then still another one (the hub's, an earlier start's)."""
        try:
            await maybe_future(super().run_post_stop_hook())
        finally:
            if self.namespace == self._options_project():
                await self._delete_token_secret()
                await self.copies.delete()
                delete_later(self._delete_token_secret,
                             unless=lambda: self.pending or self.ready or getattr(self, "_starting", False))

    async def _delete_token_secret(self) -> None:
        if self.api_token_secret:
            await self.token_secret.delete()

    async def progress(self):
        if self.events_enabled:
            await self._start_watching_events()
        async for event in StartProgress().follow(self):
            yield event

    # ---- state -----------------------------------------------------------------------------------
    def load_state(self, state):
        """KubeSpawner's state says where the last *finished* start put the pod. JupyterHub stores
        `user_options` before a start and the state only after it, so a start the hub did not see
        finish (it died meanwhile) is known only by its options: their project is the namespace
        where that start may have made the pod and its token Secret, and `poll` and `stop` look
        there (else a restarted hub looked in the old namespace and left both behind)."""
        super().load_state(state)
        project = self._options_project()
        if project and project != self.namespace:
            self.namespace = project
            self.dns_name = self.dns_name_template.format(namespace=project, name=self.pod_name)

    def _options_project(self) -> str | None:
        options = {k: v for k, v in (self.user_options or {}).items() if k not in ("credentials", "datasets")}
        try:
            return self.user_plan(options).project.name
        except (UserInputError, ConfigError):  # e.g. no longer a member: the team's namespace still holds it
            project = options.get("project")
            return project if isinstance(project, str) and project in self.runtime.entitlements.teams else None

    def get_state(self):
        state = super().get_state()
        plan = getattr(self, "_plan", None)
        if plan is not None:
            state["mlplatform"] = {"project": plan.project.name, "profile": plan.profile.slug}
        return state
