"""`mlplatform operator`: one kopf operator with the platform's webhooks, its dataset controller and
the observations of early-stopped Katib Trials (`early_stopped`).

Every replica serves the admission webhooks (stateless: any replica answers any review); only the
replica holding the Lease (`leader`) acts in the dataset controller and on Trials. The webhook server is kopf's,
on our certificate (`tls`), reloaded when the files change; kopf manages no webhook configuration
(they ship in helm-values/operator.yaml, scoped to project namespaces) and posts no log lines as
Events (a handler's message could name a credential). SIGTERM/SIGINT stop it cleanly: the Lease is
released so a standby replica takes over at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Callable

import kopf
import kubernetes_asyncio
from kopf._cogs.structs import references

from hub_ext.kube.client import Kube
from hub_ext.operator import dataset_controller, early_stopped, gate_keeper, health, logs, member_webhook, rescan, webhooks
from hub_ext.operator.context import OperatorContext
from hub_ext.operator.leader import Leader
from hub_ext.operator.projects import ProjectNamespaces
from hub_ext.operator.rules.datasets import LOADER_LABEL
from hub_ext.operator.rules.gates import GATED_LABEL
from hub_ext.operator.rules.settings import OperatorSettings, parse
from hub_ext.operator.tls import Certificates

log = logging.getLogger("mlplatform.operator")


async def _client(settings: OperatorSettings):
    if settings.kubeconfig:
        return await kubernetes_asyncio.config.new_client_from_config(config_file=settings.kubeconfig)
    kubernetes_asyncio.config.load_incluster_config()
    return kubernetes_asyncio.client.ApiClient()


def _registry(ctx: OperatorContext, certs: Certificates,
              started: Callable[[kopf.OperatorRegistry, kopf.OperatorSettings], None]) -> kopf.OperatorRegistry:
    """The operator's handlers; `started(registry, kopf's settings)` is called once kopf has
    started, in kopf's own context (its API credentials: a task it makes may call kopf's API)."""
    registry = kopf.OperatorRegistry()
    s = ctx.settings

    @kopf.on.login(registry=registry)
    def login(**kwargs):
        if s.kubeconfig:
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_):
        # our context (certs.context, reloaded in place by certs.keep); kopf loads the files into it
        # once and, told to look every ~30 years, never restarts its server for a file change
        settings.admission.server = kopf.WebhookServer(
            addr=s.webhook_addr, port=s.webhook_port, host=s.service_host, context=certs.context,
            certfile=str(certs.certfile), pkeyfile=str(certs.keyfile), file_check_interval=1e9)
        settings.admission.managed = None
        settings.posting.enabled = False
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        # the API server filters the controller's watches (kopf's handler filters alone would
        # receive, and keep, every PVC and Job of the cluster)
        settings.watching.label_selectors["v1", "persistentvolumeclaims"] = s.mounts.dataset_label
        settings.watching.label_selectors["batch", "v1", "jobs"] = LOADER_LABEL
        settings.watching.label_selectors["v1", "pods"] = GATED_LABEL

    @kopf.on.startup(registry=registry)
    async def handed_over(settings: kopf.OperatorSettings, **_):
        started(registry, settings)

    webhooks.register(registry, ctx)
    member_webhook.register(registry, ctx)
    dataset_controller.register(registry, ctx, gate_keeper.register(registry, ctx))
    early_stopped.register(registry, ctx)
    return registry


def _own_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


async def run(settings: OperatorSettings, stop: asyncio.Event | None = None, signals: bool = False) -> None:
    """Run until `stop` is set (with `signals`, also on SIGTERM/SIGINT: the handlers are taken back
    from kopf once it is ready, so a signal goes through `shutdown`'s order)."""
    if settings.kubeconfig:
        os.environ["KUBECONFIG"] = settings.kubeconfig  # kopf's own client reads it (login_with_kubeconfig)
    api = await _client(settings)
    kube = Kube(api)
    # the Lease has a client (a connection pool) of its own: renewals never queue behind the
    # controller's and the webhooks' requests (with 1,000 datasets loading they did, and the lease
    # was lost; tests/bench/operator_datasets.py)
    lease_api = await _client(settings)
    leader = Leader(Kube(lease_api), settings.namespace, settings.lease_name, settings.identity,
                    settings.lease_duration_s)
    ctx = OperatorContext(settings, kube, leader, ProjectNamespaces(kube, settings.project_selector))
    certs = Certificates(kube, settings)
    stop = stop or asyncio.Event()
    ready = asyncio.Event()
    await certs.prepare()
    draining = asyncio.Event()
    runner = await health.serve(settings.health_addr, settings.health_port,
                                {"certificate": certs.ready.is_set, "kopf": ready.is_set,
                                 "webhook server": lambda: health.tls_listening(settings.webhook_addr,
                                                                               settings.webhook_port),
                                 "not stopping": lambda: not draining.is_set()}, ctx.metrics,
                                lambda: {"mlplatform_operator_leader": float(leader.leading)})
    tasks = [asyncio.create_task(leader.run(), name="leader"), asyncio.create_task(certs.keep(), name="tls")]
    kopf_stop = asyncio.Event()

    async def shutdown() -> None:
        """Ours first (the leader steps down, so the controller's own tasks end and a standby takes
        over at once), then, after ``--drain-seconds`` of failing readiness while still answering
        reviews (the Service stops sending them here), kopf: it would wait 5 s for tasks it did
        not make to end by themselves."""
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await leader.release()
        draining.set()
        await asyncio.sleep(settings.drain_s)
        await runner.cleanup()
        kopf_stop.set()

    stopper = asyncio.create_task(shutdown(), name="shutdown")
    if signals:
        _own_signals(stop)

        async def retake() -> None:
            await ready.wait()
            _own_signals(stop)
        tasks.append(asyncio.create_task(retake(), name="signals"))
    insights = references.Insights()

    def started(registry: kopf.OperatorRegistry, kopf_settings: kopf.OperatorSettings) -> None:
        tasks.append(asyncio.create_task(rescan.rescan(registry, kopf_settings, insights, settings.rescan_interval_s),
                                         name="rescan"))
    log.info("operator %s starting in namespace %s", settings.identity, settings.namespace)
    try:
        await kopf.operator(registry=_registry(ctx, certs, started), insights=insights, standalone=True,
                            clusterwide=True, stop_flag=kopf_stop, ready_flag=ready)
    finally:
        stop.set()
        await stopper
        await api.close()
        await lease_api.close()
        log.info("operator %s stopped", settings.identity)


def main(argv: list[str] | None = None) -> int:
    settings = parse(argv)
    logs.configure(settings.log_format)

    asyncio.run(run(settings, signals=True))
    return 0
