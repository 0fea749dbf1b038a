"""Datasets on the test cluster, shared by the kube tests and the benchmarks: `SlowS3` (a bucket far
away), `put_many` (objects into a store), `aws_secret` (a credential Secret as the hub makes it) and
`dataset` (a dataset PVC as the hub makes it)."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import aiohttp
from aiohttp import web
from yarl import URL

from hub_ext.core.credentials import secret_manifest, validate_files
from hub_ext.operator.rules import datasets as ds

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "te", "trailer"}


class SlowS3:
    """An HTTP proxy in front of the S3 server that holds each object read `delay` seconds (a
    bucket far away), on a loop of its own. Everything else passes as sent, the Host header too:
    the server checks the request's signature, which covers it."""

    def __init__(self, upstream: str):
        self.upstream, self.delay = upstream, 0.0
        self.loop = asyncio.new_event_loop()
        self.url = ""

    def start(self) -> "SlowS3":
        ready = threading.Event()

        async def serve():
            self.session = aiohttp.ClientSession(auto_decompress=False)
            app = web.Application(client_max_size=1 << 30)
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self.runner = web.AppRunner(app, access_log=None)
            await self.runner.setup()
            site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
            ready.set()

        threading.Thread(target=self.loop.run_forever, daemon=True, name="slow-s3").start()
        asyncio.run_coroutine_threadsafe(serve(), self.loop)
        ready.wait(10)
        return self

    async def _handle(self, request: web.Request) -> web.Response:
        if request.method == "GET" and "list-type" not in request.query:
            await asyncio.sleep(self.delay)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self.session.request(request.method, URL(self.upstream + request.raw_path, encoded=True),
                                        headers=headers, data=await request.read() or None,
                                        skip_auto_headers=("Content-Type", "User-Agent", "Accept",
                                                           "Accept-Encoding")) as resp:
            body = await resp.read()
            return web.Response(status=resp.status, body=body,
                                headers={k: v for k, v in resp.headers.items() if k.lower() not in _HOP})

    def stop(self) -> None:
        async def stop():
            await self.runner.cleanup()
            await self.session.close()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def put_many(store, prefix: str, n: int, size=lambda i: 500 + 7 * i) -> dict[str, bytes]:
    """`n` objects of `size(i)` random bytes under `prefix` in five folders, put 8 at a time."""
    objects = {f"part-{i % 5}/{i:04}.bin": os.urandom(size(i)) for i in range(n)}
    client = store.client()

    def put(item):
        rel, data = item
        if hasattr(store, "key_id"):
            client.put_object(Bucket=store.bucket, Key=f"{prefix}/{rel}", Body=data)
        else:
            client.bucket(store.bucket).blob(f"{prefix}/{rel}").upload_from_string(data)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, objects.items()))
    return objects


def aws_secret(ns: str, name: str, key_id: str, secret: str) -> dict:
    files = {"credentials": f"[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {secret}\n",
             "config": "[default]\nregion = us-east-1\n"}
    return secret_manifest(ns, name, "aws-credential", validate_files("aws-credential", files), "", "alice")


def dataset(ns: str, name: str, source: str, credential: str | None = None) -> dict:
    annotations = {"mlplatform.io/source": source, **({ds.CREDENTIAL_ANNOTATION: credential} if credential else {})}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": ns, "labels": {"mlplatform.io/dataset": "true"},
                         "annotations": annotations},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


async def runner_rest(admin, cluster, ns: str, directory) -> "Rest":
    """The project's runner ServiceAccount's client (what a notebook or a job holds), with the
    project Role the hub binds (`hub_ext.manifests.tenancy.project_objects`) made in `ns`."""
    from hub_ext.manifests.tenancy import Project, project_objects
    from tests.cluster.identities import service_account_kubeconfig
    from tests.cluster.rest import Rest

    for obj in project_objects(Project(ns, ns, False, frozenset(), {}), {}, []):
        if obj["kind"] in ("Role", "RoleBinding") and obj["metadata"]["name"] == "mlplatform-project":
            await admin.create(obj)
    return Rest(service_account_kubeconfig(cluster, directory / "runner.kubeconfig", ns, "mlplatform-runner"))
