"""What a notebook `submit` call sends: its arguments read as ``kubectl ai-platform jobs submit
training`` reads its flags, into one `Submission` (`client.notebook` sends it). Pure but for reading
a config file, the clock, and the ids made up so far in this process.

Guarantees:

- `submission_of(config, package_path, flags, …)`: `config` is a Job dict, a YAML/JSON file path or
  YAML text (a Katib Experiment too); each keyword argument is read as its flag's value (gcloud's
  syntax; a dict is ``KEY=VALUE,…``, a list ``A,B``); a mistake is `UserInputError` naming the
  argument (``module_name``, with the closest argument name for a misspelt one) or ``<field> in
  config``; the CLI's own flags (``dry_run``, ``stream_logs``, ``project``, …) are not arguments.
- A job needs no id: without ``job_id=`` (or a ``jobId`` in the config, or an Experiment's
  ``metadata.name``) it is named `default_job_id`'s ``<module's last part>_<YYYYmmdd_HHMMSS>`` (UTC;
  ``trainer.task`` → ``task_20261203_155402``), as ``local train`` names its runs; one already given
  out by this process gets ``_2``, ``_3``… (`fresh`). Such an id is a `MadeUpId`, so the caller may
  take the next suffix when the server has it already, never for a name the user chose.
- A Katib Experiment submitted as it is is changed as the CLI changes it (`native_experiment.named`:
  JOB names it; `notes` gets what was changed); `experiment_notes` says what the server changes
  (a ``kubeflow`` namespace becomes the project).
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import os
import pathlib
import re
import threading
from dataclasses import replace
from typing import Any, Mapping

from server_ext.errors import UserInputError
from server_ext.jobs.model import load_config
from server_ext.jobs.options import OPTIONS
from server_ext.jobs.submission import Submission, attributed, from_options, given_fields

_FORBIDDEN_FLAGS = {"dry_run", "stream_logs", "async_", "context", "local", "project", "config"}
_JOB_ID_TIME = "_%Y%m%d_%H%M%S"
_issued: set[str] = set()  # the job ids `submission_of` made up in this process
_lock = threading.Lock()


def default_job_id(module: str | None, now: datetime.datetime) -> str:
    """``<module's last part>_<YYYYmmdd_HHMMSS>`` in UTC (``trainer.task`` → ``task_20261203_155402``),
    valid per the jobId rule (``[A-Za-z][A-Za-z0-9_]*``, at most 128): other characters become
    ``_``, a leading non-letter is dropped, ``job`` when nothing is left. Pure."""
    last = (module or "").strip().rsplit(".", 1)[-1]
    stem = re.sub(r"^[^A-Za-z]+", "", re.sub(r"[^A-Za-z0-9_]", "_", last)) or "job"
    stamp = now.astimezone(datetime.timezone.utc).strftime(_JOB_ID_TIME)
    return stem[: 128 - len(stamp) - 3] + stamp  # room for a "_NN" suffix


class MadeUpId(str):
    """A job id `submission_of` made up (no ``job_id`` and no ``jobId`` in the config): `Client.submit`
    may take the next suffix when it is taken, never for a name the user chose."""


def fresh(job_id: str) -> str:
    """`job_id`, or with ``_2``, ``_3``… when this process already gave it out (two submits in one second)."""
    with _lock:
        fresh, n = job_id, 1
        while fresh in _issued:
            n += 1
            fresh = f"{job_id}_{n}"
        _issued.add(fresh)
        return fresh


def experiment_notes(doc: Any, project: str) -> list[str]:
    """What the server changes in a Katib Experiment `doc` submitted to `project` (its namespace)."""
    if not (isinstance(doc, Mapping) and doc.get("kind") == "Experiment"):
        return []
    from server_ext.jobs.kube.native_experiment import notes

    return notes(doc, project)


_KWARGS = {"job": "job_id", "user_args": "args"}  # options submit() names otherwise (the CLI's JOB, -- words)
_KMS_KWARGS = ("kms_key", "kms_keyring", "kms_location", "kms_project")
_TAKEN = {name for name in OPTIONS if name not in ("job", "user_args", "package_path", "kms_key_name")}


def _option(name: str, value: Any) -> Any:
    """A keyword argument's value read as its flag's (gcloud's syntax; a dict is ``KEY=VALUE,…``, a
    list ``A,B``), or `UserInputError` naming the argument."""
    if name not in _TAKEN and name not in _KMS_KWARGS:
        close = difflib.get_close_matches(name, sorted(_TAKEN | {*_KMS_KWARGS, "job_id", "args"}), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserInputError(name, f"is not an argument of submit(){hint}")
    if isinstance(value, Mapping):
        value = ",".join(f"{k}={v}" for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    try:
        return OPTIONS[name][1](str(value)) if name in OPTIONS else str(value)
    except argparse.ArgumentTypeError as e:
        raise UserInputError(name, str(e)) from None


def submission_of(config: Any, package_path: Any, flags: Mapping[str, Any], project: str = "",
                  now: datetime.datetime | None = None, notes: list[str] | None = None) -> Submission:
    """The `Submission` of a `submit` call, read as ``kubectl ai-platform jobs submit training``
    reads its flags (`submission.from_options`; a mistake names the argument, ``module_name``, or
    ``<field> in config``); without a job id (``job_id`` or the config's ``jobId``), `default_job_id`
    of the module at `now` (default: the clock). Pure but for reading a config file, the clock, and
    the ids made up so far. `notes` gets what was changed in a Katib Experiment's config (its
    ``metadata.name``, replaced after ``job_id``)."""
    flags = dict(flags)
    bad = sorted(set(flags) & _FORBIDDEN_FLAGS)
    if bad:
        raise UserInputError(bad[0], "is not an argument of submit()")
    text = _config_text(config)
    job_id = flags.pop("job_id", None) or flags.pop("job", None)
    loaded: Any = load_config(text, "config") if text is not None else None
    if job_id is None and loaded is not None:
        job_id = loaded.get("jobId") or ((loaded.get("metadata") or {}).get("name") or "").replace("-", "_") or None
    if not job_id:
        module = flags.get("module_name")
        if not module and isinstance(loaded, Mapping) and isinstance(loaded.get("trainingInput"), Mapping):
            module = loaded["trainingInput"].get("pythonModule")
        when = now or datetime.datetime.now(datetime.timezone.utc)
        job_id = MadeUpId(fresh(default_job_id(module if isinstance(module, str) else None, when)))
    options: dict[str, Any] = {"job": str(job_id)}
    if package_path is not None:
        options["package_path"] = str(package_path)
    user_args = flags.pop("args", None)
    if user_args is not None:
        options["user_args"] = [str(a) for a in user_args]
    for name, value in flags.items():
        if value is not None and value is not False:
            options[name] = _option(name, value)
    try:
        sub = from_options(options, loaded, project, notes)
    except UserInputError as e:  # named as submit()'s arguments: trainingInput.pythonModule → module_name
        raise attributed(e, given_fields(options), loaded, lambda name: _KWARGS.get(name, name),
                         lambda field: f"{field} in config") from None
    if isinstance(job_id, MadeUpId):
        sub = replace(sub, job={**sub.job, "jobId": job_id})
    return sub


def _config_text(config: Any) -> str | None:
    if config is None:
        return None
    if isinstance(config, Mapping):
        return json.dumps(dict(config))
    if isinstance(config, os.PathLike) or (isinstance(config, str) and "\n" not in config and ":" not in config):
        path = pathlib.Path(config)
        try:
            return path.read_text()
        except OSError as e:
            raise UserInputError("config", f"cannot read {path}: {e.strerror or e}") from None
    if isinstance(config, str):
        return config
    raise UserInputError("config", "must be a dict, a file path or YAML text")
