"""Leaving a team takes effect: the hub reconciles team projects' members with its groups.

`Reconciler.run` (inside the hub process) lists, in every team project's namespace, the member
RoleBindings and ServiceAccounts (label ``mlplatform.io/member``), deletes those no hub user is
granted any more (`hub_ext.manifests.membership`: left the group, deleted, or blocked by the
authenticator) and stops every running server of a user in a team project they are no longer
granted. Deleting a leaver's ServiceAccount voids every token of it, also one copied out of a pod
while they were a member. A leaver's jobs in the project are left alone: they are the team's work,
so they keep running and stay visible to the remaining members, with no right left (the log says so). A server still starting or stopping is left to the
next round. A project whose namespace the hub cannot read yet (never provisioned) has nothing
to remove.

How it runs: the hub's API endpoint ``POST /hub/api/mlplatform/reconcile`` (`hub_ext.web.api`;
scope ``custom:mlplatform:reconcile`` or ``admin:users``) does one round in the hub process, with
the hub's database, authenticator and Kubernetes client, and answers what it did. The
hub-managed service ``mlplatform-reconciler`` (this module's `main`, started by JupyterHub with
the hub and restarted by it if it exits; `hub_ext.setup.configure` adds it on Kubernetes)
calls that endpoint once it starts and then every ``c.PlatformSpawner.member_reconcile_interval``
seconds (default 300; 0: no service, the endpoint stays for admins), and stops by itself once
the hub process that started it is gone (a hub killed cannot stop its services).

`reconcile_hub(handler)` is the endpoint's one call: it reads the hub's users, groups and
running servers, reaches the hub's `PlatformService` (`hub_ext.spawners.service`) through a user's spawner and
stops servers the way the hub's own API does (`stop_single_user`). Rounds run one at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from hub_ext.manifests.membership import HubUser, Removal, Server, Stop, servers_to_stop, stale_bindings, wanted_members
from hub_ext.manifests.tenancy import MEMBER_LABEL
from hub_ext.spawners.service import KEY

log = logging.getLogger("mlplatform.reconcile")
SERVICE_NAME = "mlplatform-reconciler"
SCOPE = "custom:mlplatform:reconcile"
DEFAULT_INTERVAL = 300
JOBS_STAY = "their jobs there keep running, with no right left (their ServiceAccount is gone), and stay visible to the team"


@dataclass(frozen=True)
class Platform:
    """What a round needs of the platform: team projects (project → group) and the hub's Kubernetes
    client with its provisioner (told when a binding goes, so a later spawn re-creates a returning
    member's binding and account)."""
    teams: Mapping[str, str]
    kube: Any  # hub_ext.kube.client.Kube
    provisioner: Any  # hub_ext.kube.provision.Provisioner

    @classmethod
    def of(cls, spawner) -> "Platform":
        """From a PlatformSpawner (any user's: these are hub-wide)."""
        teams = {t.name: t.group for t in spawner.runtime.entitlements.teams.values()}
        shared = spawner.shared
        return cls(teams, shared.kube, shared.provisioner)


@dataclass
class Report:
    removed: list[Removal] = field(default_factory=list)
    stopped: list[Stop] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def json(self) -> dict:
        return {"removed_bindings": [f"{r.project}/{r.binding}" for r in self.removed if r.kind == "RoleBinding"],
                "removed_accounts": [f"{r.project}/{r.binding}" for r in self.removed if r.kind == "ServiceAccount"],
                "stopped_servers": [{"user": s.server.user, "server": s.server.name, "project": s.project}
                                    for s in self.stopped],
                "errors": list(self.errors)}


class Reconciler:
    def __init__(self, platform: Platform):
        self.platform = platform

    async def run(self, users: list[HubUser], servers: list[Server],
                  stop: Callable[[Server], Awaitable[None]]) -> Report:
        """One round: remove stale member bindings of every team project, stop leavers' servers."""
        from hub_ext.kube.client import KubeError, path_of, reason

        teams, report = self.platform.teams, Report()
        wanted = wanted_members(teams, users)
        for project, group in sorted(teams.items()):
            try:
                found = {kind: await self._members(project, kind) for kind in ("RoleBinding", "ServiceAccount")}
            except KubeError as e:  # one project's failure must not stop the others
                report.errors.append(f"{project}: could not list member RoleBindings and ServiceAccounts: {reason(e)}")
                log.warning("membership of the project %r not reconciled: could not list its member "
                            "RoleBindings and ServiceAccounts: %s", project, reason(e))
                continue
            for kind, objects in found.items():
                for removal in stale_bindings(project, group, objects, wanted[project], users, kind):
                    try:
                        await self.platform.kube.delete(path_of(kind, project, removal.binding))
                    except KubeError as e:
                        report.errors.append(f"{project}/{removal.binding}: could not delete: {reason(e)}")
                        log.warning("could not remove the %s %s/%s (%s): %s", kind, project, removal.binding,
                                    removal.why, reason(e))
                        continue
                    report.removed.append(removal)
                    log.info("removed the %s %s/%s from the project %r: %s; %s", kind, project, removal.binding,
                             project, removal.why, JOBS_STAY)
        if report.removed:
            self.platform.provisioner.forget()  # a returning member's binding must be made again
        for s in servers_to_stop(servers, teams, wanted, users):
            log.info("stopping %s's server %r in the project %r: %s; %s", s.server.user, s.server.name, s.project,
                     s.why, JOBS_STAY)
            try:
                await stop(s.server)
            except Exception as e:  # noqa: BLE001 - whatever the spawner raised; the next server is still stopped
                report.errors.append(f"{s.server.user}/{s.server.name}: could not stop: {type(e).__name__}: {e}")
                log.warning("could not stop %s's server %r in the project %r: %s", s.server.user, s.server.name,
                            s.project, e)
                continue
            report.stopped.append(s)
        return report

    async def _members(self, project: str, kind: str) -> list[dict]:
        """The member RoleBindings or ServiceAccounts (`kind`) in `project`'s namespace; none where the
        namespace does not exist or is not the platform's (the hub holds no rights there). A 403 in a
        namespace of the platform's (the hub's own binding there is gone) is raised: its members are
        not known."""
        from hub_ext.core.credentials import MANAGED_BY
        from hub_ext.kube.client import Forbidden, path_of

        kube = self.platform.kube
        try:
            answer = await kube.list(path_of(kind, project), labelSelector=MEMBER_LABEL)
        except Forbidden:
            ns = await kube.get(path_of("Namespace", None, project))
            labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
            if ns is None or any(labels.get(k) != v for k, v in MANAGED_BY.items()):
                return []  # not provisioned yet, or not the platform's: no binding of ours there
            raise
        return list((answer or {}).get("items") or [])


# ---- the hub side: what the endpoint reads of JupyterHub ------------------------------------------
def hub_users(db, authenticator) -> list[HubUser]:
    from jupyterhub import orm

    blocked = set(getattr(authenticator, "blocked_users", None) or ())
    return [HubUser(u.name, frozenset(g.name for g in u.groups), bool(u.admin), u.name in blocked)
            for u in db.query(orm.User)]


def running_servers(handler) -> dict[tuple[str, str], tuple[Server, Any]]:
    """(user, server name) → (the `Server`, its hub `User`) of each ready server (not starting or
    stopping)."""
    from jupyterhub import orm

    out: dict[tuple[str, str], tuple[Server, Any]] = {}
    for orm_spawner in handler.db.query(orm.Spawner).filter(orm.Spawner.server_id.isnot(None)):
        if orm_spawner.user is None:
            continue
        user = handler.users[orm_spawner.user]
        spawner = user.spawners[orm_spawner.name]
        if spawner.ready:
            out[(user.name, orm_spawner.name)] = (Server(user.name, orm_spawner.name, dict(spawner.user_options or {})),
                                                  user)
    return out


def platform_spawner(handler):
    """A Kubernetes platform spawner of any hub user (the hub's `PlatformService` parts are
    shared: any user's carries the hub's configuration), or None without one."""
    from jupyterhub import orm

    service = handler.settings.get(KEY)
    if service is None or service.kind != "kubernetes":
        return None
    users = list(handler.users.values()) or [handler.users[u] for u in handler.db.query(orm.User).limit(1)]
    for user in users:
        spawner = service.spawner(user)
        if spawner is not None:
            return spawner
    return None


async def reconcile_hub(handler) -> Report:
    """One round for the hub that `handler` (a JupyterHub API handler) serves."""
    spawner = platform_spawner(handler)
    if spawner is None:
        return Report(errors=["no hub user has a platform spawner yet: nothing to reconcile"])
    # one round at a time (the service and an admin may ask at once)
    async with spawner.platform.part(("reconcile round",), asyncio.Lock):
        servers = running_servers(handler)

        async def stop(server: Server) -> None:
            await handler.stop_single_user(servers[(server.user, server.name)][1], server.name)

        report = await Reconciler(Platform.of(spawner)).run(hub_users(handler.db, handler.authenticator),
                                                            [s for s, _ in servers.values()], stop)
        if report.removed or report.stopped or report.errors:
            log.info("membership reconciled: %d RoleBindings removed, %d servers stopped, %d errors",
                     len(report.removed), len(report.stopped), len(report.errors))
        return report


# ---- the hub-managed service: ask the hub for a round every interval -------------------------------
ORPHAN_CHECK_S = 1.0


async def waited(delay: float, parent: int | None) -> bool:
    """Sleep `delay` seconds; False as soon as this process is no longer `parent`'s child."""
    end = time.monotonic() + delay
    while (left := end - time.monotonic()) > 0:
        if parent is not None and os.getppid() != parent:
            return False
        await asyncio.sleep(min(ORPHAN_CHECK_S, left))
    return parent is None or os.getppid() == parent


async def call_hub(url: str, token: str, interval: float, retry: float = 5.0, parent: int | None = None) -> None:
    """POST `url` now and every `interval` seconds; while the hub cannot be reached, every `retry`.
    With `parent` (the hub's pid), it returns once the hub that started it is gone (killed, so it
    could not stop its services), rather than ask a hub that is no more for ever."""
    from tornado.httpclient import AsyncHTTPClient, HTTPClientError

    client = AsyncHTTPClient()
    while True:
        delay = interval
        try:
            resp = await client.fetch(url, method="POST", body=b"", request_timeout=600,
                                      headers={"Authorization": f"token {token}"})
            report = json.loads(resp.body or b"{}")
            for error in report.get("errors", []):
                log.warning("%s", error)
            removed, stopped = len(report.get("removed_bindings", [])), len(report.get("stopped_servers", []))
            log.log(logging.INFO if removed or stopped else logging.DEBUG,
                    "reconciled: %d RoleBindings removed, %d servers stopped", removed, stopped)
        except HTTPClientError as e:
            log.error("the hub answered %s to %s", e.code, url)
        except OSError as e:
            log.warning("the hub cannot be reached (%s); trying again in %ss", type(e).__name__, retry)
            delay = min(retry, interval)
        if not await waited(delay, parent):
            log.warning("the hub that started this service is gone; stopping")
            return


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Ask the hub to reconcile team project members, every interval.")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds between rounds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"[%(levelname)1.1s %(asctime)s {SERVICE_NAME}] %(message)s")
    url = os.environ["JUPYTERHUB_API_URL"].rstrip("/") + "/mlplatform/reconcile"
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the hub stops its services with SIGINT or SIGTERM
    try:
        asyncio.run(call_hub(url, os.environ["JUPYTERHUB_API_TOKEN"], args.interval, parent=os.getppid()))
    except KeyboardInterrupt:
        log.info("stopped")


if __name__ == "__main__":
    main()
