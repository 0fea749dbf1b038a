"""A user's own Katib Experiment (``apiVersion: kubeflow.org/v1beta1``, ``kind: Experiment``, e.g.
``jobs submit training --config experiment.yaml``) made ready to submit as a sweep. Pure.

`native_experiment(doc, project, owner)` returns the manifest to create, or raises
`UserInputError` naming the field (``spec.parallelTrialCount``). It guarantees:

- the document is taken as it is: nothing of ``spec`` is changed or defaulted (Katib's own webhook
  does that on the cluster); server-set metadata (``uid``, ``resourceVersion``,
  ``creationTimestamp``, ``generation``, ``managedFields``, ``ownerReferences``, ``finalizers``,
  ``deletionTimestamp``, ``selfLink``) and ``status`` are dropped, so an exported object
  (``kubectl get -o yaml``) can be submitted again;
- ``metadata.namespace`` is the project: set when absent; replaced when it is a Kubeflow
  installation's (`KUBEFLOW_NAMESPACE` ``kubeflow``, which every one of Katib's own examples
  carries, or a Kubeflow user profile's ``kubeflow-user-…``, as Kubeflow names them: not projects
  of this platform), and
  `notes(doc, project)` says so in one line, for the face to show (the CLI's stderr); any other
  namespace is refused, as kubectl refuses an object whose namespace differs from ``-n``: it may
  name another project, and moving the Experiment silently would put it where the user did not
  mean (the message says to leave it out or choose that project);
- the platform's labels (``app.kubernetes.io/managed-by``, ``mlplatform.io/job``,
  ``mlplatform.io/owner``) and annotations (``mlplatform.io/job-id``, ``mlplatform.io/owner``) are
  added, as `kubeflow.job_manifest` gives a job (a user's own ``mlplatform.io/*`` keys are
  refused: they would forge another job's identity);
- **jobId rule**: ``metadata.name`` must be a Katib Experiment name (``[a-z]([-a-z0-9]*[a-z0-9])?``,
  at most 40 characters so that Katib's trial names ``<name>-<8 characters>`` stay DNS labels);
  its jobId is the name with ``-`` read as ``_`` (``mnist-lr-1`` → ``mnist_lr_1``), which is a
  valid ``ml.v1`` jobId and maps back to the same name through `model.kubernetes_name`, as the
  platform's own sweeps do. ``generateName`` alone is refused (a sweep needs its jobId up front).
  `named(doc, job_id)`: the Experiment named after a jobId given beside it (gcloud's JOB argument
  names the job, as it does every job: a script submits one file under many JOBs), its
  ``metadata.name`` replaced by the jobId with ``_`` read as ``-`` (a note says which name it
  replaced); a JOB that cannot be such a name is refused naming ``JOB``;
- checked as Katib's validating webhook and the v1beta1 API types do: the top-level and ``spec``
  fields are those of the v1beta1 ``Experiment``/``ExperimentSpec`` (an unknown field is refused
  with its path, so a typo is not silently pruned); ``objective.type`` ``maximize``/``minimize``
  with an ``objectiveMetricName``; ``parameters`` (names unique; ``parameterType`` ``double``,
  ``int``, ``discrete`` or ``categorical``; a ``feasibleSpace`` with ``min``/``max`` or a ``list``,
  as strings); ``maxTrialCount`` > 0, ``parallelTrialCount`` > 0 and not above it,
  ``maxFailedTrialCount`` ≥ 0 and not above it (whole numbers); ``trialTemplate.trialSpec`` inline
  (a ConfigMap template is refused: the platform must see the trial's kind) of a kind the platform
  follows — ``PyTorchJob``/``TFJob`` (``kubeflow.org/v1``), ``Job`` (``batch/v1``) or ``TrainJob``
  (``trainer.kubeflow.org/v1alpha1``), the kinds whose pods, logs and states it reads; every ``trialParameters[].reference`` names a parameter (or a
  ``${trialSpec.…}`` field) and every ``${trialParameters.x}`` in the trialSpec is declared;
- the trial's pods are a project's pods: every pod template of the trialSpec (the batch Job's, each
  replica type's) passes `pod_guard.pod_spec_findings` (not privileged, no host namespaces, ports or
  paths, no ``nodeName``, the project's ServiceAccount (a TrainJob's: each runtime patch's pod
  template; its runtime's own pods are the platform team's), no platform-reserved Secret, no GPU-choosing
  variable), refused with the first finding's path (``spec.trialTemplate.trialSpec.spec.template.
  spec.containers[0].securityContext.privileged``). The cluster's admission holds the same rules for
  every client; this is the early answer, before any trial is made;
- a parameter's values (``feasibleSpace`` ``min``/``max``/``step``/``list``) hold no quote, backslash
  or control character: Katib writes each trial's values into the trialSpec's JSON text as they are,
  so such a value could add fields to the trial after the checks above.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from hub_ext.core.credentials import MANAGED_BY
from hub_ext.core.errors import UserInputError
from hub_ext.core.slugs import safe_slug
from server_ext.jobs.kube.kubeflow import JOB_LABEL, OWNER_ANNOTATION, OWNER_LABEL, api_version
from server_ext.jobs.kube.pod_guard import workload_findings
from server_ext.jobs.model import JOB_ID_ANNOTATION

API_VERSION = "kubeflow.org/v1beta1"
KUBEFLOW_NAMESPACE = "kubeflow"  # Katib's examples' namespace (Kubeflow's own); user profiles are kubeflow-user-*
NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_NAME = 40
TRIAL_KINDS = ("PyTorchJob", "TFJob", "Job", "TrainJob")
PARAMETER_TYPES = ("double", "int", "discrete", "categorical")
TOP_FIELDS = {"apiVersion", "kind", "metadata", "spec", "status"}
SPEC_FIELDS = {"algorithm", "earlyStopping", "maxFailedTrialCount", "maxTrialCount", "metricsCollectorSpec",
               "nasConfig", "objective", "parallelTrialCount", "parameters", "resumePolicy", "trialTemplate"}
TEMPLATE_FIELDS = {"configMap", "failureCondition", "primaryContainerName", "primaryPodLabels", "retain",
                   "successCondition", "trialParameters", "trialSpec"}
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "ownerReferences",
              "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")
_PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]+)\}")
_UNSAFE_VALUE = re.compile(r'["\\\x00-\x1f\x7f]')
_META_REF = re.compile(r"\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|Labels\[[^\]]+\]|Annotations\[[^\]]+\])\}")


def job_id_of(name: str) -> str:
    """The jobId of a native Experiment's name (see the module docstring)."""
    return name.replace("-", "_")


def _name_problem(name: Any) -> str | None:
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
        return (f"must be lower-case letters, digits and '-', start with a letter, end with a letter or digit, at "
                f"most {MAX_NAME} characters")
    return None


def named(doc: Any, job_id: str) -> tuple[dict, list[str]]:
    """(`doc` with ``metadata.name`` from `job_id`, the notes to show): the jobId (``mnist_lr_2``) or
    the name itself (``mnist-lr-2``) names the Experiment ``mnist-lr-2``."""
    doc = copy.deepcopy(_mapping(doc, "experiment"))
    meta = doc.setdefault("metadata", {})
    if meta is None:
        meta = doc["metadata"] = {}
    meta = _mapping(meta, "metadata")
    name = job_id.replace("_", "-")
    problem = _name_problem(name)
    if problem:
        raise UserInputError("JOB", f"names the Katib Experiment ({name!r}), so it {problem}; '_' is read as '-'")
    old = meta.get("name")
    meta["name"] = name
    meta.pop("generateName", None)
    if old not in (None, name):
        return doc, [f"note: the Experiment is named {name!r} after JOB (its metadata.name {old!r} is replaced), "
                     f"so its jobId is {job_id_of(name)}"]
    return doc, []


def replaced_namespace(namespace: Any) -> bool:
    """`namespace` is a Kubeflow installation's, which `native_experiment` replaces by the project."""
    return isinstance(namespace, str) and (namespace == KUBEFLOW_NAMESPACE or namespace.startswith("kubeflow-user-"))


def notes(doc: Any, project: str) -> list[str]:
    """What `native_experiment` changes that the user should hear of: a replaced namespace."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if namespace != project and replaced_namespace(namespace):
        return [f"note: the Experiment goes into project {project!r}: its metadata.namespace {namespace!r} is "
                "replaced"]
    return []


def _count(spec: dict, key: str, low: int) -> int | None:
    if key not in spec:
        return None
    value = spec[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UserInputError(f"spec.{key}", f"must be a whole number of at least {low}")
    return value


def _unknown(doc: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(doc) - allowed)
    if extra:
        raise UserInputError(f"{where}{extra[0]}", "is not a field of a kubeflow.org/v1beta1 Experiment")


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise UserInputError(where, "must be a mapping")
    return value


def _check_spec(spec: dict) -> None:
    _unknown(spec, SPEC_FIELDS, "spec.")
    objective = _mapping(spec.get("objective"), "spec.objective")
    if objective.get("type") not in ("maximize", "minimize"):
        raise UserInputError("spec.objective.type", "is required: maximize or minimize")
    if not isinstance(objective.get("objectiveMetricName"), str) or not objective["objectiveMetricName"]:
        raise UserInputError("spec.objective.objectiveMetricName", "is required: the metric the trials report")
    params = spec.get("parameters")
    if not isinstance(params, list) or not params:
        raise UserInputError("spec.parameters", "at least one parameter is required (NAS experiments are not "
                                                "supported here)")
    names: set[str] = set()
    for i, p in enumerate(params):
        where = f"spec.parameters[{i}]"
        p = _mapping(p, where)
        if not isinstance(p.get("name"), str) or not p["name"] or p["name"] in names:
            raise UserInputError(f"{where}.name", "is required and must be unique")
        names.add(p["name"])
        if p.get("parameterType") not in PARAMETER_TYPES:
            raise UserInputError(f"{where}.parameterType", f"must be one of {', '.join(PARAMETER_TYPES)}")
        space = _mapping(p.get("feasibleSpace"), f"{where}.feasibleSpace")
        for key in ("min", "max", "step", "distribution"):
            if key in space and not isinstance(space[key], str):
                raise UserInputError(f"{where}.feasibleSpace.{key}", "must be a string (Katib's API type)")
            if key in space and key != "distribution":
                _safe_value(space[key], f"{where}.feasibleSpace.{key}")
        if "list" in space and not (isinstance(space["list"], list) and all(isinstance(v, str) for v in space["list"])):
            raise UserInputError(f"{where}.feasibleSpace.list", "must be a list of strings")
        for j, value in enumerate(space.get("list") or ()):
            _safe_value(value, f"{where}.feasibleSpace.list[{j}]")
        if p["parameterType"] in ("double", "int") and not ("min" in space and "max" in space) and not space.get("list"):
            raise UserInputError(f"{where}.feasibleSpace", "needs min and max (or a list)")
        if p["parameterType"] in ("discrete", "categorical") and not space.get("list"):
            raise UserInputError(f"{where}.feasibleSpace.list", f"is required for a {p['parameterType']} parameter")
    most, parallel = _count(spec, "maxTrialCount", 1), _count(spec, "parallelTrialCount", 1)
    failed = _count(spec, "maxFailedTrialCount", 0)
    if most is not None and parallel is not None and parallel > most:
        raise UserInputError("spec.parallelTrialCount", "must not be greater than spec.maxTrialCount")
    if most is not None and failed is not None and failed > most:
        raise UserInputError("spec.maxFailedTrialCount", "must not be greater than spec.maxTrialCount")
    _check_template(_mapping(spec.get("trialTemplate"), "spec.trialTemplate"), names)


def _safe_value(value: str, where: str) -> None:
    if _UNSAFE_VALUE.search(value):
        raise UserInputError(where, "must not hold quotes, backslashes or control characters (Katib writes it into "
                                    "the trial's JSON as it is)")


def _check_pods(trial: dict) -> None:
    """The trial's pod templates against `pod_guard` (first finding raised, the others counted)."""
    findings = workload_findings(trial, "spec.trialTemplate.trialSpec")
    if findings:
        (path, message), more = findings[0], findings[1:]
        also = f" (and {len(more)} more: {', '.join(p for p, _ in more[:3])}{', …' if len(more) > 3 else ''})" \
            if more else ""
        raise UserInputError(path, message + also)


def _check_template(template: dict, names: set[str]) -> None:
    _unknown(template, TEMPLATE_FIELDS, "spec.trialTemplate.")
    if "trialSpec" not in template:
        raise UserInputError("spec.trialTemplate.trialSpec", "is required (a trial template from a ConfigMap is "
                                                             "not supported: the platform must see the trial's kind)")
    trial = _mapping(template["trialSpec"], "spec.trialTemplate.trialSpec")
    kind = trial.get("kind")
    if kind not in TRIAL_KINDS or trial.get("apiVersion") != api_version(kind):
        raise UserInputError("spec.trialTemplate.trialSpec.kind", "must be a PyTorchJob or TFJob (kubeflow.org/v1), "
                                                                  "a Job (batch/v1) or a TrainJob "
                                                                  "(trainer.kubeflow.org/v1alpha1)")
    declared: set[str] = set()
    for i, tp in enumerate(template.get("trialParameters") or []):
        where = f"spec.trialTemplate.trialParameters[{i}]"
        tp = _mapping(tp, where)
        if not isinstance(tp.get("name"), str) or not tp["name"]:
            raise UserInputError(f"{where}.name", "is required")
        ref = tp.get("reference", tp["name"])
        if ref not in names and not (isinstance(ref, str) and _META_REF.fullmatch(ref)):
            raise UserInputError(f"{where}.reference", f"{ref!r} is not a parameter of spec.parameters")
        declared.add(tp["name"])
    used = set(_PLACEHOLDER.findall(json.dumps(trial)))
    if used - declared:
        raise UserInputError("spec.trialTemplate.trialParameters", f"does not declare {sorted(used - declared)[0]!r}, "
                                                                   "used in the trialSpec")
    _check_pods(trial)


def native_experiment(doc: Any, project: str, owner: str) -> dict:
    """The manifest to create for a user's Experiment (see the module docstring)."""
    doc = _mapping(doc, "experiment")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "Experiment":
        raise UserInputError("apiVersion", f"must be {API_VERSION} with kind Experiment")
    _unknown(doc, TOP_FIELDS, "")
    meta = copy.deepcopy(_mapping(doc.get("metadata") or {}, "metadata"))
    name = meta.get("name")
    if not name:
        raise UserInputError("metadata.name", "is required (it gives the sweep's jobId; generateName is not enough)")
    problem = _name_problem(name)
    if problem:
        raise UserInputError("metadata.name", problem)
    namespace = meta.get("namespace")
    if namespace not in (None, "", project) and not replaced_namespace(namespace):
        raise UserInputError("metadata.namespace", f"the Experiment goes into project {project}, not {namespace!r}: "
                                                   "leave it out, or submit it in that project (--project)")
    labels = _mapping(meta.get("labels") or {}, "metadata.labels")
    annotations = _mapping(meta.get("annotations") or {}, "metadata.annotations")
    for where, keys in (("metadata.labels", labels), ("metadata.annotations", annotations)):
        ours = sorted(k for k in keys if str(k).startswith("mlplatform.io/") or k in MANAGED_BY)
        if ours:
            raise UserInputError(f"{where}.{ours[0]}", "is set by the platform")
    _check_spec(_mapping(doc.get("spec"), "spec"))
    for key in SERVER_SET:
        meta.pop(key, None)
    meta.pop("generateName", None)
    meta["namespace"] = project
    meta["labels"] = {**labels, **MANAGED_BY, JOB_LABEL: name, OWNER_LABEL: safe_slug(owner, max_length=63)}
    meta["annotations"] = {**annotations, JOB_ID_ANNOTATION: job_id_of(name), OWNER_ANNOTATION: owner}
    return {"apiVersion": API_VERSION, "kind": "Experiment", "metadata": meta, "spec": copy.deepcopy(doc["spec"])}
