"""A pod's filesystem and environment for the process-mode kubelet.

Each volume becomes a directory under `<workdir>/pods/<ns>/<pod>/volumes/<volume>` (Secret and
ConfigMap keys written as files with their `defaultMode`/`items[].mode`; emptyDir empty; a PVC's
directory shared by every pod that mounts the same claim; projected service-account tokens
written as a token file). `materialise()` maps, per container, each mountPath (with subPath) to
that directory; `env_for()` resolves env/envFrom like the kubelet (value, secretKeyRef,
configMapKeyRef, fieldRef). A missing Secret/ConfigMap raises LookupError
(CreateContainerConfigError), unless the reference is optional.
"""

from __future__ import annotations

import base64
import os
import pathlib

from .store import Store


class PodFiles:
    def __init__(self, store: Store, workdir: pathlib.Path, pod: dict):
        self.store = store
        self.pod = pod
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.root = workdir / "pods" / ns / name
        self.home = self.root / "home"
        self.pvc_root = workdir / "pvcs" / ns
        self.home.mkdir(parents=True, exist_ok=True)

    def _get(self, plural: str, name: str, optional: bool) -> dict | None:
        obj = self.store.find(self.store.rt("", "v1", plural), self.pod["metadata"]["namespace"], name)
        if obj is None and not optional:
            kind = "secret" if plural == "secrets" else "configmap"
            raise LookupError(f'{kind} "{name}" not found')
        return obj

    def _write_keys(self, target: pathlib.Path, data: dict[str, bytes], items, mode: int) -> None:
        target.mkdir(parents=True, exist_ok=True)
        chosen = [(i["key"], i.get("path", i["key"]), i.get("mode", mode)) for i in items] if items else \
            [(k, k, mode) for k in data]
        for key, rel, m in chosen:
            if key not in data:
                continue
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                os.chmod(path, 0o600)
            path.write_bytes(data[key])
            os.chmod(path, m)

    def _volume_dir(self, vol: dict) -> pathlib.Path:
        if "persistentVolumeClaim" in vol:
            d = self.pvc_root / vol["persistentVolumeClaim"]["claimName"]
            d.mkdir(parents=True, exist_ok=True)
            return d
        d = self.root / "volumes" / vol["name"]
        if "secret" in vol:
            src = vol["secret"]
            secret = self._get("secrets", src["secretName"], src.get("optional", False))
            data = {k: base64.b64decode(v or "") for k, v in ((secret or {}).get("data") or {}).items()}
            self._write_keys(d, data, src.get("items"), src.get("defaultMode", 0o644))
        elif "configMap" in vol:
            src = vol["configMap"]
            cm = self._get("configmaps", src["name"], src.get("optional", False))
            data = {k: v.encode() for k, v in ((cm or {}).get("data") or {}).items()}
            data.update({k: base64.b64decode(v) for k, v in ((cm or {}).get("binaryData") or {}).items()})
            self._write_keys(d, data, src.get("items"), src.get("defaultMode", 0o644))
        elif "projected" in vol:
            mode = vol["projected"].get("defaultMode", 0o644)
            for source in vol["projected"].get("sources") or []:
                if "serviceAccountToken" in source:
                    self._write_keys(d, {"token": b"standin-service-account-token"},
                                     [{"key": "token", "path": source["serviceAccountToken"].get("path", "token")}],
                                     mode)
                elif "secret" in source:
                    s = source["secret"]
                    obj = self._get("secrets", s["name"], s.get("optional", False))
                    data = {k: base64.b64decode(v or "") for k, v in ((obj or {}).get("data") or {}).items()}
                    self._write_keys(d, data, s.get("items"), mode)
                elif "configMap" in source:
                    s = source["configMap"]
                    obj = self._get("configmaps", s["name"], s.get("optional", False))
                    self._write_keys(d, {k: v.encode() for k, v in ((obj or {}).get("data") or {}).items()},
                                     s.get("items"), mode)
        else:
            d.mkdir(parents=True, exist_ok=True)
        return d

    def materialise(self) -> dict[str, dict[str, str]]:
        dirs = {v["name"]: self._volume_dir(v) for v in self.pod["spec"].get("volumes") or []}
        out = {}
        for c in (self.pod["spec"].get("initContainers") or []) + self.pod["spec"]["containers"]:
            mounts = {}
            for m in c.get("volumeMounts") or []:
                target = dirs[m["name"]]
                if m.get("subPath"):
                    target = target / m["subPath"]
                mounts[m["mountPath"].rstrip("/") or "/"] = str(target)
            out[c["name"]] = mounts
        return out

    def env_for(self, container: dict, ip: str) -> dict[str, str]:
        meta = self.pod["metadata"]
        env: dict[str, str] = {}
        for src in container.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                cm = self._get("configmaps", src["configMapRef"]["name"], src["configMapRef"].get("optional", False))
                env.update({prefix + k: v for k, v in ((cm or {}).get("data") or {}).items()})
            if "secretRef" in src:
                s = self._get("secrets", src["secretRef"]["name"], src["secretRef"].get("optional", False))
                env.update({prefix + k: base64.b64decode(v).decode() for k, v in ((s or {}).get("data") or {}).items()})
        fields = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"], "metadata.uid": meta["uid"],
                  "status.podIP": ip, "spec.nodeName": self.pod["spec"].get("nodeName", ""), "status.hostIP": "127.0.0.1",
                  "spec.serviceAccountName": self.pod["spec"].get("serviceAccountName", "")}
        for e in container.get("env") or []:
            if "value" in e or "valueFrom" not in e:
                env[e["name"]] = str(e.get("value", ""))
                continue
            ref = e["valueFrom"]
            if "secretKeyRef" in ref:
                r = ref["secretKeyRef"]
                s = self._get("secrets", r["name"], r.get("optional", False))
                if s and r["key"] in (s.get("data") or {}):
                    env[e["name"]] = base64.b64decode(s["data"][r["key"]]).decode()
            elif "configMapKeyRef" in ref:
                r = ref["configMapKeyRef"]
                cm = self._get("configmaps", r["name"], r.get("optional", False))
                if cm and r["key"] in (cm.get("data") or {}):
                    env[e["name"]] = cm["data"][r["key"]]
            elif "fieldRef" in ref:
                env[e["name"]] = fields.get(ref["fieldRef"]["fieldPath"], "")
        return env
