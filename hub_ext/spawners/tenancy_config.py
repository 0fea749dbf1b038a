"""The PlatformSpawner traits that say how strictly project namespaces are held, read into a
`hub_ext.manifests.tenancy.TenancySettings` (the same names, so `mlplatform render-project` reads a config
file's section into the same settings the hub uses)."""

from __future__ import annotations

from traitlets import Dict, Float, Int, List, Unicode
from traitlets.config import Configurable

from hub_ext.manifests.tenancy import DEFAULT_QUOTA, DEFAULT_REQUESTS, METADATA_ADDRESSES, TenancySettings


class TenancyConfig(Configurable):
    pod_security_enforce = Unicode(
        "baseline", help="""Pod Security level enforced in project namespaces (baseline or restricted;
        restricted needs images that run as non-root).

        c.PlatformSpawner.pod_security_enforce = "restricted"
        """).tag(config=True)
    pod_security_warn = Unicode(
        "restricted", help="""Pod Security level warned about and audited in project namespaces.

        c.PlatformSpawner.pod_security_warn = "restricted"
        """).tag(config=True)
    project_quota = Dict(
        dict(DEFAULT_QUOTA), help="""ResourceQuota `hard` of every project namespace (CPU, memory, pods,
        object counts), beside the accelerator quota from its entitlements.

        c.PlatformSpawner.project_quota = {"requests.cpu": "32", "requests.memory": "128Gi", "pods": "50"}
        """).tag(config=True)
    default_requests = Dict(
        dict(DEFAULT_REQUESTS), help="""Container requests a project's LimitRange gives pods that set none.

        c.PlatformSpawner.default_requests = {"cpu": "100m", "memory": "256Mi"}
        """).tag(config=True)
    hub_namespace = Unicode(
        "", help="""The hub's namespace (default: $POD_NAMESPACE, as z2jh sets it, else "jhub"): its
        ServiceAccount is bound in each project, and notebook pods accept traffic from its hub and proxy.

        c.PlatformSpawner.hub_namespace = "jhub"
        """).tag(config=True)
    hub_service_account = Unicode("hub", help="The hub's ServiceAccount name (z2jh: hub).").tag(config=True)
    operator_namespace = Unicode(
        "mlplatform-system", help="""The namespace of the platform's operator (helm-values/operator.yaml):
        its ServiceAccount is given the ClusterRole mlplatform-operator-project in each project, and only there.

        c.PlatformSpawner.operator_namespace = "mlplatform-system"
        """).tag(config=True)
    operator_service_account = Unicode(
        "mlplatform-operator", help="The operator's ServiceAccount name (helm-values/operator.yaml).").tag(config=True)
    katib_namespace = Unicode(
        "kubeflow", help="""Katib's namespace: its controller may reach the project's suggestion pods.

        c.PlatformSpawner.katib_namespace = "kubeflow"
        """).tag(config=True)
    blocked_egress = List(
        list(METADATA_ADDRESSES), help="""Addresses no project pod may reach (the cloud metadata service).

        c.PlatformSpawner.blocked_egress = ["169.254.169.254/32"]
        """).tag(config=True)
    priority_classes = List(
        [], help="""The PriorityClasses pods in a project may name (the ValidatingAdmissionPolicy
        mlplatform-project-pods refuses any other: a system class would let a project's pods preempt
        other projects'). None by default: pods get the cluster's default priority. A cluster with a
        globalDefault PriorityClass names it here (Kubernetes puts its name on every pod).

        c.PlatformSpawner.priority_classes = ["batch-default"]
        """).tag(config=True)

    queueing = Unicode(
        "auto", help="""Who holds the accelerators: "auto" (Kueue where the hub finds it installed, else the
        projects' ResourceQuotas), "kueue" (always Kueue: a spawn fails while it is not installed) or
        "off" (ResourceQuotas, never Kueue: only where Kueue does not manage the project namespaces, as
        helm-values/kueue.yaml makes it do; there a pod without its project's LocalQueue never starts).
        Under Kueue each project gets a ClusterQueue with its limits
        per accelerator type as nominal quota and a LocalQueue "default"; a workload that does not fit
        waits in the queue instead of being refused (docs/queueing.md).

        c.PlatformSpawner.queueing = "kueue"
        """).tag(config=True)
    queue_cohort = Unicode(
        "mlplatform", help="""The shared Kueue cohort, parent of each project's own cohort: what one
        project leaves idle another's jobs borrow, and the owner's jobs reclaim it by preempting the
        borrower (servers never borrow).

        c.PlatformSpawner.queue_cohort = "mlplatform"
        """).tag(config=True)
    queue_borrowing_limit = Int(
        None, allow_none=True, help="""How many of each accelerator type a project may borrow beyond its
        own limit while others leave them idle (None: all that is idle; 0: no borrowing).

        c.PlatformSpawner.queue_borrowing_limit = 2
        """).tag(config=True)

    queue_start_timeout = Float(
        3600, help="""Seconds a start may take where Kueue holds the accelerators (instead of
        start_timeout, when that is shorter): a server waits in its project's queue until admitted,
        and the progress page says where it stands. The spawn form says how long it may wait.

        c.PlatformSpawner.queue_start_timeout = 3600
        """).tag(config=True)

    def tenancy_settings(self) -> TenancySettings:
        return TenancySettings.from_config({name: getattr(self, name) for name in TenancyConfig.class_trait_names()
                                            if name not in Configurable.class_trait_names()})
