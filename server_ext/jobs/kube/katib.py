"""A sweep (`JobPlan` with ``trainingInput.hyperparameters``) as a Katib v1beta1 ``Experiment``. Pure:
plain dicts out, no I/O, the plan is not changed. The mapping and what cannot be mapped are in
``docs/sweeps.md``; the search space and a Trial read back: `katib_params`; each trial's job and the
program it runs: `katib_trial`.

`experiment_manifest(plan, settings)` guarantees:

- ``metadata``: name `plan.name`, namespace the project, and the labels and annotations
  `kubeflow.job_manifest` gives a job (``mlplatform.io/job-id``, ``mlplatform.io/owner``,
  ``mlplatform.io/job-spec``, managed-by, ``mlplatform.io/job``), so
  `server_ext.jobs.kube.status.submitted` and `spec_of` rebuild the ``ml.v1`` Job and its `Spec`;
- the spec (`hptuning.Spec`, AI Platform's defaults already applied) maps to: ``objective`` (goal →
  ``maximize``/``minimize``, ``objectiveMetricName`` = `katib_trial.metric_name` of
  ``hyperparameterMetricTag``, metric strategy ``latest``: AI Platform's finalMetric is the last value
  reported); ``algorithm`` (`ALGORITHMS`); ``earlyStopping`` ``medianstop`` when enabled;
  ``maxTrialCount``, ``parallelTrialCount``, ``maxFailedTrialCount`` (unset: `default_max_failed`);
  one parameter per AI Platform parameter (`katib_params.katib_parameters`: a log scale is searched
  in log space);
- ``trialTemplate``: ``trialSpec`` is `katib_trial.trial_spec` (the plan's job, its main containers
  running the trial program), ``trialParameters`` name each parameter's Katib parameter
  (`katib_params.search_name`); ``primaryContainerName`` is the kind's main container,
  ``primaryPodLabels`` the operator's master label (a TrainJob's: node 0 of its JobSet's ``node``
  job, `TRAINJOB_POD_LABELS`), success/failure conditions are GJSON paths on
  the job's ``status.conditions``; ``retain: true`` keeps each trial's job (and its pods' logs);
- one metrics collector: Katib's ``File`` collector, format ``JSON``, at `katib_trial.METRICS_FILE`
  (what the trial program writes there: `katib_trial`);
- refused with `UserInputError` naming the field: ``resumePreviousJobId`` (Katib resumes an
  Experiment in place, never from another job), a jobId whose name is longer than `MAX_NAME`
  (Katib's trial names must stay DNS labels), a custom container without ``containerCommand``
  (the trial program must know what to run), and categorical values Katib's substitution cannot
  carry faithfully (``"``, ``\\``, ``$``, control characters).

`spec_of(experiment)` gives the `Spec` an Experiment was made from.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from hub_ext.core.errors import UserInputError
from server_ext.jobs.hptuning import FIELD, Spec, parse_spec
from server_ext.jobs.kube.katib_params import katib_parameters, search_name
from server_ext.jobs.kube.katib_trial import METRICS_FILE, metric_name, runs_module, trial_spec
from server_ext.jobs.kube.trainjob import STEP
from server_ext.jobs.kube.kubeflow import (
    CONTAINER,
    OWNER_ANNOTATION,
    SPEC_ANNOTATION,
    KubeSettings,
    labels,
    spec_annotation,
)
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.plan import JobPlan

API_VERSION = "kubeflow.org/v1beta1"
KIND = "Experiment"
PLURAL = "experiments"
TRIAL_PLURAL = "trials"
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"  # on every Trial of an Experiment (Katib's)
TRIAL_LABEL = "katib.kubeflow.org/trial"  # on the trial's primary pods (Katib's webhook)
MASTER_POD_LABELS = {"training.kubeflow.org/job-role": "master"}  # the operator's label of the master pod
MAX_NAME = 40
ALGORITHMS = {"ALGORITHM_UNSPECIFIED": "bayesianoptimization", "GRID_SEARCH": "grid", "RANDOM_SEARCH": "random"}
EARLY_STOPPING = "medianstop"
_CONDITIONS = {"Job": ("Complete", "Failed"), "PyTorchJob": ("Succeeded", "Failed"), "TFJob": ("Succeeded", "Failed"),
               "TrainJob": ("Complete", "Failed")}
# a TrainJob's primary pod: node 0 of the runtime's one replicated job (`trainjob.STEP`), Katib's default
TRAINJOB_POD_LABELS = {"jobset.sigs.k8s.io/replicatedjob-name": STEP, "batch.kubernetes.io/job-completion-index": "0"}
_CONFIG = {"master": "masterConfig", "worker": "workerConfig", "ps": "parameterServerConfig",
           "evaluator": "evaluatorConfig"}
_UNSAFE = re.compile(r'["\\$\x00-\x1f\x7f]')


def default_max_failed(spec: Spec) -> int:
    """``maxFailedTrials`` unset: the sweep fails once a whole wave of parallel trials has failed
    (with one trial at a time: the first failure), never more than ``maxTrials``."""
    return spec.max_failed or min(spec.max_parallel, spec.max_trials)


def _check(plan: JobPlan, spec: Spec) -> None:
    if spec.resume_from:
        raise UserInputError(f"{FIELD}.resumePreviousJobId",
                             "cannot be mapped on Kubernetes: Katib resumes an Experiment in place, not from "
                             "another job; submit the sweep without it (the local runtime supports it)")
    if len(plan.name) > MAX_NAME:
        raise UserInputError("jobId", f"a sweep's jobId must give a Kubernetes name of at most {MAX_NAME} "
                                      f"characters ({plan.name!r} has {len(plan.name)}): Katib names trials after it")
    names = {p.name for p in spec.params}
    for i, p in enumerate(spec.params):
        if search_name(spec, p) != p.name and search_name(spec, p) in names:
            raise UserInputError(f"{FIELD}.params[{i}].parameterName",
                                 f"{search_name(spec, p)!r} is also a parameter; rename one")
        if p.type == "CATEGORICAL":
            for j, v in enumerate(p.values):
                if _UNSAFE.search(v):
                    raise UserInputError(f"{FIELD}.params[{i}].categoricalValues[{j}]",
                                         'Katib cannot pass a value with ", \\, $ or control characters '
                                         "to a trial unchanged")
    for r in plan.replicas:
        if not runs_module(plan, r) and not r.command:
            raise UserInputError(f"trainingInput.{_CONFIG[r.role]}.containerCommand",
                                 "a sweep runs each trial's container command itself: give the image's "
                                 "entry point as containerCommand")


def experiment_manifest(plan: JobPlan, settings: KubeSettings) -> dict:
    """The Katib Experiment of a sweep plan (see the module docstring for what it guarantees)."""
    spec = plan.sweep
    if spec is None:
        raise ValueError(f"job {plan.job.job_id} is not a sweep (no trainingInput.hyperparameters)")
    _check(plan, spec)
    kind = plan.kind
    success, failure = _CONDITIONS[kind]
    template: dict[str, Any] = {
        "primaryContainerName": CONTAINER[kind],
        "successCondition": f'status.conditions.#(type=="{success}")#|#(status=="True")#',
        "failureCondition": f'status.conditions.#(type=="{failure}")#|#(status=="True")#',
        "retain": True,
        "trialParameters": [{"name": p.name, "reference": search_name(spec, p),
                             "description": f"--{p.name} ({p.type}, {p.scale})"} for p in spec.params],
        "trialSpec": trial_spec(plan, settings),
    }
    if kind != "Job":
        template = {"primaryPodLabels": dict(TRAINJOB_POD_LABELS if kind == "TrainJob" else MASTER_POD_LABELS),
                    **template}
    body: dict[str, Any] = {
        "objective": {"type": spec.goal.lower(), "objectiveMetricName": metric_name(spec.metric),
                      "metricStrategies": [{"name": metric_name(spec.metric), "value": "latest"}]},
        "algorithm": {"algorithmName": ALGORITHMS[spec.algorithm]},
    }
    if spec.early_stopping:
        body["earlyStopping"] = {"algorithmName": EARLY_STOPPING}
    body.update({
        "maxTrialCount": spec.max_trials, "parallelTrialCount": spec.max_parallel,
        "maxFailedTrialCount": default_max_failed(spec),
        "resumePolicy": "Never",
        "metricsCollectorSpec": {"collector": {"kind": "File"},
                                 "source": {"fileSystemPath": {"kind": "File", "path": METRICS_FILE,
                                                               "format": "JSON"}}},
        "parameters": katib_parameters(spec),
        "trialTemplate": template,
    })
    metadata = {"name": plan.name, "namespace": plan.project, "labels": labels(plan),
                "annotations": {JOB_ID_ANNOTATION: plan.job.job_id, OWNER_ANNOTATION: plan.owner,
                                SPEC_ANNOTATION: spec_annotation(dict(plan.job.doc))}}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": body}


def spec_of(experiment: Mapping) -> Spec | None:
    """The `Spec` an Experiment was made from (its job-spec annotation); None when it has none
    (e.g. a user's own Experiment) or it no longer parses."""
    annotations = (experiment.get("metadata") or {}).get("annotations") or {}
    try:
        doc = json.loads(annotations[SPEC_ANNOTATION])
        return parse_spec(doc["trainingInput"]["hyperparameters"])
    except (KeyError, TypeError, ValueError, UserInputError):
        return None
