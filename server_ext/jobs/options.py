"""Value types of `kubectl ai-platform` flags (argparse ``type=`` callables), with gcloud's syntax
and messages: each returns the parsed value or raises `argparse.ArgumentTypeError`, which argparse
reports as ``argument --flag: …`` (exit 2). Pure.

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
