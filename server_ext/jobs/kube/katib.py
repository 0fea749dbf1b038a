"""A sweep (`JobPlan` with ``trainingInput.hyperparameters``) as a Katib v1beta1 ``Experiment``, and a
Katib ``Trial`` read back as AI Platform hyperparameters. Pure: plain dicts out, no I/O, the plan is
not changed. The mapping and what cannot be mapped are in ``docs/sweeps.md``.

`experiment_manifest(plan, settings)` guarantees:

- ``metadata``: name `plan.name`, namespace the project, and the labels and annotations
  `kubeflow.job_manifest` gives a job (``mlplatform.io/job-id``, ``mlplatform.io/owner``,
  ``mlplatform.io/job-spec``, managed-by, ``mlplatform.io/job``), so
  `server_ext.jobs.kube.status.submitted` and `spec_of` rebuild the ``ml.v1`` Job and its `Spec`;
- the spec (`hptuning.Spec`, AI Platform's defaults already applied) maps to: ``objective`` (goal →
  ``maximize``/``minimize``, ``objectiveMetricName`` = `metric_name` of ``hyperparameterMetricTag``
  (the tag itself where Katib's collectors can read it, else a slug and a hash of it), metric
  strategy ``latest``: AI Platform's finalMetric is the last value reported); ``algorithm`` (`ALGORITHMS`);
  ``earlyStopping`` ``medianstop`` when enabled; ``maxTrialCount``, ``parallelTrialCount``,
  ``maxFailedTrialCount`` (unset: `default_max_failed`); one parameter per AI Platform parameter
  (`katib_parameters`); a log scale is searched in log space (below);
- ``trialTemplate.trialSpec`` is `kubeflow.job_manifest` of the plan (the job kind the plan would
  run: ``PyTorchJob``, ``TFJob`` or ``Job``) without its object metadata (Katib names each trial's
  job after the Trial, and a trial's job must not look like a platform job), with every replica's
  main container running `trial_command` (``sh -c`` and one shell program, no args) that appends
  one ``--<name>=<value>`` per parameter after the job's own arguments, as AI Platform did. Values
  reach the shell only through ``MLPLATFORM_HP_<i>`` environment variables holding
  ``${trialParameters.<name>}`` (Katib substitutes them), always expanded in double quotes: no
  value is ever parsed as shell text. ``primaryContainerName`` is the kind's main container,
  ``primaryPodLabels`` the operator's master label, success/failure conditions are GJSON paths on
  the job's ``status.conditions``; ``retain: true`` keeps each trial's job (and its pods' logs);
- one metrics collector: Katib's ``File`` collector, format ``JSON``, at `METRICS_FILE`, which is
  ``CLOUD_ML_HP_METRIC_FILE`` in every trial container, so ``cloudml-hypertune`` writes there; the
  trial program (`WATCH_PY`) also copies each ``<tag>=<number>`` found in the trainer's output (Katib's
  StdOut convention) into that file as one JSON line, passing the output on unchanged, and echoes
  every line something else writes to that file to stdout, once, so the trial's log holds its whole
  metric series either way (`metric_reports`). The trainer's file is `HYPERTUNE_FILE` and the trial
  program appends every report of the tag (from that file or the output) to `METRICS_FILE` under
  Katib's name (`metric_name`), its time as an RFC 3339 string (Katib v0.19 misreads a number's
  fraction of a second: kubeflow/katib#2672): Katib reads only that file, the log only the user's tag;
- ``UNIT_LOG_SCALE`` (not ``GRID_SEARCH``): Katib searches ``y`` uniformly in ``[ln min, ln max]``
  (a double, no ``distribution``) as parameter ``<name>-log``; the trial passes ``x = exp(y)``
  (INTEGER: rounded), clamped to ``[min, max]``, computed by the trainer image's Python exactly as
  `log_value` computes it. Not ``distribution: logUniform``, which some of Katib's suggestion
  services ignore (goptuna: random, tpe, cmaes, sobol search it linearly); uniform in log space is
  log-uniform whichever service samples it;
- ``UNIT_REVERSE_LOG_SCALE`` (not ``GRID_SEARCH``): Katib searches ``z`` uniformly in
  ``[ln min, ln max]`` (a double, no ``distribution``: goptuna ignores ``logUniform`` here too) as
  parameter ``<name>-reversed-log``; the trial passes ``x = min + (max − y)`` with ``y = exp(z)``
  (INTEGER: ``y`` rounded; exactly ``max`` at ``y ≤ min``, ``min`` at ``y = max``, clamped to
  ``[min, max]``), computed by the trainer image's Python exactly as `reverse_log_value` computes it,
  so `trial_hyperparameters` reports what the trainer was given (an Experiment made before, whose
  ``<name>-reversed`` was ``y`` itself searched with ``logUniform``, is read with `reverse_value`);
- refused with `UserInputError` naming the field: ``resumePreviousJobId`` (Katib resumes an
  Experiment in place, never from another job), a jobId whose name is longer than `MAX_NAME`
  (Katib's trial names must stay DNS labels), a custom container without ``containerCommand``
  (the trial program must know what to run), and categorical values Katib's substitution cannot
  carry faithfully (``"``, ``\\``, ``$``, control characters).

`trial_hyperparameters(spec, trial)` reads a Trial's ``parameterAssignments`` back as AI Platform
showed them (strings, keyed by parameter name, reverse-log undone). `spec_of(experiment)` gives
the `Spec` an Experiment was made from.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import unicodedata
from typing import Any, Mapping

from hub_ext.core.errors import UserInputError
from server_ext.jobs.hptuning import FIELD, Param, Spec, number_text, parse_spec
from server_ext.jobs.kube.kubeflow import (
    CONTAINER,
    OWNER_ANNOTATION,
    RUN_MODULE,
    SPEC_ANNOTATION,
    KubeSettings,
    job_manifest,
    labels,
    literal,
    replica_type,
    spec_annotation,
)
from server_ext.jobs.model import JOB_ID_ANNOTATION
from server_ext.jobs.plan import JobPlan, Replica

API_VERSION = "kubeflow.org/v1beta1"
KIND = "Experiment"
PLURAL = "experiments"
TRIAL_PLURAL = "trials"
EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"  # on every Trial of an Experiment (Katib's)
TRIAL_LABEL = "katib.kubeflow.org/trial"  # on the trial's primary pods (Katib's webhook)
MASTER_POD_LABELS = {"training.kubeflow.org/job-role": "master"}  # the operator's label of the master pod
METRICS_FILE = "/var/log/katib/metrics.json"
HYPERTUNE_FILE = "/var/log/katib/hypertune.json"  # the trainer's own file where the tag is not Katib's name
HP_ENV = "MLPLATFORM_HP_"  # + index of the parameter in the spec
METRIC_TAG_ENV = "MLPLATFORM_HP_METRIC_TAG"
METRIC_NAME_ENV = "MLPLATFORM_HP_METRIC_NAME"
KATIB_FILE_ENV = "MLPLATFORM_KATIB_METRICS_FILE"
METRIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what Katib's File (JSON) and StdOut collectors both read
REVERSED_SUFFIX = "-reversed-log"  # z = ln y, y = min + max - x
OLD_REVERSED_SUFFIX = "-reversed"  # Experiments made before: y itself, with distribution logUniform
LOG_SUFFIX = "-log"
MAX_NAME = 40
ALGORITHMS = {"ALGORITHM_UNSPECIFIED": "bayesianoptimization", "GRID_SEARCH": "grid", "RANDOM_SEARCH": "random"}
EARLY_STOPPING = "medianstop"
KATIB_TYPES = {"DOUBLE": "double", "INTEGER": "int", "DISCRETE": "discrete", "CATEGORICAL": "categorical"}
_CONDITIONS = {"Job": ("Complete", "Failed"), "PyTorchJob": ("Succeeded", "Failed"), "TFJob": ("Succeeded", "Failed")}
_CONFIG = {"master": "masterConfig", "worker": "workerConfig", "ps": "parameterServerConfig",
           "evaluator": "evaluatorConfig"}
_UNSAFE = re.compile(r'["\\$\x00-\x1f\x7f]')

# x = min + (max - y), y = exp(z), for a reverse-log parameter searched as z = ln y (INTEGER: y rounded);
# the same arithmetic as `reverse_log_value`.
REVERSE_PY = ('import math, sys; k, a, b, z = sys.argv[1:]; y = math.exp(float(z)); '
              'a, b, y = (int(a), int(b), round(y)) if k == "INTEGER" else (float(a), float(b), y); '
              'x = b if y <= a else min(max(a + (b - y), a), b); print(x if k == "INTEGER" else repr(x))')

# x = exp(y) for a log-scale parameter searched as y = ln x (INTEGER: rounded), clamped to [min, max];
# the same arithmetic as `log_value`.
LOG_PY = ('import math, sys; k, a, b, y = sys.argv[1:]; a, b = (int(a), int(b)) if k == "INTEGER" else '
          '(float(a), float(b)); x = math.exp(float(y)); x = round(x) if k == "INTEGER" else x; '
          'x = min(max(x, a), b); print(x if k == "INTEGER" else repr(x))')

# Runs the trainer (argv[1:]) and passes its output (stderr merged) through unchanged, plus:
# - for every "<tag>=<number>" in it, appends one JSON line {"<name>": "<value>", "timestamp": "<RFC 3339>"}
#   (cloudml-hypertune's shape, which Katib's File collector reads, with a timestamp it reads right) to
#   Katib's metrics file, <name> being Katib's name for the tag (`metric_name`; $MLPLATFORM_HP_METRIC_NAME,
#   else the tag itself);
# - echoes to stdout every line that something else (cloudml-hypertune) writes to the metrics file, once,
#   so the pod log carries the trial's metric series too (`metric_reports.series`). The file is polled
#   (4 times a second and once more after the trainer ended) and read from where the last read stopped
#   while it only grows; when it was rewritten (cloudml-hypertune rewrites it whole, keeping its last 100
#   reports) it is read whole and only lines not seen before are echoed. Lines already there when the
#   trial started (a restarted container) and the lines it appended itself are not echoed.
# - the trainer's file ($CLOUD_ML_HP_METRIC_FILE) is not Katib's ($MLPLATFORM_KATIB_METRICS_FILE; a trial
#   program that has the same for both still works): each line echoed that reports the tag is also appended
#   to Katib's file under Katib's name (its time as RFC 3339), so Katib reads only that file, which only grows.
# Exits with the trainer's status (128 + signal when killed).
WATCH_PY = r"""import datetime, json, os, re, signal, subprocess, sys, threading, time
tag = os.environ["MLPLATFORM_HP_METRIC_TAG"]
name = os.environ.get("MLPLATFORM_HP_METRIC_NAME") or tag
path = os.environ["CLOUD_ML_HP_METRIC_FILE"]
katib = os.environ.get("MLPLATFORM_KATIB_METRICS_FILE") or path
found = re.compile(r"(?<![\w./-])" + re.escape(tag) + r"\s*=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
lock, own, seen, read, at_start = threading.Lock(), set(), {}, [None, 0, b""], [True]
def emit(data, line=False):
    with lock:
        if line and not at_start[0]:
            data = b"\n" + data
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        at_start[0] = data.endswith(b"\n")
def to_katib(value, when):
    at = datetime.datetime.fromtimestamp(when, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    report = json.dumps({name: value, "timestamp": at})
    if katib == path:
        with lock:
            own.add(report.encode())
    with open(katib, "a") as f:
        f.write(report + "\n")
def translate(line):
    try:
        doc = json.loads(line)
        value = doc[tag]
    except (ValueError, TypeError, KeyError):
        return
    when = doc.get("timestamp")
    to_katib(value, when if isinstance(when, (int, float)) and not isinstance(when, bool) else time.time())
def echo(show=True):
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            key, (_, at, last) = (st.st_ino, st.st_size, st.st_mtime_ns), read
            if key == read[0]:
                return
            start = 0
            if last and st.st_size >= at:
                f.seek(at - len(last))
                start = at if f.read(len(last)) == last else 0
            f.seek(start)
            data = f.read()
    except OSError:
        return
    done = data.rfind(b"\n") + 1
    for line in data[:done].split(b"\n")[:-1]:
        if start == 0 and line in seen:
            continue
        seen[line] = None
        if len(seen) > 100000:
            del seen[next(iter(seen))]
        with lock:
            mine = line in own
            own.discard(line)
        if show and not mine and line.strip():
            emit(line + b"\n", line=True)
            if katib != path:
                translate(line)
    read[:] = [key, start + done, data[max(0, done - 256):done]] if done else [key, at, last]
def poll(stop):
    while not stop.wait(0.25):
        echo()
echo(show=False)
stop = threading.Event()
poller = threading.Thread(target=poll, args=(stop,), daemon=True)
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
for s in (signal.SIGTERM, signal.SIGINT):
    signal.signal(s, lambda number, frame: child.send_signal(number))
poller.start()
for raw in child.stdout:
    emit(raw)
    for m in found.finditer(raw.decode("utf-8", "replace")):
        to_katib(m.group(1), time.time())
code = child.wait()
stop.set()
poller.join()
echo()
sys.exit(128 - code if code < 0 else code)
"""


def metric_name(tag: str) -> str:
    """The name Katib collects for ``hyperparameterMetricTag``: the tag itself when it is one
    (`METRIC_NAME`: letters, digits, ``_``, ``-``, at most 64: ``accuracy``, ``val_loss``); else a
    slug of it and 12 hex digits of its sha256 (``Taxi Model Accuracy`` →
    ``taxi-model-accuracy-<hash>``), so two different tags never share a name (short of a 48-bit
    hash collision) and the same tag always gets the same one."""
    if METRIC_NAME.fullmatch(tag):
        return tag
    folded = unicodedata.normalize("NFKD", tag).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9_]+", "-", folded).strip("-")[:40].rstrip("-") or "metric"
    return f"{slug}-{hashlib.sha256(tag.encode()).hexdigest()[:12]}"


def _q(word: str) -> str:
    return shlex.quote(str(word))


def reversed_params(spec: Spec) -> tuple[Param, ...]:
    """The parameters searched in the transformed space (UNIT_REVERSE_LOG_SCALE, not under grid)."""
    if spec.algorithm == "GRID_SEARCH":
        return ()
    return tuple(p for p in spec.params if p.type in ("DOUBLE", "INTEGER") and p.scale == "UNIT_REVERSE_LOG_SCALE")


def log_params(spec: Spec) -> tuple[Param, ...]:
    """The parameters searched in log space (UNIT_LOG_SCALE, not under grid)."""
    if spec.algorithm == "GRID_SEARCH":
        return ()
    return tuple(p for p in spec.params if p.type in ("DOUBLE", "INTEGER") and p.scale == "UNIT_LOG_SCALE")


def search_name(spec: Spec, param: Param) -> str:
    """The Katib parameter a trial parameter references (``lr``, ``lr-log`` or ``lr-reversed-log``)."""
    if param in reversed_params(spec):
        return param.name + REVERSED_SUFFIX
    return param.name + LOG_SUFFIX if param in log_params(spec) else param.name


def log_bounds(param: Param) -> tuple[str, str]:
    """``[ln min, ln max]``: the searched interval of a log-scale parameter."""
    integer = param.type == "INTEGER"
    low, high = float(number_text(param.min, integer)), float(number_text(param.max, integer))
    return repr(math.log(low)), repr(math.log(high))


def log_value(param: Param, searched: str) -> str:
    """The value the trainer gets for the searched ``y = ln x`` (see `LOG_PY`)."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    a, b = (int(low), int(high)) if integer else (float(low), float(high))
    x = math.exp(float(searched))
    x = min(max(round(x) if integer else x, a), b)
    return str(x) if integer else repr(x)


def reverse_log_value(param: Param, searched: str) -> str:
    """The value the trainer gets for the searched ``z = ln y``: ``min + (max − y)`` (see `REVERSE_PY`)."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    y = math.exp(float(searched))
    a, b, y = (int(low), int(high), round(y)) if integer else (float(low), float(high), y)
    x = b if y <= a else min(max(a + (b - y), a), b)
    return str(x) if integer else repr(x)


def reverse_value(param: Param, searched: str) -> str:
    """What the trainer got for ``y`` itself (an Experiment made before reverse-log parameters were
    searched as ``ln y``): ``min + (max − y)``."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    a, b, y = (int(low), int(high), int(float(searched))) if integer else (float(low), float(high), float(searched))
    x = b if y <= a else min(max(a + (b - y), a), b)
    return str(x) if integer else repr(x)


def default_max_failed(spec: Spec) -> int:
    """``maxFailedTrials`` unset: the sweep fails once a whole wave of parallel trials has failed
    (with one trial at a time: the first failure), never more than ``maxTrials``."""
    return spec.max_failed or min(spec.max_parallel, spec.max_trials)


def katib_parameters(spec: Spec) -> list[dict]:
    out = []
    for p in spec.params:
        space: dict[str, Any]
        if p.type in ("DOUBLE", "INTEGER"):
            integer = p.type == "INTEGER"
            space = {"min": number_text(p.min, integer), "max": number_text(p.max, integer)}
            if p in log_params(spec) or p in reversed_params(spec):
                low, high = log_bounds(p)
                out.append({"name": search_name(spec, p), "parameterType": "double",
                            "feasibleSpace": {"min": low, "max": high}})
                continue
        elif p.type == "DISCRETE":
            space = {"list": [number_text(v) for v in p.values]}
        else:
            space = {"list": list(p.values)}
        out.append({"name": search_name(spec, p), "parameterType": KATIB_TYPES[p.type], "feasibleSpace": space})
    return out


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
        if not _runs_module(plan, r) and not r.command:
            raise UserInputError(f"trainingInput.{_CONFIG[r.role]}.containerCommand",
                                 "a sweep runs each trial's container command itself: give the image's "
                                 "entry point as containerCommand")


def _runs_module(plan: JobPlan, replica: Replica) -> bool:
    return bool(plan.python_module) and not (replica.command or replica.args)


def trainer_argv(plan: JobPlan, replica: Replica) -> list[str]:
    """What the replica runs as a plain job (before Kubernetes' ``$(VAR)`` escaping)."""
    if _runs_module(plan, replica):
        return ["sh", "-c", RUN_MODULE, plan.python_module or "", *plan.args]
    return [*replica.command, *(replica.args or plan.args)]


def trial_program(spec: Spec, argv: list[str]) -> str:
    """The shell program of a trial container (plain text, before `literal`): a subshell, so that
    Katib's webhook may append ``&& echo completed > …`` to it and get the trainer's status."""
    lines = ["(", "set -eu", "py=", "for c in python3 python; do",
             '  if command -v "$c" >/dev/null 2>&1; then py=$c; break; fi', "done"]
    reversed_, logs = reversed_params(spec), log_params(spec)
    if reversed_:
        lines.append('[ -n "$py" ] || { echo "mlplatform: UNIT_REVERSE_LOG_SCALE needs python in the trainer '
                     'image" >&2; exit 2; }')
    if logs and not reversed_:  # (the check above stops a reverse-log sweep without python already)
        lines.append('[ -n "$py" ] || { echo "mlplatform: UNIT_LOG_SCALE needs python in the trainer '
                     'image" >&2; exit 2; }')
    for i, p in enumerate(spec.params):
        if p in reversed_ or p in logs:
            integer = p.type == "INTEGER"
            var = f"{HP_ENV}{i}"
            lines.append(f'{var}=$("$py" -c {_q(REVERSE_PY if p in reversed_ else LOG_PY)} {p.type} '
                         f'{number_text(p.min, integer)} {number_text(p.max, integer)} "${var}")')
    lines.append("set -- " + " ".join(_q(w) for w in argv))
    if spec.params:
        lines.append('set -- "$@" ' + " ".join(f'{_q("--" + p.name + "=")}"${HP_ENV}{i}"'
                                               for i, p in enumerate(spec.params)))
    if metric_name(spec.metric) != spec.metric:
        lines.append('[ -n "$py" ] || { echo "mlplatform: hyperparameterMetricTag is not a Katib metric name: '
                     'translating it needs python in the trainer image" >&2; exit 2; }')
    lines += ['mkdir -p "${CLOUD_ML_HP_METRIC_FILE%/*}"',
              f'if [ -n "$py" ]; then exec "$py" -u -c {_q(WATCH_PY)} "$@"; fi',
              'echo "mlplatform: no python in the image: only metrics written to $CLOUD_ML_HP_METRIC_FILE are '
              'collected" >&2',
              f'export CLOUD_ML_HP_METRIC_FILE="${KATIB_FILE_ENV}"', 'exec "$@"', ")"]
    return "\n".join(lines)


def trial_command(spec: Spec, argv: list[str]) -> list[str]:
    """The trial container's ``command`` as Kubernetes must receive it."""
    return ["sh", "-c", *literal([trial_program(spec, argv)])]


def _pod_templates(manifest: dict, plan: JobPlan) -> list[tuple[Replica, dict]]:
    kind = manifest["kind"]
    if kind == "Job":
        return [(plan.replicas[0], manifest["spec"]["template"])]
    specs = manifest["spec"]["pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"]
    return [(r, specs[replica_type(kind, r.role)]["template"]) for r in plan.replicas]


def _metric_env(spec: Spec) -> list[dict]:
    """Where the trainer reports and what Katib collects: the trainer's own file (`HYPERTUNE_FILE`),
    translated by `WATCH_PY` into Katib's (`METRICS_FILE`) under Katib's name, with RFC 3339
    timestamps: Katib v0.19's File collector reads a number's fraction of a second as nanoseconds
    (kubeflow/katib#2672), so the "latest" of several reports within a second could be an earlier one."""
    name = metric_name(spec.metric)
    env = [{"name": METRIC_TAG_ENV, "value": literal([spec.metric])[0]}]
    return [{"name": "CLOUD_ML_HP_METRIC_FILE", "value": HYPERTUNE_FILE}, *env,
            {"name": METRIC_NAME_ENV, "value": name}, {"name": KATIB_FILE_ENV, "value": METRICS_FILE}]


def trial_spec(plan: JobPlan, settings: KubeSettings) -> dict:
    """The trial template: the plan's job object running `trial_command` in every main container."""
    spec = plan.sweep
    assert spec is not None
    job = job_manifest(plan, settings)
    job.pop("metadata")
    for replica, template in _pod_templates(job, plan):
        main = template["spec"]["containers"][0]
        main["command"] = trial_command(spec, trainer_argv(plan, replica))
        main.pop("args", None)
        main["env"] = [*main["env"],
                       *({"name": f"{HP_ENV}{i}", "value": f"${{trialParameters.{p.name}}}"}
                         for i, p in enumerate(spec.params)),
                       *_metric_env(spec)]
    return job


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
        template = {"primaryPodLabels": dict(MASTER_POD_LABELS), **template}
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


def assignments(trial: Mapping) -> dict[str, str]:
    """A Trial's ``spec.parameterAssignments`` as a dict (Katib parameter name → value)."""
    items = ((trial.get("spec") or {}).get("parameterAssignments")) or []
    return {str(a["name"]): str(a.get("value", "")) for a in items if isinstance(a, dict) and "name" in a}


def trial_hyperparameters(spec: Spec | None, trial: Mapping) -> dict[str, str]:
    """AI Platform's ``hyperparameters`` of a trial: what its trainer got as ``--name=value``
    (reverse-log undone; INTEGER values as whole numbers). Without a `spec`: the assignments as
    they are. Parameters not assigned (yet) are left out."""
    given = assignments(trial)
    if spec is None:
        return given
    out = {}
    for p in spec.params:
        value = given.get(search_name(spec, p))
        if value is None and p in log_params(spec) and p.name in given:
            out[p.name] = given[p.name]  # an Experiment made before log scales were searched as ln x
            continue
        transform = reverse_log_value if p in reversed_params(spec) else log_value
        if value is None and p in reversed_params(spec):  # made before reverse-log was searched as ln y
            value, transform = given.get(p.name + OLD_REVERSED_SUFFIX), reverse_value
        if value is None:
            continue
        if p in reversed_params(spec) or p in log_params(spec):
            try:
                value = transform(p, value)
            except (ValueError, OverflowError):
                pass
        elif p.type == "INTEGER":
            try:
                f = float(value)
                value = str(int(f)) if math.isfinite(f) and f.is_integer() else value
            except ValueError:
                pass
        out[p.name] = value
    return out
