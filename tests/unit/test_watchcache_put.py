"""A writer's own answer never hides what the watch told the cache first (hub_ext.kube.watchcache.put)."""

from __future__ import annotations

import pytest

from hub_ext.kube.watchcache import WatchCache

pytestmark = pytest.mark.unit


def obj(name: str, rv: str, **extra) -> dict:
    return {"metadata": {"name": name, "namespace": "p", "resourceVersion": rv, **extra}}


class Listed:
    """The answer of one LIST (a cache's first read), as the API server gives it."""

    def __init__(self, rv: str, items: list[dict]):
        self.body = {"metadata": {"resourceVersion": rv}, "items": items}

    async def list(self, path, timeout=None, **query):
        return self.body


async def test_an_answer_older_than_the_caches_position_is_dropped_and_a_newer_one_kept():
    # the watch (here: the list) already holds the job as changed at 12; the create's answer (11) is late
    cache = WatchCache(Listed("12", [obj("job", "12", labels={"state": "changed"})]), "/x")
    await cache._list()
    cache.put(obj("job", "11"))
    assert cache.items("p") == [obj("job", "12", labels={"state": "changed"})]
    cache.put(obj("other", "13"))  # not seen yet by the watch: the writer's read sees it at once
    assert [o["metadata"]["name"] for o in cache.items("p")] == ["job", "other"]
    cache.remove("p", "job")
    cache.put(obj("job", "12"))  # deleted meanwhile (the watch's DELETED came first): stays gone
    assert [o["metadata"]["name"] for o in cache.items("p")] == ["other"]
