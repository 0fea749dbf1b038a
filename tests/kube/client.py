"""One way for a test to drive either real client: the sync `kubernetes` package or
`kubernetes_asyncio`, with the same generated method names.

`Kube(flavour, api_client)` calls `await k.call("CoreV1Api", "create_namespaced_pod", ...)`, running
the sync client in a worker thread (it blocks) and awaiting the async one directly. Results come
back as plain dicts (the client's own `sanitize_for_serialization`), failures as the client's own
`ApiException` re-raised as `Failure(status, body)` so assertions read the same for both.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import kubernetes
import kubernetes_asyncio


@dataclass
class Failure(Exception):
    status: int
    body: dict
    headers: dict

    @property
    def reason(self) -> str:
        return self.body.get("reason", "")

    @property
    def message(self) -> str:
        return self.body.get("message", "")

    @property
    def fields(self) -> list[str]:
        """The `field` of each cause in the Status's details (what a 422 Invalid names)."""
        return [c.get("field", "") for c in (self.body.get("details") or {}).get("causes") or []]


def _failure(e) -> Failure:
    try:
        body = json.loads(e.body) if e.body else {}
    except ValueError:
        body = {"message": e.body}
    return Failure(e.status, body, dict(e.headers or {}))


class Kube:
    def __init__(self, flavour: str, api_client):
        self.flavour = flavour
        self.api_client = api_client

    @property
    def is_async(self) -> bool:
        return self.flavour == "async"

    def api(self, name: str):
        module = kubernetes_asyncio.client if self.is_async else kubernetes.client
        return getattr(module, name)(self.api_client)

    def _plain(self, obj):
        if isinstance(obj, (dict, list, str, int, float, type(None))):
            return obj
        return self.api_client.sanitize_for_serialization(obj)

    async def call(self, api: str, method: str, *args, **kwargs):
        fn = getattr(self.api(api), method)
        try:
            if self.is_async:
                result = await fn(*args, **kwargs)
            else:
                result = await asyncio.to_thread(fn, *args, **kwargs)
        except (kubernetes.client.ApiException, kubernetes_asyncio.client.ApiException) as e:
            raise _failure(e) from None
        return self._plain(result)

    async def raw(self, api: str, method: str, *args, **kwargs) -> tuple[int, dict, object]:
        """(status, headers, data) with the client's `_with_http_info` variant."""
        kwargs.setdefault("_preload_content", False)
        fn = getattr(self.api(api), f"{method}_with_http_info")
        try:
            if self.is_async:
                resp = await fn(*args, **kwargs)
                body = await resp.read()
                return resp.status, dict(resp.headers), json.loads(body) if body else None
            resp = await asyncio.to_thread(fn, *args, **kwargs)
            return resp.status, dict(resp.headers), json.loads(resp.data) if resp.data else None
        except (kubernetes.client.ApiException, kubernetes_asyncio.client.ApiException) as e:
            raise _failure(e) from None

    async def watch(self, api: str, method: str, *, max_events: int | None = None, until=None, **kwargs) -> list:
        """Events of a watch as (type, object-dict) until max_events, `until(type, obj)` or the stream ends."""
        fn = getattr(self.api(api), method)
        events = []

        def done(etype, obj):
            events.append((etype, obj))
            return (max_events and len(events) >= max_events) or (until and until(etype, obj))

        try:
            if self.is_async:
                w = kubernetes_asyncio.watch.Watch()
                async with w.stream(fn, **kwargs) as stream:
                    async for ev in stream:
                        if done(ev["type"], self._plain(ev.get("raw_object") or ev["object"])):
                            w.stop()
                            break
            else:
                def run():
                    w = kubernetes.watch.Watch()
                    for ev in w.stream(fn, **kwargs):
                        if done(ev["type"], self._plain(ev.get("raw_object") or ev["object"])):
                            w.stop()
                            break
                await asyncio.to_thread(run)
        except (kubernetes.client.ApiException, kubernetes_asyncio.client.ApiException) as e:
            raise _failure(e) from None
        return events

    async def close(self) -> None:
        if self.is_async:
            await self.api_client.close()
        else:
            self.api_client.close()
