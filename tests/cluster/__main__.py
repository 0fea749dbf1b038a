"""Run the test cluster as its own process (for a person, a demo or a test of the command):

    .venv/bin/python -m tests.cluster --kubeconfig /tmp/cluster.kubeconfig [--kubelet status|process]
        [--nodes nodes.json]   (a JSON list of {"name", "allocatable", "labels", "taints"} for the kubelet)
        [--workdir DIR] [--namespace NS]

It starts the control plane built from tests/cluster (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler), the PV provisioner and the fault proxy, and a test kubelet when asked; writes an
admin kubeconfig (a system:masters client certificate, through the proxy) to --kubeconfig; prints
one line `test cluster serving on https://127.0.0.1:PORT; kubeconfig: PATH`; and serves until
SIGINT or SIGTERM, then stops the kubelet (its pods and nodes go), the proxy and every control-plane
process, and exits 0. The cluster's files live under --workdir (kept), or a temporary directory
(removed on exit). The fault proxy's controls are Python-only (`tests.cluster.Cluster`).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import signal
import sys
import tempfile
import threading

from tests.cluster.cluster import Cluster
from tests.cluster.controlplane import binaries_missing


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tests.cluster",
                                description="A real Kubernetes control plane for tests, with a fault proxy and a "
                                            "test kubelet")
    p.add_argument("--kubeconfig", required=True, help="write an admin kubeconfig (through the proxy) here")
    p.add_argument("--namespace", default="default", help="the kubeconfig context's namespace")
    p.add_argument("--kubelet", choices=["status", "process"], help="run a test kubelet in this mode")
    p.add_argument("--nodes", help="a JSON file listing the kubelet's nodes (default: one CPU node)")
    p.add_argument("--workdir", help="the cluster's files (kept); default: a temporary directory, removed on exit")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    missing = binaries_missing()
    if missing:
        print(f"the control plane is not built ({', '.join(missing)} missing): run `make cluster`", file=sys.stderr)
        return 2
    nodes = json.loads(pathlib.Path(args.nodes).read_text()) if args.nodes else None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    workdir = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix="test-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(workdir)
    try:
        cluster.start()
        if args.kubelet and not stop.is_set():
            cluster.kubelet(args.kubelet, nodes=nodes, workdir=workdir / "pods")
        kubeconfig = cluster.write_kubeconfig(pathlib.Path(args.kubeconfig).resolve(), args.namespace)
        print(f"test cluster serving on {cluster.url}; kubeconfig: {kubeconfig}", flush=True)
        while not stop.wait(1):
            pass
    finally:
        cluster.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
