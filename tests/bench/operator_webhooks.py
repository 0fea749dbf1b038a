"""Benchmark (prints figures, asserts nothing): what the operator's admission webhooks add to the
API requests they review, under 50 concurrent creations, in one run.

    .venv/bin/python -m tests.bench.operator_webhooks [--pods 50] [--rounds 3]   (or: make bench)

The real control plane (tests/cluster) with the platform's policies, and `mlplatform operator` as
the kube tier runs it (its own ServiceAccount, the shipped webhook configurations by URL, one
replica). In one project namespace (Pod Security restricted, the platform's admission policies),
N pods are created at once (no kubelet: they stay Pending, so only admission and storage count)
and each create is timed at the client: pods that ask for a credential (the mutating webhook
reads its metadata and answers a patch), pods that ask for nothing (the webhook is still called),
and N credential Secrets (the validating webhook runs the hub's validator). Then the webhook
configurations are deleted and the same creations are timed again: the baseline, in the same
namespace, under the same policies, in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import pathlib
import statistics
import tempfile
import time

from tests.bench.figures import p90
from tests.cluster.cluster import Cluster
from tests.cluster.identities import install_platform
from tests.kube.operator_env import OperatorProcess, _path, make_project, webhook_configs

NS = "bench-project"
KEY = {"type": "service_account", "project_id": "bench-project", "private_key_id": "1",
       "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEbench==\n-----END PRIVATE KEY-----\n",
       "client_email": "trainer@bench-project.iam.gserviceaccount.com"}
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
              "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def pod(name: str, credentials: str | None) -> dict:
    annotations = {"mlplatform.io/credentials": credentials} if credentials else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {"serviceAccountName": "mlplatform-runner", "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "python:3.11-slim", "command": ["true"],
                                     "securityContext": RESTRICTED}]}}


def secret(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "gcp-credential",
            "metadata": {"name": name, "namespace": NS, "labels": {"mlplatform.io/credential": "gcp-credential"}},
            "data": {"key.json": base64.b64encode(json.dumps(KEY).encode()).decode()}}


async def timed_creates(kube, path: str, bodies: list[dict]) -> list[float]:
    async def one(body):
        start = time.perf_counter()
        await kube.request("POST", path, body)
        return time.perf_counter() - start
    return list(await asyncio.gather(*(one(b) for b in bodies)))


async def series(kube, n: int, tag: str) -> dict[str, list[float]]:
    pods = f"/api/v1/namespaces/{NS}/pods"
    out = {"pod asking for a credential": await timed_creates(kube, pods, [pod(f"{tag}-a{i}", "gcs-key") for i in range(n)]),
           "pod asking for nothing": await timed_creates(kube, pods, [pod(f"{tag}-n{i}", None) for i in range(n)]),
           "credential Secret": await timed_creates(kube, f"/api/v1/namespaces/{NS}/secrets",
                                                    [secret(f"{tag}-s{i}") for i in range(n)])}
    return out


async def main(n: int, rounds: int) -> None:
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-operator-"))
    cluster = Cluster(work / "cluster").start()
    try:
        install_platform(cluster)
        op = OperatorProcess(cluster, work, [])
        await op.install()
        kube = op.kube
        await make_project(kube, NS, {"pod-security.kubernetes.io/enforce": "restricted"})
        await kube.request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": "mlplatform-runner"}})
        await op.start()
        await kube.request("POST", f"/api/v1/namespaces/{NS}/secrets", secret("gcs-key"))
        with_hooks: dict[str, list[float]] = {}
        for r in range(rounds):
            for name, values in (await series(kube, n, f"w{r}")).items():
                with_hooks.setdefault(name, []).extend(values)
        reviews = [line for line in (await _metrics(op)).splitlines() if "reviews" in line]
        for doc in webhook_configs(op.webhook_port):
            await kube.delete(_path(doc, named=True))
        await asyncio.sleep(2)  # the API server's webhook configuration cache
        baseline: dict[str, list[float]] = {}
        for r in range(rounds):
            for name, values in (await series(kube, n, f"b{r}")).items():
                baseline.setdefault(name, []).extend(values)
        await op.stop()
        print(f"\n{n} concurrent creations × {rounds} rounds, create latency at the client (s)")
        print(f"{'':<30} {'webhook p50':>12} {'p90':>8} {'p99':>8} {'baseline p50':>13} {'p90':>8} {'p99':>8}")
        for name in with_hooks:
            w, b = with_hooks[name], baseline[name]
            print(f"{name:<30} {statistics.median(w):>12.4f} {p90(w):>8.4f} {p99(w):>8.4f} "
                  f"{statistics.median(b):>13.4f} {p90(b):>8.4f} {p99(b):>8.4f}")
        print("operator reviews:", "; ".join(reviews) or "none counted")
        await op._api.close()
    finally:
        cluster.stop()


async def _metrics(op) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(f"{op.health_url}/metrics") as resp:
        return await resp.text()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.pods, args.rounds))
