"""kopf learns which resources the cluster serves from a scan when it starts and, after that, from
its watch of CustomResourceDefinitions; a CRD made between the two, or while that watch reconnects
(the objects of its listing are not looked at), is never learnt, and kopf then answers every review
of that resource 404 ("the server could not find the requested resource"): with Kubeflow Trainer
installed after the operator, every TrainJob create in a team project was refused by the
``member-accounts`` webhook until the operator restarted (found by the kube tier's
``test_trainjob_datasets`` in CI).

`rescan` looks again, every ``--rescan-interval`` seconds, at the API groups the operator's
handlers name, as kopf itself does on a CRD event (its own scan and revision of what it serves and
watches; nothing is decided here), so a resource installed later is served within that time. kopf's
internals are used for this (kopf has no public call for it), pinned by the kopf version
pyproject.toml names; a failed look is logged and tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import logging

import kopf
from kopf._cogs.clients import scanning
from kopf._cogs.structs import references
from kopf._core.reactor import observation

log = logging.getLogger("mlplatform.operator.rescan")


def groups_of(registry: kopf.OperatorRegistry) -> set[str]:
    """The API groups of the registry's resource handlers (webhooks and watches) that custom
    resources make (Kubernetes' own groups, ``""``, ``batch``, ``*.k8s.io``, come and go with it)."""
    handlers = [*registry._webhooks.get_all_handlers(), *registry._watching.get_all_handlers(),
                *registry._changing.get_all_handlers()]
    groups = {h.selector.group for h in handlers if h.selector is not None and h.selector.group is not None}
    return {g for g in groups if "." in g and not g.endswith(".k8s.io")}


async def rescan(registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings,
                 insights: references.Insights, interval_s: float) -> None:
    """Every `interval_s`, what kopf serves and watches of each group brought up to what the API
    serves (per group, as kopf's own CRD event handling does)."""
    groups = sorted(groups_of(registry))
    while True:
        await asyncio.sleep(interval_s)
        for group in groups:
            try:
                await _rescan_group(registry, settings, insights, group)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the API unreachable a moment: the next interval looks again
                log.warning("could not look for newly installed resources of %r: %s", group, e)


async def _rescan_group(registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings,
                        insights: references.Insights, group: str) -> None:
    resources = await scanning.scan_resources(groups={group}, settings=settings, logger=log)
    async with insights.revised:
        before = set(insights.webhook_resources) | set(insights.watched_resources)
        observation.revise_resources(resources=resources, insights=insights, registry=registry, group=group)
        await insights.backbone.fill(resources=resources)
        insights.revised.notify_all()
        learnt = (set(insights.webhook_resources) | set(insights.watched_resources)) - before
    for resource in sorted(learnt, key=lambda r: (r.group, r.plural)):
        log.info("now serving %s.%s (installed after the operator started)", resource.plural, resource.group)
