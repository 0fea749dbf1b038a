"""The hub's live view of the cluster, shared by every PlatformSpawner of the hub process.

- Capacity and usage come from two watch caches, nodes and the non-terminated pods of every
  namespace, started once; page views, API calls and spawns read them and make no API request.
  If the hub may not list nodes (or pods), capacity is unknown (an empty answer), never a guess.
- `ProjectResources` knows every project's credentials (Secrets of the credential types, watched
  with a ``type=`` field selector each; a Secret's data is dropped as it arrives, only its keys
  are kept) and datasets (PVCs with the dataset label), also from watch caches, so the form and a
  spawn read them without a request; where the hub may not watch them cluster-wide it lists
  the project's instead (`list_available`: the same LISTs, for a client that asks once, such as
  `kubectl ai-platform`). It adds and deletes credentials (validated with `hub_ext.core.credentials`;
  a Secret that is not a credential cannot be deleted through it) and datasets (PVCs made with
  `hub_ext.manifests.datasets`; a PVC without the dataset label cannot be deleted through it). A dataset PVC
  being deleted (pods still use it) is not offered for mounting.
"""

from __future__ import annotations

import asyncio

from hub_ext.core.credentials import CREATED_BY, CredentialFiles, check_may_delete, check_name, secret_manifest
from hub_ext.manifests.datasets import check_may_delete as check_may_delete_dataset
from hub_ext.manifests.datasets import is_dataset, row
from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.core.mounts import Available
from hub_ext.kube.client import Conflict, Forbidden, Invalid, Kube, KubeError, NotFound, path_of, reason
from hub_ext.kube.watchcache import WatchCache
from hub_ext.manifests import capacity as cap
from hub_ext.manifests.mounts import MountSettings, credential_from_secret, dataset_from_pvc

ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class ClusterView:
    def __init__(self, kube: Kube):
        self.changed = asyncio.Event()
        self.nodes = WatchCache(kube, path_of("Node"), on_change=self._pulse)
        self.pods = WatchCache(kube, "/api/v1/pods", field_selector=ACTIVE_PODS, on_change=self._pulse)

    def _pulse(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def start(self, timeout: float = 10) -> None:
        await asyncio.gather(self.nodes.wait_loaded(timeout), self.pods.wait_loaded(timeout))

    async def stop(self) -> None:
        await asyncio.gather(self.nodes.stop(), self.pods.stop())

    @property
    def known(self) -> bool:
        return self.nodes.known and self.pods.known

    def capacity(self, accelerators) -> dict[str, tuple[int, int]]:
        if not self.known:
            return {}
        return cap.free_capacity(accelerators, self.nodes.items(), self.pods.items())

    def usage(self, accelerators, namespace: str) -> dict[str, int] | None:
        if not self.pods.known:
            return None
        return cap.usage(accelerators, self.pods.items(), namespace)


def _without_data(secret: dict) -> dict:
    keys = sorted((secret.get("data") or {}).keys() | (secret.get("stringData") or {}).keys())
    return {"type": secret.get("type", ""), "metadata": secret.get("metadata") or {}, "data": dict.fromkeys(keys, "")}


async def list_in(kube: Kube, kind: str, namespace: str, forbidden: Exception | None = None, **query) -> list[dict]:
    """One LIST of `kind` in `namespace`: [] when the namespace does not exist; `forbidden` raised
    when the API refuses (403) and one is given; otherwise `UpstreamError` when it refuses or fails."""
    try:
        return (await kube.list(path_of(kind, namespace), **query)).get("items") or []
    except NotFound:
        return []
    except KubeError as e:
        if isinstance(e, Forbidden) and forbidden is not None:
            raise forbidden from None
        raise UpstreamError(f"read the {kind}s of the project {namespace!r}", reason(e)) from None


async def list_available(kube: Kube, namespace: str, settings: MountSettings, credentials: bool = True) -> Available:
    """A project's credentials and datasets with plain LISTs (no watch): for a client that asks
    once, such as `kubectl ai-platform` with the user's own kubeconfig and RBAC. Secrets are listed
    only when `credentials` are wanted: the platform's project Role lets members read PVCs but not
    Secrets, so a refusal there is a `UserInputError` on ``credentials`` (403) that says where
    credentials can be chosen instead, not an outage."""
    refused = UserInputError("credentials", f"your Kubernetes identity may not read the Secrets of the project "
                                            f"{namespace!r}, so credentials cannot be chosen here; submit from a "
                                            "notebook server, where the hub lists them for you", 403)
    secrets = []
    for secret_type in settings.credential_types.values() if credentials else ():
        secrets += [_without_data(s) for s in await list_in(kube, "Secret", namespace, refused,
                                                             fieldSelector=f"type={secret_type}")]
    pvcs = await list_in(kube, "PersistentVolumeClaim", namespace, labelSelector=settings.dataset_label)
    return _available(secrets, pvcs, settings)


def _available(secrets: list[dict], pvcs: list[dict], settings: MountSettings) -> Available:
    found = (credential_from_secret(s, settings) for s in secrets)
    credentials = tuple(sorted((c for c in found if c is not None), key=lambda c: c.name))
    datasets = tuple(sorted((dataset_from_pvc(p, settings) for p in pvcs
                             if not (p.get("metadata") or {}).get("deletionTimestamp")), key=lambda d: d.name))
    return Available(credentials, datasets)


class ProjectResources:
    """A project's credentials and datasets from watch caches: dataset PVCs watched cluster-wide
    (the hub may read PVCs everywhere), Secrets per project namespace, where the hub holds its
    rights (`hub-rbac.yaml`: no cluster-wide Secret read). A project's Secret watch starts at its
    first use; one the hub could not read yet (a project not provisioned) is tried again at the
    next use."""

    def __init__(self, kube: Kube, settings: MountSettings):
        self.kube, self.settings = kube, settings
        self._secrets: dict[str, WatchCache] = {}  # namespace → its Secrets (keys only, no data)
        self.pvcs = WatchCache(kube, "/api/v1/persistentvolumeclaims", label_selector=settings.dataset_label)

    def _secret_cache(self, namespace: str) -> WatchCache:
        cache = self._secrets.get(namespace)
        if cache is None or cache.state == "forbidden":
            cache = WatchCache(self.kube, path_of("Secret", namespace), transform=_without_data)
            self._secrets[namespace] = cache.start()
        return cache

    async def start(self, timeout: float = 10) -> None:
        await self.pvcs.wait_loaded(timeout)

    async def stop(self) -> None:
        await asyncio.gather(self.pvcs.stop(), *(c.stop() for c in self._secrets.values()))

    async def available(self, namespace: str) -> Available:
        cache = self._secret_cache(namespace)
        await asyncio.gather(self.start(), cache.wait_loaded())
        types = set(self.settings.credential_types.values())
        if cache.known:
            secrets = [s for s in cache.items(namespace) if s.get("type") in types]
        else:
            secrets = []
            for secret_type in sorted(types):
                secrets += [_without_data(s) for s in await list_in(self.kube, "Secret", namespace,
                                                                     fieldSelector=f"type={secret_type}")]
        return _available(secrets, await self.dataset_pvcs(namespace), self.settings)

    async def dataset_pvcs(self, namespace: str) -> list[dict]:
        """The project's dataset PVCs, from the cache (a LIST where the hub may not watch them)."""
        await self.start()
        if self.pvcs.known:
            return self.pvcs.items(namespace)
        return await list_in(self.kube, "PersistentVolumeClaim", namespace, labelSelector=self.settings.dataset_label)

    async def dataset_rows(self, namespace: str) -> list[dict]:
        """The project's datasets as the hub's page shows them, with the loader's progress (`datasets.row`), by name."""
        return sorted((row(p, self.settings) for p in await self.dataset_pvcs(namespace)), key=lambda r: r["name"])

    async def add_credential(self, namespace: str, name: str, creds: CredentialFiles, description: str,
                             created_by: str) -> None:
        check_name(name)  # never a name the platform uses (the faces check it first, with the other fields)
        body = secret_manifest(namespace, name, self.settings.credential_types[creds.kind], creds, description,
                               created_by)
        try:
            created = await self.kube.create(body)
        except Conflict:
            raise UserInputError("name", f"the project {namespace!r} already has a secret named {name!r}; "
                                         "delete it first or choose another name", 409) from None
        except KubeError as e:
            raise UpstreamError(f"store the credential {name!r}", reason(e)) from None
        self._secret_cache(namespace).put(created or body)

    async def delete_credential(self, namespace: str, name: str, deleted_by: str | None = None,
                                admin: bool = False) -> None:
        """Delete a credential on behalf of the hub user `deleted_by` (`admin`: a hub admin): only
        its creator or an admin may (`hub_ext.core.credentials.check_may_delete`; 403 on ``name``).
        The delete is conditional on the Secret that was checked (its uid and resourceVersion), so
        one replaced meanwhile is not deleted unchecked. `deleted_by` None: the hub itself, on
        no user's behalf (every face passes the user)."""
        path = path_of("Secret", namespace, name)
        try:
            secret = await self.kube.get(path)
            if secret is None or credential_from_secret(secret, self.settings) is None:
                raise UserInputError("name", f"the project {namespace!r} has no credential {name!r}", 404)
            meta = secret["metadata"]
            if deleted_by is not None:
                check_may_delete(name, (meta.get("annotations") or {}).get(CREATED_BY), deleted_by, admin)
            await self.kube.request("DELETE", path, {
                "propagationPolicy": "Background",
                "preconditions": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}})
        except NotFound:
            pass  # deleted meanwhile: what was asked for holds
        except Conflict:
            raise UserInputError("name", f"the credential {name!r} changed while it was being deleted; "
                                         "try again", 409) from None
        except KubeError as e:
            raise UpstreamError(f"delete the credential {name!r}", reason(e)) from None
        self._secret_cache(namespace).remove(namespace, name)

    async def add_dataset(self, body: dict) -> dict:
        """Create the dataset PVC `body` (`hub_ext.manifests.datasets.pvc_manifest`, from a checked request);
        returns the PVC as stored (loading until the loader reports: `kube_mounts.dataset_state`)."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = await self.kube.create(body)
        except Conflict:
            raise UserInputError("name", f"the project {namespace!r} already has a volume claim named {name!r}; "
                                         "delete it first or choose another name", 409) from None
        except Forbidden as e:
            if "exceeded quota" not in e.reason:
                raise UpstreamError(f"create the dataset {name!r}", reason(e)) from None
            raise UserInputError("size", f"the project {namespace!r} has no room for it under its quota: "
                                         f"{e.reason}", 403) from None
        except Invalid as e:
            fields = [f for f, _ in e.causes]
            field = "size" if any("storage" in f or "resources" in f for f in fields) else \
                "name" if any(f.startswith("metadata.name") for f in fields) else None
            if field is None:
                raise UpstreamError(f"create the dataset {name!r}", reason(e)) from None
            raise UserInputError(field, f"Kubernetes refused it: {e.reason}") from None
        except KubeError as e:
            raise UpstreamError(f"create the dataset {name!r}", reason(e)) from None
        self.pvcs.put(created)  # listed at once (unless the watch has brought it, or newer, already)
        return created

    async def delete_dataset(self, namespace: str, name: str, deleted_by: str | None = None,
                             admin: bool = False) -> None:
        """Delete a dataset PVC on behalf of the hub user `deleted_by` (`admin`: a hub admin): only
        its creator or an admin may (`hub_ext.manifests.datasets.check_may_delete`; 403 on ``name``). The
        delete is conditional on the PVC's uid (one made again meanwhile is not deleted unchecked);
        not on its resourceVersion, which the loader moves with every progress report. A PVC that
        pods still mount stays, marked deleting, until they stop (its protection finalizer)."""
        path = path_of("PersistentVolumeClaim", namespace, name)
        try:
            pvc = await self.kube.get(path)
            if pvc is None or not is_dataset(pvc, self.settings.dataset_label):
                raise UserInputError("name", f"the project {namespace!r} has no dataset {name!r}", 404)
            meta = pvc["metadata"]
            if deleted_by is not None:
                check_may_delete_dataset(name, (meta.get("annotations") or {}).get(CREATED_BY), deleted_by, admin)
            answer = await self.kube.request("DELETE", path, {"propagationPolicy": "Background",
                                                              "preconditions": {"uid": meta["uid"]}})
        except NotFound:
            answer = None  # deleted meanwhile: what was asked for holds
        except Conflict:
            raise UserInputError("name", f"the dataset {name!r} was replaced while it was being deleted; "
                                         "try again", 409) from None
        except KubeError as e:
            raise UpstreamError(f"delete the dataset {name!r}", reason(e)) from None
        if isinstance(answer, dict) and answer.get("kind") == "PersistentVolumeClaim":
            # still there, being deleted: shown so at once (the cache drops the answer when its watch
            # has told it more already: the deletion, or the same change)
            self.pvcs.put(answer)
        else:
            self.pvcs.remove(namespace, name)  # gone at once
