"""A pod's filesystem and environment for the process-mode kubelet, read through the API server.

Each volume becomes a directory under `<workdir>/pods/<ns>/<pod>/volumes/<volume>`: Secret and
ConfigMap keys as files with their `defaultMode`/`items[].mode`, emptyDir empty, downwardAPI
items, projected sources (ServiceAccount tokens obtained by TokenRequest, bound to the pod, with
the audience and expiry the pod asks for, rewritten by `refresh_tokens()`; the `kube-root-ca.crt`
ConfigMap; downward API), and a PVC's directory: the bound PersistentVolume's `hostPath` (every
pod that mounts the claim shares it). `materialise()` maps, per container, each mountPath (with
subPath) to its directory; `env_for()` resolves env/envFrom like the kubelet (value, secretKeyRef,
configMapKeyRef, fieldRef, resourceFieldRef). A missing Secret/ConfigMap raises LookupError
(CreateContainerConfigError) unless the reference is optional; an unbound claim raises LookupError.

A process cannot see /var/run/secrets/kubernetes.io/serviceaccount, so the pod's in-cluster
identity is offered the way a process can find it: `$HOME/.kube/config` naming the API server, the
cluster CA and the projected token file (`tokenFile`, re-read by the clients as it is refreshed).
"""

from __future__ import annotations

import base64
import os
import pathlib
import time

import yaml

from tests.cluster.provisioner import CSI_DRIVER
from tests.cluster.rest import ApiError, Rest

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class PodFiles:
    def __init__(self, rest: Rest, workdir: pathlib.Path, pod: dict, *, api_url: str, ca: pathlib.Path):
        self.rest, self.pod = rest, pod
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.ns = ns
        self.root = workdir / "pods" / ns / name
        self.home = self.root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.api_url, self.ca = api_url, ca
        self._tokens: list[tuple[pathlib.Path, dict, int]] = []  # (file, TokenRequest spec, mode)
        self.next_refresh = float("inf")
        self.claim_dirs: list[pathlib.Path] = []  # the directories of the pod's claims (kubelet_identity)

    async def _get(self, plural: str, name: str, optional: bool) -> dict | None:
        try:
            return await self.rest.get(f"/api/v1/namespaces/{self.ns}/{plural}/{name}")
        except ApiError as e:
            if e.status != 404:
                raise
        if optional:
            return None
        raise LookupError(f'{"secret" if plural == "secrets" else "configmap"} "{name}" not found')

    @staticmethod
    def _write_keys(target: pathlib.Path, data: dict[str, bytes], items, mode: int) -> None:
        target.mkdir(parents=True, exist_ok=True)
        chosen = [(i["key"], i.get("path", i["key"]), i.get("mode", mode)) for i in items] if items else \
            [(k, k, mode) for k in data]
        for key, rel, m in chosen:
            if key not in data:
                continue
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(data[key])
            os.chmod(tmp, m)
            tmp.replace(path)  # atomic: a reader never sees half a token

    @staticmethod
    def _decoded(obj: dict | None) -> dict[str, bytes]:
        return {k: base64.b64decode(v or "") for k, v in ((obj or {}).get("data") or {}).items()}

    @staticmethod
    def _cm_data(obj: dict | None) -> dict[str, bytes]:
        data = {k: v.encode() for k, v in ((obj or {}).get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in ((obj or {}).get("binaryData") or {}).items()})
        return data

    def _fields(self, ip: str) -> dict[str, str]:
        meta, spec = self.pod["metadata"], self.pod["spec"]
        fields = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"], "metadata.uid": meta["uid"],
                  "status.podIP": ip, "status.podIPs": ip, "spec.nodeName": spec.get("nodeName", ""),
                  "status.hostIP": "127.0.0.1", "spec.serviceAccountName": spec.get("serviceAccountName", "")}
        for k, v in (meta.get("labels") or {}).items():
            fields[f"metadata.labels['{k}']"] = v
        for k, v in (meta.get("annotations") or {}).items():
            fields[f"metadata.annotations['{k}']"] = v
        fields["metadata.labels"] = "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get("labels") or {}).items()))
        fields["metadata.annotations"] = "\n".join(f'{k}="{v}"'
                                                   for k, v in sorted((meta.get("annotations") or {}).items()))
        return fields

    async def _token(self, source: dict, target: pathlib.Path, mode: int) -> None:
        path = target / source.get("path", "token")
        spec = {"audiences": [source["audience"]] if source.get("audience") else [],
                "expirationSeconds": source.get("expirationSeconds", 3607)}
        self._tokens.append((path, spec, mode))
        await self._request_token(path, spec, mode)

    async def _request_token(self, path: pathlib.Path, spec: dict, mode: int) -> None:
        meta = self.pod["metadata"]
        sa = self.pod["spec"].get("serviceAccountName") or "default"
        answer = await self.rest.post(f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {**spec, "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                                                "uid": meta["uid"]}}})
        self._write_keys(path.parent, {path.name: answer["status"]["token"].encode()}, None, mode)
        # refresh at 80% of the lifetime, as the kubelet does
        lifetime = answer["spec"].get("expirationSeconds") or spec["expirationSeconds"]
        self.next_refresh = min(self.next_refresh, time.monotonic() + 0.8 * lifetime)

    async def refresh_tokens(self) -> None:
        self.next_refresh = float("inf")
        for path, spec, mode in self._tokens:
            await self._request_token(path, spec, mode)

    async def _volume_dir(self, vol: dict, ip: str) -> pathlib.Path:
        d = self.root / "volumes" / vol["name"]
        if "persistentVolumeClaim" in vol:
            return await self._claim_dir(vol["persistentVolumeClaim"]["claimName"])
        if "hostPath" in vol:
            return pathlib.Path(vol["hostPath"]["path"])
        if "secret" in vol:
            src = vol["secret"]
            secret = await self._get("secrets", src["secretName"], src.get("optional", False))
            self._write_keys(d, self._decoded(secret), src.get("items"), src.get("defaultMode", 0o644))
        elif "configMap" in vol:
            src = vol["configMap"]
            cm = await self._get("configmaps", src["name"], src.get("optional", False))
            self._write_keys(d, self._cm_data(cm), src.get("items"), src.get("defaultMode", 0o644))
        elif "downwardAPI" in vol:
            self._downward(d, vol["downwardAPI"].get("items") or [], vol["downwardAPI"].get("defaultMode", 0o644), ip)
        elif "projected" in vol:
            mode = vol["projected"].get("defaultMode", 0o644)
            for source in vol["projected"].get("sources") or []:
                if "serviceAccountToken" in source:
                    await self._token(source["serviceAccountToken"], d, mode)
                elif "secret" in source:
                    s = source["secret"]
                    obj = await self._get("secrets", s["name"], s.get("optional", False))
                    self._write_keys(d, self._decoded(obj), s.get("items"), mode)
                elif "configMap" in source:
                    s = source["configMap"]
                    obj = await self._get("configmaps", s["name"], s.get("optional", False))
                    self._write_keys(d, self._cm_data(obj), s.get("items"), mode)
                elif "downwardAPI" in source:
                    self._downward(d, source["downwardAPI"].get("items") or [], mode, ip)
        else:
            d.mkdir(parents=True, exist_ok=True)
        return d

    def _downward(self, d: pathlib.Path, items: list, mode: int, ip: str) -> None:
        fields = self._fields(ip)
        data = {i["path"]: fields.get((i.get("fieldRef") or {}).get("fieldPath", ""), "").encode() for i in items}
        self._write_keys(d, data, [{"key": p, "path": p, "mode": i.get("mode", mode)}
                                   for p, i in zip(data, items)], mode)

    async def _claim_dir(self, claim: str) -> pathlib.Path:
        pvc = await self._get("persistentvolumeclaims", claim, True)
        volume = ((pvc or {}).get("spec") or {}).get("volumeName")
        if not pvc or not volume or (pvc.get("status") or {}).get("phase") != "Bound":
            raise LookupError(f'persistentvolumeclaim "{claim}" is not bound')
        pv = await self.rest.get(f"/api/v1/persistentvolumes/{volume}")
        csi = pv["spec"].get("csi") or {}  # the test cluster's CSI class (tests.cluster.provisioner.CSI_DRIVER)
        path = pathlib.Path(((pv["spec"].get("hostPath") or pv["spec"].get("local") or
                              (csi.get("volumeAttributes") if csi.get("driver") == CSI_DRIVER else None)
                              or {}).get("path")) or "")
        if not path.is_absolute():
            raise LookupError(f'persistentvolume "{volume}" has no hostPath or local path')
        path.mkdir(parents=True, exist_ok=True)
        self.claim_dirs.append(path)
        return path

    async def materialise(self, ip: str) -> dict[str, dict[str, str]]:
        dirs = {v["name"]: await self._volume_dir(v, ip) for v in self.pod["spec"].get("volumes") or []}
        out = {}
        for c in (self.pod["spec"].get("initContainers") or []) + self.pod["spec"]["containers"]:
            mounts = {}
            for m in c.get("volumeMounts") or []:
                target = dirs[m["name"]]
                if m.get("subPath"):
                    target = target / m["subPath"]
                    target.mkdir(parents=True, exist_ok=True)
                mounts[m["mountPath"].rstrip("/") or "/"] = str(target)
            out[c["name"]] = mounts
            if SA_DIR in mounts:
                self._incluster_kubeconfig(pathlib.Path(mounts[SA_DIR]))
        return out

    def _incluster_kubeconfig(self, sa_dir: pathlib.Path) -> None:
        path = self.home / ".kube" / "config"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "in-cluster",
            "clusters": [{"name": "in-cluster", "cluster": {"server": self.api_url,
                                                            "certificate-authority": str(sa_dir / "ca.crt")}}],
            "users": [{"name": "in-cluster", "user": {"tokenFile": str(sa_dir / "token")}}],
            "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "in-cluster",
                                                            "namespace": self.ns}}]}))

    async def env_for(self, container: dict, ip: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for src in container.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                r = src["configMapRef"]
                cm = await self._get("configmaps", r["name"], r.get("optional", False))
                env.update({prefix + k: v for k, v in ((cm or {}).get("data") or {}).items()})
            if "secretRef" in src:
                r = src["secretRef"]
                s = await self._get("secrets", r["name"], r.get("optional", False))
                env.update({prefix + k: v.decode() for k, v in self._decoded(s).items()})
        fields = self._fields(ip)
        for e in container.get("env") or []:
            if "value" in e or "valueFrom" not in e:
                env[e["name"]] = str(e.get("value", ""))
                continue
            ref = e["valueFrom"]
            if "secretKeyRef" in ref:
                r = ref["secretKeyRef"]
                s = self._decoded(await self._get("secrets", r["name"], r.get("optional", False)))
                if r["key"] in s:
                    env[e["name"]] = s[r["key"]].decode()
                elif not r.get("optional"):
                    raise LookupError(f'couldn\'t find key {r["key"]} in Secret {self.ns}/{r["name"]}')
            elif "configMapKeyRef" in ref:
                r = ref["configMapKeyRef"]
                cm = await self._get("configmaps", r["name"], r.get("optional", False))
                if cm and r["key"] in (cm.get("data") or {}):
                    env[e["name"]] = cm["data"][r["key"]]
            elif "fieldRef" in ref:
                env[e["name"]] = fields.get(ref["fieldRef"]["fieldPath"], "")
            elif "resourceFieldRef" in ref:
                r = ref["resourceFieldRef"]
                kind, _, res = r["resource"].partition(".")
                env[e["name"]] = str(((container.get("resources") or {}).get(kind) or {}).get(res, "0"))
        return env
