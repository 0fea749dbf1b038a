"""What a pod in a project may not ask for, checked on a pod spec before anything is created. Pure.

The cluster is the real guard (Pod Security admission and the ValidatingAdmissionPolicies of
``helm-values/project-policies.yaml`` hold for every client and every controller); this module is
the early, clear answer the jobs API gives for pod specs a user writes (a native Katib Experiment's
trial template) instead of trials that fail one by one at admission. It mirrors those rules:

- no ``privileged`` container and no ``allowPrivilegeEscalation: true``; ``capabilities.add`` only
  within Pod Security ``baseline`` (`BASELINE_CAPABILITIES`);
- no ``hostPath`` volume, no ``hostPID``/``hostIPC``/``hostNetwork``, no ``hostPort``, no
  ``nodeName`` (a pod that names its node skips the scheduler, and with it taints and quotas);
- the service account, when set (``serviceAccountName`` or the deprecated ``serviceAccount``), is
  the project's runner (`hub_ext.manifests.tenancy.SERVICE_ACCOUNT`);
- no reference to a platform-reserved Secret (`reserved_secret`: a name ending ``-hub-token`` or
  starting ``mlplatform-`` or ``jupyter-``) from a volume, a projected volume, ``env[].valueFrom.secretKeyRef``
  or ``envFrom[].secretRef``;
- no variable the NVIDIA container runtime reads to hand out GPUs (`GPU_ENV`), set directly or
  through ``envFrom`` without a prefix that keeps it out (a ConfigMap's or Secret's keys are not
  visible here, as they are not to admission). ``CUDA_VISIBLE_DEVICES`` is not among them: CUDA
  reads it inside the container and it can only narrow the GPUs the runtime already gave;
- a field above that would hold a ``${trialParameters.…}`` placeholder is refused too: Katib fills
  it per trial, after this check.

Containers are ``containers``, ``initContainers`` and ``ephemeralContainers``.

`pod_spec_findings(spec, where)` lists every finding as ``(path, message)``, the path in the
form ``<where>.containers[0].securityContext.privileged``; an empty list means nothing was found.
`workload_pod_specs(obj, where)` gives the pod specs of a ``batch/v1`` Job or a Kubeflow
``PyTorchJob``/``TFJob`` (each replica type's template), with their paths; `workload_findings`
both together.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Mapping

from hub_ext.manifests.tenancy import SERVICE_ACCOUNT

Finding = tuple[str, str]  # (field path, what is wrong)

# Pod Security "baseline": the capabilities a container may add
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# read by the NVIDIA container toolkit to choose the devices it mounts into a container (the same
# list as the mlplatform-project-pods admission policy)
GPU_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES",
           "NVIDIA_IMEX_CHANNELS", "NVIDIA_GDRCOPY", "NVIDIA_GDS", "NVIDIA_MOFED", "NVIDIA_NVSWITCH")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}
_PLACEHOLDER = re.compile(r"\$\{trialParameters\.")


def reserved_secret(name: Any) -> bool:
    """A Secret name the platform keeps for itself (a notebook's hub token or TLS Secret,
    ``mlplatform-*``): the names credentials may not take (`hub_ext.core.credentials`)."""
    return isinstance(name, str) and (name.endswith("-hub-token") or name.startswith(("mlplatform-", "jupyter-")))


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _map(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _secret_ref(name: Any, where: str) -> list[Finding]:
    if isinstance(name, str) and _PLACEHOLDER.search(name):
        return [(where, "must not depend on a trial parameter")]
    if reserved_secret(name):
        return [(where, f"{name!r} is a platform-reserved Secret (a notebook's hub token or TLS key, "
                        "mlplatform-*); "
                        "mount the project's credentials instead")]
    return []


def _container_findings(c: Mapping, where: str) -> list[Finding]:
    found: list[Finding] = []
    sc = _map(c.get("securityContext"))
    if sc.get("privileged") is True:
        found.append((f"{where}.securityContext.privileged", "a project's pods may not be privileged"))
    if sc.get("allowPrivilegeEscalation") is True:
        found.append((f"{where}.securityContext.allowPrivilegeEscalation",
                      "a project's pods may not allow privilege escalation"))
    for i, cap in enumerate(_items(_map(sc.get("capabilities")).get("add"))):
        if cap not in BASELINE_CAPABILITIES:
            found.append((f"{where}.securityContext.capabilities.add[{i}]",
                          f"{cap!r} is beyond the Pod Security baseline (allowed: "
                          f"{', '.join(sorted(BASELINE_CAPABILITIES))})"))
    for i, port in enumerate(_items(c.get("ports"))):
        if _map(port).get("hostPort"):
            found.append((f"{where}.ports[{i}].hostPort", "a project's pods may not use ports of the node"))
    for i, env in enumerate(_items(c.get("env"))):
        env = _map(env)
        name = env.get("name")
        if name in GPU_ENV:
            found.append((f"{where}.env[{i}].name", f"{name} would choose GPUs past the scheduler; ask for an "
                                                    "accelerator in resources.limits instead"))
        elif isinstance(name, str) and _PLACEHOLDER.search(name):
            found.append((f"{where}.env[{i}].name", "must not depend on a trial parameter"))
        ref = _map(_map(env.get("valueFrom")).get("secretKeyRef"))
        if ref:
            found += _secret_ref(ref.get("name"), f"{where}.env[{i}].valueFrom.secretKeyRef.name")
    for i, source in enumerate(_items(c.get("envFrom"))):
        source = _map(source)
        prefix = source.get("prefix") or ""
        if not isinstance(prefix, str) or _PLACEHOLDER.search(prefix) or any(g.startswith(prefix) for g in GPU_ENV):
            found.append((f"{where}.envFrom[{i}].prefix", "needs a prefix that no GPU variable "
                                                          f"({', '.join(GPU_ENV)}) starts with"))
        if "secretRef" in source:
            found += _secret_ref(_map(source["secretRef"]).get("name"), f"{where}.envFrom[{i}].secretRef.name")
    return found


def _volume_findings(v: Mapping, where: str) -> list[Finding]:
    if "hostPath" in v:
        return [(f"{where}.hostPath", "a project's pods may not mount the node's files")]
    found: list[Finding] = []
    if "secret" in v:
        found += _secret_ref(_map(v["secret"]).get("secretName"), f"{where}.secret.secretName")
    for j, source in enumerate(_items(_map(v.get("projected")).get("sources"))):
        if "secret" in _map(source):
            found += _secret_ref(_map(source["secret"]).get("name"), f"{where}.projected.sources[{j}].secret.name")
    return found


def pod_spec_findings(spec: Any, where: str = "spec") -> list[Finding]:
    """Every finding in one pod spec (see the module docstring); [] when there is none."""
    spec = _map(spec)
    found: list[Finding] = []
    for key in ("hostPID", "hostIPC", "hostNetwork"):
        if spec.get(key) is True:
            found.append((f"{where}.{key}", "a project's pods may not share the node's namespaces"))
    if spec.get("nodeName"):
        found.append((f"{where}.nodeName", "a project's pods are placed by the scheduler; use the "
                                           "accelerator's node selector instead"))
    for key in ("serviceAccountName", "serviceAccount"):
        account = spec.get(key)
        if account is not None and account != SERVICE_ACCOUNT:
            found.append((f"{where}.{key}", f"a project's pods run as its ServiceAccount {SERVICE_ACCOUNT}, "
                                            f"not {account}"))
    for i, volume in enumerate(_items(spec.get("volumes"))):
        found += _volume_findings(_map(volume), f"{where}.volumes[{i}]")
    for key in CONTAINER_LISTS:
        for i, container in enumerate(_items(spec.get(key))):
            found += _container_findings(_map(container), f"{where}.{key}[{i}]")
    return found


def workload_pod_specs(obj: Any, where: str = "") -> Iterator[tuple[str, Mapping]]:
    """(path, pod spec) of each pod template of a batch Job, PyTorchJob or TFJob, and of each runtime
    patch of a TrainJob (other kinds: none)."""
    obj = _map(obj)
    prefix = f"{where}." if where else ""
    spec = _map(obj.get("spec"))
    if obj.get("kind") == "Job":
        yield f"{prefix}spec.template.spec", _map(_map(spec.get("template")).get("spec"))
    elif obj.get("kind") in REPLICA_SPECS:
        key = REPLICA_SPECS[obj["kind"]]
        for replica, rs in _map(spec.get(key)).items():
            yield f"{prefix}spec.{key}.{replica}.template.spec", _map(_map(_map(rs).get("template")).get("spec"))
    elif obj.get("kind") == "TrainJob":
        patches = spec.get("runtimePatches") if isinstance(spec.get("runtimePatches"), list) else []
        for i, patch in enumerate(patches):
            jobs = _map(_map(_map(_map(patch).get("trainingRuntimeSpec")).get("template")).get("spec")).get(
                "replicatedJobs")
            for j, rj in enumerate(jobs if isinstance(jobs, list) else []):
                pod = _map(_map(_map(_map(rj).get("template")).get("spec")).get("template")).get("spec")
                yield (f"{prefix}spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]."
                       "template.spec.template.spec"), _map(pod)


def workload_findings(obj: Any, where: str = "") -> list[Finding]:
    """Every finding in every pod template of `obj`."""
    return [f for path, spec in workload_pod_specs(obj, where) for f in pod_spec_findings(spec, path)]
