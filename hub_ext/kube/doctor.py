"""`mlplatform doctor`'s checks of a cluster: is everything the platform needs there, and does it work?

`examine(kube, settings)` reads the cluster (and changes nothing: its one write is a server-side
dry run) and returns `Finding`s in a fixed order, each ``ok``, ``warn`` (the platform works, with
less) or ``fail`` (something the platform needs is missing or broken), with the fix in words:

1. the API server's version (ValidatingAdmissionPolicy needs 1.30);
2. the APIs of `hub_ext.manifests.needs.APIS` (Trainer v2 or the Training Operator; Katib, Kueue
   and volume snapshots are optional), with the versions found where a needed one is not served,
   and where Trainer v2 is served, the platform's ClusterTrainingRuntimes;
3. the cluster-scoped objects of each shipped manifest, and whether the project policies name the
   hub's ServiceAccount (the one hand edit of project-policies.yaml);
4. the hub's and the operator's cluster-wide rights, one SubjectAccessReview per access;
5. the operator: its Deployment's ready replicas, each webhook's CA bundle (present, not expired)
   and target (a Service with ready endpoints, or a URL), and a dry-run credential Secret in a
   project not being deleted, which the API server must send to the operator's webhook and the
   webhook must refuse (proof that the API server reaches it and trusts its certificate);
6. with a catalogue: per accelerator, the nodes that carry its labels and offer its resource;
7. NVIDIA's DCGM exporter (GPU utilisation), found by its Service's labels;
8. each project namespace not being deleted holds the objects the hub and operator need there
   (their RoleBindings, and the LocalQueue where Kueue is served).

A check that cannot be made (a 403 to the doctor's own identity) is a ``fail`` that says so.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
from dataclasses import dataclass, field
from typing import Mapping

from cryptography import x509

from hub_ext.core.catalog import Accelerator
from hub_ext.kube.client import Forbidden, Kube, KubeError, path_of, reason
from hub_ext.manifests.needs import (
    APIS, CLUSTER_OBJECTS, CREDENTIAL_WEBHOOK, DCGM_SELECTORS, HUB_ACCOUNT, HUB_CLUSTER_RULES, MIN_KUBERNETES,
    OPERATOR_ACCOUNT, OPERATOR_CLUSTER_RULES, OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, TRAINER_API,
    TRAINER_RUNTIMES, WEBHOOK_CONFIGURATIONS, access_checks, nodes_offering, service_account_user, strategy_hint)
from hub_ext.manifests.queues import LOCAL_QUEUE
from hub_ext.manifests.tenancy import HUB_BINDING, OPERATOR_BINDING, PROJECT_LABEL

OK, WARN, FAIL = "ok", "warn", "fail"
CERT_WARN_DAYS = 14
_KINDS = {"ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
          "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
          "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
          "ValidatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
          "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
          "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"}


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # OK | WARN | FAIL
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class DoctorSettings:
    hub_account: str = HUB_ACCOUNT  # namespace/name
    operator_namespace: str = OPERATOR_NAMESPACE
    accelerators: Mapping[str, Accelerator] | None = None  # None: no catalogue given, nodes not checked


@dataclass
class _Run:
    kube: Kube
    settings: DoctorSettings
    found: list[Finding] = field(default_factory=list)
    served: set[str] = field(default_factory=set)  # the APIS names served

    def add(self, check: str, status: str, detail: str, fix: str = "") -> None:
        self.found.append(Finding(check, status, detail, fix if status != OK else ""))


async def examine(kube: Kube, settings: DoctorSettings = DoctorSettings()) -> list[Finding]:
    run = _Run(kube, settings)
    for step in (_version, _apis, _manifests, _rights, _operator, _nodes, _dcgm, _projects):
        try:
            await step(run)
        except Forbidden as e:
            run.add(step.__name__.strip("_"), FAIL, f"the doctor's own identity may not read this: {reason(e)}",
                    "run the doctor as a cluster administrator")
    return run.found


async def _version(run: _Run) -> None:
    body = await run.kube.request("GET", "/version")
    version = body.get("gitVersion", "?")
    try:
        minor = (int(body.get("major", "0")), int(str(body.get("minor", "0")).rstrip("+")))
    except ValueError:
        minor = (0, 0)
    if minor >= MIN_KUBERNETES:
        run.add("kubernetes", OK, f"Kubernetes {version}")
    else:
        need = ".".join(map(str, MIN_KUBERNETES))
        run.add("kubernetes", FAIL, f"Kubernetes {version}; the platform needs {need} or later "
                                    "(ValidatingAdmissionPolicy)", f"upgrade the control plane to {need} or later")


async def _apis(run: _Run) -> None:
    groups = {g["name"]: [v["version"] for v in g.get("versions") or []]
              for g in (await run.kube.request("GET", "/apis")).get("groups") or []}
    for api in APIS:
        served = []
        for group_version, plurals in api.choices:
            group = group_version.split("/")[0]
            if group_version.split("/")[1] in groups.get(group, []):
                body = await run.kube.get(f"/apis/{group_version}") or {}
                if plurals <= {r.get("name") for r in body.get("resources") or []}:
                    served.append(group_version)
        if served:
            run.served.add(api.name)
            run.add(f"api: {api.name}", OK, f"{', '.join(served)}: {api.used_for}")
            if TRAINER_API in served:
                await _runtimes(run)
            continue
        found = sorted({f"{g}/{v}" for gv, _ in api.choices for g in [gv.split('/')[0]] for v in groups.get(g, [])})
        wanted = " or ".join(f"{gv} ({', '.join(sorted(p))})" for gv, p in api.choices)
        detail = f"not served: {wanted}" + (f"; the cluster serves {', '.join(found)}" if found else "")
        if api.without is None:
            run.add(f"api: {api.name}", FAIL, f"{detail}. The platform needs it for {api.used_for}", api.fix)
        else:
            run.add(f"api: {api.name}", WARN, f"{detail}. Without it, {api.without}", api.fix)


async def _runtimes(run: _Run) -> None:
    missing = [name for name in TRAINER_RUNTIMES
               if await run.kube.get(f"/apis/{TRAINER_API}/clustertrainingruntimes/{name}") is None]
    if missing:
        run.add("trainer runtimes", FAIL, f"Trainer v2 is served, so jobs run as TrainJobs, but its ClusterTrainingRuntime "
                                          f"{', '.join(missing)} is missing: every TrainJob would be refused",
                "kubectl apply -f helm-values/trainer-runtimes.yaml")
    else:
        run.add("trainer runtimes", OK, ", ".join(TRAINER_RUNTIMES))


async def _manifests(run: _Run) -> None:
    for path, objects in CLUSTER_OBJECTS.items():
        missing = [f"{kind} {name}" for kind, name in objects if await run.kube.get(f"{_KINDS[kind]}/{name}") is None]
        if missing:
            run.add(f"installed: {path}", FAIL, f"missing {', '.join(missing)}", f"kubectl apply -f {path}")
        else:
            run.add(f"installed: {path}", OK, f"{len(objects)} cluster objects")
    hub_user = service_account_user(run.settings.hub_account)[0]
    policies = (await run.kube.list(_KINDS["ValidatingAdmissionPolicy"])).get("items") or []
    wrong = [p["metadata"]["name"] for p in policies
             if p["metadata"]["name"].startswith("mlplatform-")
             for v in (p.get("spec") or {}).get("variables") or []
             if v.get("name") == "isHub" and f"'{hub_user}'" not in v.get("expression", "")]
    if wrong:
        run.add("policies name the hub", FAIL, f"{', '.join(wrong)} do not treat {hub_user} as the hub: its "
                                               "notebook pods and project objects would be refused",
                "edit system:serviceaccount:jhub:hub in helm-values/project-policies.yaml to the hub's "
                "ServiceAccount (--hub-account) and apply it again")


async def _rights(run: _Run) -> None:
    for who, account, rules, path in (
            ("hub", run.settings.hub_account, HUB_CLUSTER_RULES, "helm-values/hub-rbac.yaml"),
            ("operator", f"{run.settings.operator_namespace}/{OPERATOR_ACCOUNT}", OPERATOR_CLUSTER_RULES,
             "helm-values/operator.yaml")):
        user, groups = service_account_user(account)
        checks = access_checks(rules)
        answers = await asyncio.gather(*(_allowed(run.kube, user, groups, c.attributes()) for c in checks))
        denied = [str(c) for c, ok in zip(checks, answers) if not ok]
        if denied:
            more = f" and {len(denied) - 5} more" if len(denied) > 5 else ""
            run.add(f"{who} rights", FAIL, f"{user} may not {'; '.join(denied[:5])}{more}",
                    f"kubectl apply -f {path}, with {account} as its ClusterRoleBinding's subject")
        else:
            run.add(f"{who} rights", OK, f"{user}: all {len(checks)} cluster-wide accesses")


async def _allowed(kube: Kube, user: str, groups: list[str], attributes: dict) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "groups": groups, "resourceAttributes": attributes}}
    answer = await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool((answer.get("status") or {}).get("allowed"))


async def _operator(run: _Run) -> None:
    ns = run.settings.operator_namespace
    deployment = await run.kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{OPERATOR_DEPLOYMENT}")
    if deployment is None:
        run.add("operator", WARN, f"no Deployment {ns}/{OPERATOR_DEPLOYMENT} (an operator run elsewhere is "
                                  "checked through its webhooks below)", "kubectl apply -f helm-values/operator.yaml")
    else:
        ready, wanted = (deployment.get("status") or {}).get("readyReplicas") or 0, deployment["spec"].get("replicas", 1)
        run.add("operator", OK if ready else FAIL, f"{ready} of {wanted} replicas ready",
                f"kubectl -n {ns} describe deployment {OPERATOR_DEPLOYMENT}; kubectl -n {ns} logs "
                f"deployment/{OPERATOR_DEPLOYMENT}")
    now = datetime.datetime.now(datetime.timezone.utc)
    for kind, names in WEBHOOK_CONFIGURATIONS.items():
        for name in names:
            config = await run.kube.get(f"{_KINDS[kind]}/{name}")
            for hook in (config or {}).get("webhooks") or []:
                await _webhook(run, hook, now)
    await _probe(run)


async def _webhook(run: _Run, hook: dict, now: datetime.datetime) -> None:
    check, client = f"webhook {hook['name']}", hook.get("clientConfig") or {}
    status, problems = OK, []
    bundle = client.get("caBundle")
    if not bundle:
        status, problems = FAIL, ["no caBundle (the operator writes it when it starts in self-signed mode)"]
    else:
        expiry = _bundle_expiry(bundle)
        if expiry is None:
            status, problems = FAIL, ["its caBundle holds no readable certificate"]
        elif expiry <= now:
            status, problems = FAIL, [f"its CA certificate expired on {expiry:%Y-%m-%d}"]
        elif expiry <= now + datetime.timedelta(days=CERT_WARN_DAYS):
            status, problems = WARN, [f"its CA certificate expires on {expiry:%Y-%m-%d}"]
    service = client.get("service")
    if service:
        ready = await _ready_endpoints(run.kube, service["namespace"], service["name"])
        if ready is None:
            status, problems = FAIL, [*problems, f"its Service {service['namespace']}/{service['name']} does not exist"]
        elif not ready:
            status, problems = FAIL, [*problems, f"its Service {service['namespace']}/{service['name']} has no "
                                                 "ready endpoint (no operator pod is ready)"]
        target = f"Service {service['namespace']}/{service['name']}:{service.get('port', 443)}{service.get('path', '')}"
    else:
        target = client.get("url", "?")
    run.add(check, status, "; ".join(problems) or f"to {target}, CA valid",
            "restart the operator (it renews its certificate and the caBundle), or give the Deployment the "
            "Secret of --tls-secret; check the Service's selector matches the operator's pods")


def _bundle_expiry(bundle: str) -> datetime.datetime | None:
    try:
        certs = x509.load_pem_x509_certificates(base64.b64decode(bundle))
    except ValueError:
        return None
    return min(c.not_valid_after_utc for c in certs) if certs else None


async def _ready_endpoints(kube: Kube, namespace: str, name: str) -> int | None:
    if await kube.get(f"/api/v1/namespaces/{namespace}/services/{name}") is None:
        return None
    slices = await kube.list(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                             labelSelector=f"kubernetes.io/service-name={name}")
    return sum(1 for s in slices.get("items") or [] for e in s.get("endpoints") or []
               if (e.get("conditions") or {}).get("ready", True))


async def _probe(run: _Run) -> None:
    check = "webhooks answer the API server"
    projects = await _active_projects(run)  # in one being deleted a create is refused before any webhook
    if not projects:
        run.add(check, WARN, "no project namespace yet: checked once the hub has made one",
                "start a server, then run the doctor again")
        return
    ns = projects[0]["metadata"]["name"]
    probe = {"apiVersion": "v1", "kind": "Secret", "type": "aws-credential",
             "metadata": {"name": "doctor-probe", "namespace": ns}}
    fix = ("see the webhook lines above; the API server must reach the operator's Service and trust its CA "
           f"(kubectl -n {run.settings.operator_namespace} logs deployment/{OPERATOR_DEPLOYMENT})")
    try:
        await run.kube.request("POST", f"/api/v1/namespaces/{ns}/secrets", probe, query={"dryRun": "All"})
    except KubeError as e:
        text = _message(e.body)
        if f'admission webhook "{CREDENTIAL_WEBHOOK}" denied' in text:
            run.add(check, OK, f"a dry-run credential Secret in {ns} was sent to {CREDENTIAL_WEBHOOK} and refused by it")
        elif "failed calling webhook" in text:
            run.add(check, FAIL, f"the API server could not call the operator: {text}", fix)
        else:
            run.add(check, FAIL, f"a dry-run credential Secret in {ns} was refused before the webhook: {reason(e)}", fix)
        return
    run.add(check, FAIL, f"a dry-run credential Secret in {ns} was accepted without the operator's review "
                         f"({CREDENTIAL_WEBHOOK} was not called)", "kubectl apply -f helm-values/operator.yaml")


def _message(body: str) -> str:
    """The API's Status message of an answer (its first 500 characters)."""
    try:
        return str(json.loads(body).get("message", body))[:500]
    except (ValueError, AttributeError):
        return body[:500]


async def _nodes(run: _Run) -> None:
    accelerators = run.settings.accelerators
    if accelerators is None:
        return
    nodes = (await run.kube.list("/api/v1/nodes")).get("items") or []
    for acc in accelerators.values():
        offering = nodes_offering(acc, nodes)
        if offering:
            run.add(f"accelerator {acc.name}", OK, f"{sum(offering.values())} {acc.resource} on "
                                                  f"{len(offering)} node(s): {', '.join(sorted(offering))}")
            continue
        selector = ", ".join(f"{k}={v}" for k, v in acc.node_selector) or "no labels"
        hint = strategy_hint(acc, nodes)
        run.add(f"accelerator {acc.name}", FAIL, f"no node offers {acc.resource} with {selector}{hint}",
                "label the GPU nodes as the catalogue says (GPU Feature Discovery sets nvidia.com/gpu.product), "
                "set the NVIDIA device plugin's MIG strategy to the catalogue's, or correct "
                f"accelerators['{acc.name}']")


async def _dcgm(run: _Run) -> None:
    for selector in DCGM_SELECTORS:
        found = (await run.kube.list("/api/v1/services", labelSelector=selector)).get("items") or []
        if found:
            where = ", ".join(f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in found)
            run.add("gpu metrics", OK, f"DCGM exporter: {where}")
            return
    run.add("gpu metrics", WARN, "no DCGM exporter Service: GPU utilisation per pod and MIG slice is not measured",
            "install NVIDIA's dcgm-exporter (part of the GPU Operator)")


async def _active_projects(run: _Run) -> list[dict]:
    """The project namespaces not being deleted."""
    listed = (await run.kube.list("/api/v1/namespaces", labelSelector=PROJECT_LABEL)).get("items") or []
    return [n for n in listed if (n.get("status") or {}).get("phase", "Active") == "Active"
            and not n["metadata"].get("deletionTimestamp")]


async def _projects(run: _Run) -> None:
    namespaces = await _active_projects(run)
    behind = []
    for ns in namespaces:
        name = ns["metadata"]["name"]
        wanted = [("RoleBinding", HUB_BINDING), ("RoleBinding", OPERATOR_BINDING)]
        if "queueing" in run.served:
            wanted.append(("LocalQueue", LOCAL_QUEUE))
        missing = [f"{kind} {obj}" for kind, obj in wanted if await run.kube.get(path_of(kind, name, obj)) is None]
        if missing:
            behind.append(f"{name} ({', '.join(missing)})")
    if behind:
        run.add("projects", WARN, f"{len(behind)} of {len(namespaces)} lack objects: {'; '.join(behind[:5])}",
                "start a server in each project (a hub process applies a project's objects at its first start "
                "there), or run mlplatform render-project and apply what it prints")
    else:
        run.add("projects", OK, f"{len(namespaces)} project namespace(s), each with its bindings"
                                + (" and queue" if "queueing" in run.served else ""))
