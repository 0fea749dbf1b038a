"""Whose pods a team project runs: the member who asked for them. Pure: no I/O, no kopf (the
operator's ``member-accounts`` webhook serves it).

In a team project every member has a ServiceAccount of their own (`hub_ext.manifests.tenancy`:
``mlplatform-member-<slug>``, annotated with the hub user and their Kubernetes identity); their
notebook server runs as it, and when they leave the hub deletes it, which voids every token of it.
So that nothing a member starts outlives their membership with a token of anyone else, the pods of
every object a member makes in a team project (a batch Job, a PyTorchJob or TFJob, a Trainer v2
TrainJob, a Katib Experiment's trial template) run as that member's own account (`decide`):

- the requester's account is the account of the request (a notebook's or a job's token:
  ``system:serviceaccount:<ns>:mlplatform-member-…``) or, for a member's own identity
  (``oidc:bob``), the account annotated with that identity;
- every pod spec of the object (`held_specs`: any mapping with a ``containers`` list, wherever the
  kind keeps its templates, and a TrainJob's every runtime patch of a pod,
  ``runtimePatches[i].trainingRuntimeSpec.template.spec.replicatedJobs[j].template.spec.template.spec``,
  with or without containers) that names no account, or the project's ``mlplatform-runner``, is
  given the requester's (JSON Patch operations); one that names any other account is refused,
  naming the field. (A TrainJob whose patches hold no pod spec runs the runtime's, which names no
  account: its pods would be ``default``'s, which the project policies refuse for a Job's pods);
- an Experiment whose trial template lives in a ConfigMap is refused: Katib reads the ConfigMap
  again for every trial, after this check, so its pods' account could not be held;
- a request by the project's shared ``mlplatform-runner`` (a server started before members had
  accounts) or by a member identity without an account is refused with what to do; a request by
  anyone else (Kubernetes' and Katib's controllers, the hub, the operator, an administrator) is
  not a member's and is left as it is.

Personal projects are not touched: their pods run as ``mlplatform-runner`` and have one member.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from hub_ext.core.errors import UserInputError
from hub_ext.manifests.tenancy import IDENTITY_ANNOTATION, MEMBER_LABEL, SERVICE_ACCOUNT

SA_PREFIX = "system:serviceaccount:"
MEMBER_PREFIX = "mlplatform-member-"


def pod_specs(obj: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    """(JSON Pointer, pod spec) of every pod spec in `obj`: a mapping with a ``containers`` list."""
    if isinstance(obj, Mapping):
        if isinstance(obj.get("containers"), list):
            yield path, obj  # type: ignore[misc]
            return
        for key, value in obj.items():
            yield from pod_specs(value, f"{path}/{_escape(str(key))}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from pod_specs(value, f"{path}/{i}")


def held_specs(obj: Mapping[str, Any]) -> list[tuple[str, dict]]:
    """(JSON Pointer, pod spec) of every pod spec whose account `decide` holds (module docstring)."""
    found = dict(pod_specs(obj.get("spec"), "/spec"))
    if obj.get("kind") == "TrainJob":
        for i, patch in enumerate((obj.get("spec") or {}).get("runtimePatches") or []):
            jobs = _at(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs") or []
            for j, job in enumerate(jobs if isinstance(jobs, list) else []):
                pod = _at(job, "template", "spec", "template", "spec")
                if isinstance(pod, Mapping):
                    found.setdefault(f"/spec/runtimePatches/{i}/trainingRuntimeSpec/template/spec/replicatedJobs/{j}"
                                     "/template/spec/template/spec", pod)  # type: ignore[arg-type]
    return sorted(found.items())


def _at(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _field(pointer: str) -> str:
    """A JSON Pointer as the field path users read (``spec.template.spec``)."""
    return ".".join(p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/") if p)


def account_of(user: str, groups: list[str] | tuple[str, ...], namespace: str,
               accounts: Mapping[str, Mapping[str, str]]) -> str | None:
    """The requester's own member account in `namespace` (`accounts`: account name → its
    annotations); None for a request that is no member's; `UserInputError` for a member who has none."""
    if "system:masters" in groups:
        return None
    if user.startswith(SA_PREFIX):
        account_ns, _, name = user[len(SA_PREFIX):].partition(":")
        if account_ns != namespace:
            return None  # a controller's or the hub's account, from its own namespace
        if name in accounts:
            return name
        if name == SERVICE_ACCOUNT:
            raise UserInputError("serviceAccountName", f"in the team project {namespace} your pods run as your "
                                 "own ServiceAccount: restart your notebook server (it runs as the project's "
                                 f"shared {SERVICE_ACCOUNT}) and submit again", 403)
        return None
    if user.startswith("system:"):
        return None
    mine = sorted(name for name, notes in accounts.items() if notes.get(IDENTITY_ANNOTATION) == user)
    if not mine:
        raise UserInputError("serviceAccountName", f"{user} has no ServiceAccount in the team project {namespace}: "
                             "log in to the hub (it makes one for each member), then submit again", 403)
    return mine[0]


def decide(obj: Mapping[str, Any], own: str, namespace: str) -> list[dict]:
    """The JSON Patch operations that give every pod spec of `obj` the account `own`; a
    `UserInputError` (403) naming the field when one names another account or the kind cannot be held."""
    template = ((obj.get("spec") or {}).get("trialTemplate") or {})
    if obj.get("kind") == "Experiment" and template.get("configMap"):
        raise UserInputError("spec.trialTemplate.configMap", f"in the team project {namespace} a sweep's trial "
                             "template is written in the Experiment (spec.trialTemplate.trialSpec): Katib reads a "
                             "ConfigMap again for every trial, so whose pods they are could not be held", 403)
    ops = []
    for pointer, spec in held_specs(obj):
        named = spec.get("serviceAccountName") or spec.get("serviceAccount") or ""
        if named not in ("", SERVICE_ACCOUNT, own):
            raise UserInputError(f"{_field(pointer)}.serviceAccountName",
                                 f"your pods in the team project {namespace} run as your own ServiceAccount {own}, "
                                 f"not {named}", 403)
        if spec.get("serviceAccountName") != own:
            ops.append({"op": "add", "path": f"{pointer}/serviceAccountName", "value": own})
        if "serviceAccount" in spec and spec["serviceAccount"] != own:
            ops.append({"op": "add", "path": f"{pointer}/serviceAccount", "value": own})
    return ops


def member_accounts(items: list[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """The member accounts among ServiceAccounts as listed (name → annotations)."""
    out = {}
    for sa in items:
        meta = sa.get("metadata") or {}
        if (meta.get("labels") or {}).get(MEMBER_LABEL) and str(meta.get("name", "")).startswith(MEMBER_PREFIX):
            out[meta["name"]] = dict(meta.get("annotations") or {})
    return out
