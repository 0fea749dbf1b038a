"""The options of a submission as gcloud spells their values (``jobs submit training``'s flags,
``client.submit``'s keyword arguments): `OPTIONS`, each option's name (argparse's ``dest``, the
keyword argument) → the field of the REST create body it sets (`server_ext.jobs.submission`) and
its value type. Pure.

Value types, with gcloud's syntax and messages: each returns the parsed value or raises
`argparse.ArgumentTypeError` (the standard library's; argparse reports it as ``argument --flag:
…``, exit 2; ``client.submit`` names the keyword argument):

- `scale_tier`: gcloud's choices (``basic``, ``basic-gpu``, ``basic-tpu``, ``custom``, ``premium-1``,
  ``standard-1``), any case, ``_`` or ``-`` → the API's enum value (``BASIC_GPU``);
- `accelerator`: ``type=TYPE,count=COUNT``, both keys required, count ≥ 1 (as gcloud's ArgDict);
- `labels`: ``KEY=VALUE,…``; `csv_list`: ``A,B``; `at_least_one`/`non_negative`: integers up to
  `INT32_MAX` (counts become int32 fields of Kubernetes objects); `port`: 1 to 65535;
  `boolean`: true/false/yes/no/1/0; `bucket`: ``gs://BUCKET`` or ``s3://BUCKET``.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, Callable

SCALE_TIERS = {"basic": "BASIC", "basic-gpu": "BASIC_GPU", "basic-tpu": "BASIC_TPU", "custom": "CUSTOM",
               "premium-1": "PREMIUM_1", "standard-1": "STANDARD_1"}
INT32_MAX = 2**31 - 1
_BUCKET = re.compile(r"(gs|s3)://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]/?")


def scale_tier(text: str) -> str:
    key = text.strip().lower().replace("_", "-")
    if key not in SCALE_TIERS:
        raise argparse.ArgumentTypeError(f"Invalid choice: '{text}'. Valid choices are [{', '.join(SCALE_TIERS)}].")
    return SCALE_TIERS[key]


def _pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"Bad syntax for dict arg: [{item}]. Please see `--help` for the "
                                             f"expected KEY=VALUE syntax.")
        out[key.strip()] = value.strip()
    return out


def accelerator(text: str) -> dict[str, str]:
    """gcloud's ``type=nvidia-tesla-v100,count=2`` (both keys required, count ≥ 1)."""
    pairs = _pairs(text)
    unknown = sorted(set(pairs) - {"type", "count"})
    if unknown:
        raise argparse.ArgumentTypeError(f"valid keys are [count, type]; received: {unknown[0]}")
    for key in ("type", "count"):
        if not pairs.get(key):
            raise argparse.ArgumentTypeError(f"Key [{key}] required in dict arg but not provided")
    count = pairs["count"]
    if not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError("The count of the accelerator must be greater than 0.")
    return {"type": pairs["type"], "count": str(int(count))}


def labels(text: str) -> dict[str, str]:
    return _pairs(text)


def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _integer_from(low: int, high: int = INT32_MAX):
    """An argparse type: a whole number from `low` to `high`, refused in gcloud's words."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"Value must be an integer; received: {text}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"Value must be greater than or equal to {low}; received: {text}")
        if value > high:
            raise argparse.ArgumentTypeError(f"Value must be less than or equal to {high}; received: {text}")
        return value
    return parse


at_least_one = _integer_from(1)
non_negative = _integer_from(0)
port = _integer_from(1, 65535)


def boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"Invalid flag value [{text}], expected one of [true, false]")


def bucket(text: str) -> str:
    if not _BUCKET.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a bucket such as gs://my-bucket or s3://my-bucket, got {text!r}")
    return text.rstrip("/")


def text(value: str) -> str:
    return value


# option → (the REST create body's field it sets, its value type); ``job`` and ``user_args`` are
# JOB and the words after ``--`` on the command line, ``job_id`` and ``args`` in ``client.submit``
OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "job": ("jobId", text),
    "labels": ("labels", labels),
    "module_name": ("trainingInput.pythonModule", text),
    "packages": ("trainingInput.packageUris", csv_list),
    "user_args": ("trainingInput.args", csv_list),
    "region": ("trainingInput.region", text),
    "job_dir": ("trainingInput.jobDir", text),
    "scale_tier": ("trainingInput.scaleTier", scale_tier),
    "runtime_version": ("trainingInput.runtimeVersion", text),
    "python_version": ("trainingInput.pythonVersion", text),
    "network": ("trainingInput.network", text),
    "service_account": ("trainingInput.serviceAccount", text),
    "enable_web_access": ("trainingInput.enableWebAccess", boolean),
    "use_chief_in_tf_config": ("trainingInput.useChiefInTfConfig", boolean),
    "kms_key_name": ("trainingInput.encryptionConfig.kmsKeyName", text),
    "master_machine_type": ("trainingInput.masterType", text),
    "master_image_uri": ("trainingInput.masterConfig.imageUri", text),
    "master_accelerator": ("trainingInput.masterConfig.acceleratorConfig", accelerator),
    "worker_machine_type": ("trainingInput.workerType", text),
    "worker_count": ("trainingInput.workerCount", at_least_one),
    "worker_image_uri": ("trainingInput.workerConfig.imageUri", text),
    "worker_accelerator": ("trainingInput.workerConfig.acceleratorConfig", accelerator),
    "parameter_server_machine_type": ("trainingInput.parameterServerType", text),
    "parameter_server_count": ("trainingInput.parameterServerCount", at_least_one),
    "parameter_server_image_uri": ("trainingInput.parameterServerConfig.imageUri", text),
    "parameter_server_accelerator": ("trainingInput.parameterServerConfig.acceleratorConfig", accelerator),
    # the platform's fields beside the Job
    "package_path": ("package.path", text),
    "staging_bucket": ("package.stagingBucket", bucket),
    "credentials": ("mounts.credentials", csv_list),
    "datasets": ("mounts.datasets", csv_list),
}
KMS_PARTS = ("key", "keyring", "location", "project")  # --kms-<part> (kms_<part>): kms_key_name in parts
