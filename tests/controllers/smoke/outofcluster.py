"""Render a component's released kustomize overlay (from the Go module cache) for controllers that run
out of cluster, and print it as YAML for `kubectl apply -f -`.

    python outofcluster.py OVERLAY_DIR --webhook-port SVC=PORT [--drop-kind Deployment] [--keep-crds]
        [--config-file NAME=PATH]

What changes against the released manifests (nothing else does):
- Deployments (the controller itself runs as a local process) are dropped, and by default so are
  CRDs (the test cluster installs its own copies; --keep-crds keeps them).
- Each Service named in --webhook-port becomes `type: ExternalName, externalName: localhost`:
  kube-apiserver resolves a webhook's service reference through the Service and, for an ExternalName,
  dials externalName:port while still verifying the serving certificate for `<svc>.<ns>.svc`.
  Every webhook clientConfig pointing at that Service gets `port: PORT` (the local webhook port),
  because an ExternalName has no targetPort mapping.
- --config-file NAME=PATH: the ConfigMap NAME's only key is also written to PATH (for the
  controller's --katib-config flag).
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import yaml


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("overlay")
    p.add_argument("--webhook-port", action="append", default=[], help="SERVICE=PORT")
    p.add_argument("--drop-kind", action="append", default=["Deployment"])
    p.add_argument("--keep-crds", action="store_true")
    p.add_argument("--config-file", action="append", default=[], help="CONFIGMAP=PATH")
    args = p.parse_args(argv)
    ports = {k: int(v) for k, v in (a.split("=", 1) for a in args.webhook_port)}
    files = dict(a.split("=", 1) for a in args.config_file)
    rendered = subprocess.run(["kubectl", "kustomize", args.overlay], check=True, capture_output=True,
                              text=True).stdout
    out = []
    for doc in yaml.safe_load_all(rendered):
        if not doc:
            continue
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind in args.drop_kind or (kind == "CustomResourceDefinition" and not args.keep_crds):
            continue
        if kind == "Service" and name in ports:
            doc["spec"] = {"type": "ExternalName", "externalName": "localhost"}
        if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            for hook in doc.get("webhooks", []):
                svc = hook.get("clientConfig", {}).get("service")
                if svc and svc["name"] in ports:
                    svc["port"] = ports[svc["name"]]
        if kind == "ConfigMap" and name in files:
            (value,) = doc["data"].values()
            pathlib.Path(files[name]).write_text(value)
        out.append(doc)
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
