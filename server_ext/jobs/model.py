"""The `ml.v1` training Job: read from a gcloud ``--config`` file or REST JSON, checked by
Google's rules, kept in the API's own JSON shape. Pure.

- `load_config(text)`: a gcloud ``--config`` file (YAML or JSON) as users have them: a Job-shaped
  mapping with ``trainingInput:`` at the top (``jobId`` and ``labels`` optional).
- `parse_job(doc)`: any Job document → `Job`, every field coerced by the discovery document's
  types (`server_ext.jobs.schema`: unknown fields refused with their path; ``"4"``/``4`` for
  counts; loose booleans; a value of the wrong type stops there) and then checked, every check
  that does not need another's value run, so all the independent mistakes of one document are
  told at once (`hub_ext.core.errors.UserInputErrors`; a lone one is a plain `UserInputError`; a check
  whose input is already wrong, such as a count's type, is skipped):
  - ``jobId``: ``[A-Za-z][A-Za-z0-9_]*``, at most 128 characters;
  - labels: keys and values as Google allows (lower-case letters, digits, ``_`` and ``-``,
    at most 63 characters, keys starting with a letter; at most 64 labels);
  - ``trainingInput`` is required and ``scaleTier`` defaults to ``BASIC``; ``CUSTOM`` needs
    ``masterType`` (or a master image); worker and parameter-server counts need their types and
    types need counts; counts are whole numbers from 0 to `MAX_REPLICAS` (2147483647: replicas are
    int32 in the Kubeflow CRDs); the other tiers refuse the custom fields;
  - an ``acceleratorConfig`` needs a ``type`` (no TPU) and a ``count`` from 1 to `MAX_ACCELERATORS`
    (64 per replica: the most one node offers, 16 whole GPUs or 8 GPUs cut into 7 MIG slices each);
  - code: a ``pythonModule`` with ``packageUris`` (which may be left out when a package ships with
    the job: `parse_job(doc, shipped_package=True)`, ``--package-path``), or a master container image;
    each of ``packageUris`` must be a URI `server_ext.runtimes.fetch` can fetch (``gs://``, ``s3://``,
    ``configmap://``, ``file://`` or a plain path; no two with the same file name), refused as
    ``trainingInput.packageUris[i]`` otherwise;
  - ``hyperparameters``: checked by `server_ext.jobs.hptuning.parse_spec` (so a bad sweep is refused
    here, with its field's path, not only when the job is planned; an empty one is refused too);
  - ``pythonModule``: a dotted Python module name (``trainer.task``), as ``python -m`` takes it;
  - what reaches a process must fit in what Linux passes to one (``execve``; each string at most
    128 KiB, ``MAX_ARG_STRLEN``): ``args`` hold at most `MAX_ARGS_BYTES` in all (UTF-8, one more
    byte each), refused as ``trainingInput.args[i]`` (one alone too long) or ``trainingInput.args``;
    the whole ``trainingInput`` as JSON at most `MAX_TRAINING_JSON` (TensorFlow's ``TF_CONFIG``
    carries it to every replica), refused as ``trainingInput``; every string is free of NUL and
    lone surrogates (`server_ext.jobs.schema`);
  - ``scheduling.maxRunningTime``: a positive Google duration (``7200s``, ``1.5s``);
  - output-only fields (``state``, times, ``trainingOutput``, ``errorMessage``, ``etag``, and the
    platform's ``statusMessage``) are refused on create (`parse_job(doc, create=True)`), accepted
    when reading back a stored job (``statusMessage`` and ``trainingOutput.progress`` then dropped:
    they are not Google's).
- `kubernetes_name(job_id)`: a DNS-1123 label for the Kubernetes objects of a job, collision
  free: a lower-case id with ``_`` as ``-`` when that is lossless, else with a short hash of the
  exact jobId appended (``My_Job`` and ``my_job`` never meet); the jobId itself goes in the
  annotation `JOB_ID_ANNOTATION`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

import yaml

from hub_ext.core.errors import UserInputError, collect
from server_ext.jobs.hptuning import parse_spec
from server_ext.jobs.package_uri import parse_all
from server_ext.jobs.schema import coerce

_ZERO_DURATION = re.compile(r"0*(?:\.0*)?s")
JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
JOB_ID_ANNOTATION = "mlplatform.io/job-id"
# the platform's own output beside ml.v1's: what a job waits for (`server_ext.jobs.kube.waiting`); and
# ``trainingOutput.progress`` (`server_ext.jobs.progress`)
PLATFORM_OUTPUT = ("statusMessage",)
OUTPUT_ONLY = ("state", "createTime", "startTime", "endTime", "errorMessage", "trainingOutput", "etag",
               "jobPosition", "predictionOutput", *PLATFORM_OUTPUT)
MAX_REPLICAS = 2**31 - 1
MAX_ACCELERATORS = 64
MAX_ARGS_BYTES = 64 * 1024
MAX_TRAINING_JSON = 100 * 1024
TIERS = ("BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "CUSTOM")
_CUSTOM_ONLY = ("masterType", "workerType", "parameterServerType", "evaluatorType", "workerCount",
                "parameterServerCount", "evaluatorCount", "workerConfig", "parameterServerConfig", "evaluatorConfig")


@dataclass(frozen=True)
class Job:
    doc: Mapping[str, Any]  # the API's JSON shape (int64 as strings)

    @property
    def job_id(self) -> str:
        return self.doc["jobId"]

    @property
    def training(self) -> Mapping[str, Any]:
        return self.doc["trainingInput"]

    def to_json(self) -> dict:
        return json.loads(json.dumps(self.doc))


def load_config(text: str, source: str = "--config") -> dict:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserInputError(source, f"is not valid YAML or JSON{where}") from None
    if not isinstance(doc, dict):
        raise UserInputError(source, "must be a mapping with trainingInput: at the top")
    return doc


def _google_only(doc: dict) -> dict:
    """`doc` without the platform's own output (`PLATFORM_OUTPUT`, ``trainingOutput.progress``):
    not in Google's schema."""
    out = {k: v for k, v in doc.items() if k not in PLATFORM_OUTPUT}
    if isinstance(out.get("trainingOutput"), dict) and "progress" in out["trainingOutput"]:
        out["trainingOutput"] = {k: v for k, v in out["trainingOutput"].items() if k != "progress"}
    return out


def parse_job(doc: Any, create: bool = True, *, shipped_package: bool = False) -> Job:
    if not isinstance(doc, dict):
        raise UserInputError("job", "must be a JSON object")
    with collect() as problems:
        if create:
            for key in OUTPUT_ONLY:
                if key in doc:
                    problems.add(key, "is output only: the service sets it")
        if "predictionInput" in doc:
            problems.add("predictionInput", "prediction jobs are not supported; submit a training job")
        job = coerce(_google_only(doc), "GoogleCloudMlV1__Job")  # wrong types stop here (all of them told at once)
        job_id = job.get("jobId")
        if not job_id:
            problems.add("jobId", "is required")
        elif len(job_id) > 128 or not JOB_ID.fullmatch(job_id):
            problems.add("jobId", "must start with a letter and hold only letters, digits and '_' "
                                  "(at most 128 characters)")
        _check_labels(job.get("labels") or {}, problems)
        if "trainingInput" not in job:
            problems.add("trainingInput", "is required")
        else:
            job["trainingInput"] = _check_training(job["trainingInput"], shipped_package, problems)
    return Job(job)


def _check_labels(labels: Mapping[str, str], problems: collect) -> None:
    if len(labels) > 64:
        problems.add("labels", "at most 64 labels")
        return
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key):
            problems.add(f"labels.{key}", "keys must start with a lower-case letter and hold only "
                                          "lower-case letters, digits, '_' and '-' (at most 63)")
        elif not LABEL_VALUE.fullmatch(value):
            problems.add(f"labels.{key}", "values may hold only lower-case letters, digits, '_' and '-' "
                                          "(at most 63)")


def _check_training(t: dict, shipped_package: bool, problems: collect) -> dict:
    """`t` with its defaults; every independent mistake is kept in `problems` (a check that needs an
    earlier value is skipped once that value is wrong)."""
    t = dict(t)
    tier = t.setdefault("scaleTier", "BASIC")
    if tier not in TIERS:
        problems.add("trainingInput.scaleTier", "TPU tiers are not offered on this platform; use "
                                                "BASIC_GPU or CUSTOM with GPU accelerators")
    elif tier == "CUSTOM":
        _check_custom(t, problems)
    else:
        for key in _CUSTOM_ONLY:
            if key in t:
                problems.add(f"trainingInput.{key}", f"needs scaleTier CUSTOM (the job has {tier})")
    for role in ("master", "worker", "parameterServer", "evaluator"):
        acc = (t.get(f"{role}Config") or {}).get("acceleratorConfig")
        if acc is not None:
            _check_accelerator(acc, f"trainingInput.{role}Config.acceleratorConfig", problems)
    if t.get("packageUris"):
        problems.check(parse_all, list(t["packageUris"]))
    if "hyperparameters" in t:
        problems.check(parse_spec, t["hyperparameters"])
    if _ZERO_DURATION.fullmatch((t.get("scheduling") or {}).get("maxRunningTime", "1s")):
        problems.add("trainingInput.scheduling.maxRunningTime", "must be a positive duration such as 7200s")
    module = t.get("pythonModule")
    if module and not all(part.isidentifier() for part in module.split(".")):
        problems.add("trainingInput.pythonModule", "must be a dotted Python module name such as "
                                                   "trainer.task (what python -m runs)")
    problems.check(_check_sizes, t)
    has_image = bool((t.get("masterConfig") or {}).get("imageUri"))
    if not has_image:
        if not module:
            problems.add("trainingInput.pythonModule", "is required (or a custom container: "
                                                       "masterConfig.imageUri)")
        if not t.get("packageUris") and not shipped_package:
            problems.add("trainingInput.packageUris", "is required with pythonModule (or use --package-path)")
    return t


def _check_custom(t: Mapping[str, Any], problems: collect) -> None:
    """Scale tier CUSTOM: the master's type, and each other role's count and type together."""
    master_image = (t.get("masterConfig") or {}).get("imageUri")
    if not t.get("masterType") and not master_image:
        problems.add("trainingInput.masterType", "is required with scaleTier CUSTOM")
    for role in ("worker", "parameterServer", "evaluator"):
        count = int(t.get(f"{role}Count", "0"))
        if count < 0:
            problems.add(f"trainingInput.{role}Count", "must be 0 or more")
        elif count > MAX_REPLICAS:
            problems.add(f"trainingInput.{role}Count", f"must be at most {MAX_REPLICAS}")
        elif count and not t.get(f"{role}Type") and not (t.get(f"{role}Config") or {}).get("imageUri"):
            problems.add(f"trainingInput.{role}Type", f"is required when {role}Count is set")
        elif t.get(f"{role}Type") and not count:
            problems.add(f"trainingInput.{role}Count", f"is required (at least 1) with {role}Type")


def _check_accelerator(acc: Mapping[str, Any], where: str, problems: collect) -> None:
    if str(acc.get("type", "")).startswith("TPU"):
        problems.add(f"{where}.type", "TPUs are not offered on this platform; use a GPU or a MIG slice")
    elif not acc.get("type"):
        problems.add(f"{where}.type", "is required")
    count = int(acc.get("count", "1"))
    if count < 1:
        problems.add(f"{where}.count", "must be 1 or more")
    elif count > MAX_ACCELERATORS:
        problems.add(f"{where}.count", f"must be at most {MAX_ACCELERATORS} per replica")


def _check_sizes(t: Mapping[str, Any]) -> None:
    total = 0
    for i, arg in enumerate(t.get("args") or ()):
        size = len(arg.encode()) + 1
        if size > MAX_ARGS_BYTES:
            raise UserInputError(f"trainingInput.args[{i}]", f"is {size - 1} bytes long; the arguments may hold at "
                                                             f"most {MAX_ARGS_BYTES // 1024} KiB in all")
        total += size
    if total > MAX_ARGS_BYTES:
        raise UserInputError("trainingInput.args", f"add up to {total} bytes ({len(t['args'])} arguments, one byte "
                                                   f"more each); at most {MAX_ARGS_BYTES // 1024} KiB in all")
    size = len(json.dumps(t, sort_keys=True))
    if size > MAX_TRAINING_JSON:
        raise UserInputError("trainingInput", f"is {size} bytes as JSON; at most {MAX_TRAINING_JSON // 1024} KiB "
                                              "(each replica gets it in TF_CONFIG)")


def kubernetes_name(job_id: str) -> str:
    """Lossless ids (lower case, no ``__``, not ending in ``_``, short enough) keep their shape and so
    never contain ``--``; every other id is ``<head>--<hash of the exact id>``."""
    simple = job_id.lower().replace("_", "-")
    if job_id == job_id.lower() and "__" not in job_id and not job_id.endswith("_") and len(simple) <= 63:
        return simple
    digest = hashlib.sha256(job_id.encode()).hexdigest()[:10]
    head = re.sub(r"-+", "-", simple)[:50].strip("-")
    return f"{head}--{digest}"
