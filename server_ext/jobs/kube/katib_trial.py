"""A sweep's trial: the job Katib runs for each Trial, and the trial program its main containers run.
Pure: plain dicts and text out, no I/O, the plan is not changed.

`trial_spec(plan, settings)` guarantees:

- it is `kubeflow.job_manifest` of the plan (the job kind the plan would run: ``PyTorchJob``,
  ``TFJob`` or ``Job``), or `trainjob.trainjob_manifest` for a plan on Trainer v2 (its
  ``spec.trainer`` is the main container of every node), without its object metadata (Katib names each trial's job after the Trial,
  and a trial's job must not look like a platform job);
- every replica's main container runs `trial_command` (``sh -c`` and one shell program, no args),
  which appends one ``--<name>=<value>`` per parameter after the job's own arguments, as AI Platform
  did. Values reach the shell only through ``MLPLATFORM_HP_<i>`` environment variables holding
  ``${trialParameters.<name>}`` (Katib substitutes them), always expanded in double quotes: no value
  is ever parsed as shell text; log and reverse-log parameters are computed back from what Katib
  searched by the image's Python (`katib_params.LOG_PY`, `katib_params.REVERSE_PY`);
- metrics: ``CLOUD_ML_HP_METRIC_FILE`` in every trial container is the trainer's own file
  (`HYPERTUNE_FILE`), so ``cloudml-hypertune`` writes there; the trial program (`WATCH_PY`) also copies
  each ``<tag>=<number>`` found in the trainer's output (Katib's StdOut convention) as one JSON line,
  passing the output on unchanged, and echoes every line something else writes to the trainer's file
  to stdout, once, so the trial's log holds its whole metric series either way (`metric_reports`).
  Every report of the tag (from that file or the output) is appended to `METRICS_FILE` (Katib's
  ``File`` collector, format ``JSON``) under Katib's name (`metric_name`), its time as an RFC 3339
  string (Katib v0.19 misreads a number's fraction of a second: kubeflow/katib#2672): Katib reads
  only that file, the log only the user's tag.

`metric_name(tag)` is Katib's name for ``hyperparameterMetricTag``: the tag itself where Katib's
collectors can read it, else a slug and a hash of it (never the same for two tags).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import unicodedata

from server_ext.jobs.hptuning import Spec, number_text
from server_ext.jobs.kube.katib_params import LOG_PY, REVERSE_PY, UNIT_PY, log_params, reversed_params, unit_params
from server_ext.jobs.kube.kubeflow import RUN_MODULE, KubeSettings, job_manifest, literal, replica_type
from server_ext.jobs.kube.trainjob import trainjob_manifest
from server_ext.jobs.plan import JobPlan, Replica

METRICS_FILE = "/var/log/katib/metrics.json"
HYPERTUNE_FILE = "/var/log/katib/hypertune.json"  # the trainer's own file where the tag is not Katib's name
HP_ENV = "MLPLATFORM_HP_"  # + index of the parameter in the spec
METRIC_TAG_ENV = "MLPLATFORM_HP_METRIC_TAG"
METRIC_NAME_ENV = "MLPLATFORM_HP_METRIC_NAME"
KATIB_FILE_ENV = "MLPLATFORM_KATIB_METRICS_FILE"
METRIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what Katib's File (JSON) and StdOut collectors both read

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


def runs_module(plan: JobPlan, replica: Replica) -> bool:
    return bool(plan.python_module) and not (replica.command or replica.args)


def trainer_argv(plan: JobPlan, replica: Replica) -> list[str]:
    """What the replica runs as a plain job (before Kubernetes' ``$(VAR)`` escaping)."""
    if runs_module(plan, replica):
        return ["sh", "-c", RUN_MODULE, plan.python_module or "", *plan.args]
    return [*replica.command, *(replica.args or plan.args)]


def trial_program(spec: Spec, argv: list[str]) -> str:
    """The shell program of a trial container (plain text, before `literal`): a subshell, so that
    Katib's webhook may append ``&& echo completed > …`` to it and get the trainer's status."""
    lines = ["(", "set -eu", "py=", "for c in python3 python; do",
             '  if command -v "$c" >/dev/null 2>&1; then py=$c; break; fi', "done"]
    reversed_, logs, units = reversed_params(spec), log_params(spec), unit_params(spec)
    if units:
        lines.append('[ -n "$py" ] || { echo "mlplatform: Bayesian optimisation (the default algorithm) of '
                     'DOUBLE parameters needs python in the trainer image" >&2; exit 2; }')
    if reversed_:
        lines.append('[ -n "$py" ] || { echo "mlplatform: UNIT_REVERSE_LOG_SCALE needs python in the trainer '
                     'image" >&2; exit 2; }')
    if logs and not reversed_:  # (the check above stops a reverse-log sweep without python already)
        lines.append('[ -n "$py" ] || { echo "mlplatform: UNIT_LOG_SCALE needs python in the trainer '
                     'image" >&2; exit 2; }')
    for i, p in enumerate(spec.params):
        if p in units:
            program = f"{_q(UNIT_PY)} {p.type} {p.scale}"
        elif p in reversed_ or p in logs:
            program = f"{_q(REVERSE_PY if p in reversed_ else LOG_PY)} {p.type}"
        else:
            continue
        integer = p.type == "INTEGER"
        var = f"{HP_ENV}{i}"
        lines.append(f'{var}=$("$py" -c {program} {number_text(p.min, integer)} {number_text(p.max, integer)} '
                     f'"${var}")')
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
    """The trial template: the plan's job object running `trial_command` in every main container
    (a TrainJob's trainer, for a plan on Trainer v2: its nodes are alike)."""
    spec = plan.sweep
    assert spec is not None
    hp_env = [{"name": f"{HP_ENV}{i}", "value": f"${{trialParameters.{p.name}}}"} for i, p in enumerate(spec.params)]
    job = trainjob_manifest(plan, settings) if plan.trainer_v2 else job_manifest(plan, settings)
    job.pop("metadata")
    mains = [(plan.replicas[0], job["spec"]["trainer"])] if plan.trainer_v2 else \
        [(replica, template["spec"]["containers"][0]) for replica, template in _pod_templates(job, plan)]
    for replica, main in mains:
        main["command"] = trial_command(spec, trainer_argv(plan, replica))
        main.pop("args", None)
        main["env"] = [*main["env"], *hp_env, *_metric_env(spec)]
    return job
