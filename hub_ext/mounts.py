"""Credentials and datasets a server may mount, and how a user's choice of them is checked.

Pure: `select(available, credentials, datasets)` validates an (untrusted) choice against what
the chosen project has and returns the environment that points at the files — paths only, never
their content. Rules: every name must exist in the project (else `UserInputError` naming
``credentials[1]`` / ``datasets[0]``); at most one credential of each type, because each type
is exposed through one variable:

- ``gcp-credential`` (a service-account JSON key) → ``GOOGLE_APPLICATION_CREDENTIALS``
- ``aws-credential`` (an AWS shared-credentials file) → ``AWS_SHARED_CREDENTIALS_FILE``

Datasets are listed in ``MLPLATFORM_DATASETS`` as a JSON object of name → directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import UserInputError

CREDENTIAL_ENV = {"gcp-credential": "GOOGLE_APPLICATION_CREDENTIALS", "aws-credential": "AWS_SHARED_CREDENTIALS_FILE"}


@dataclass(frozen=True)
class Credential:
    name: str
    type: str  # "gcp-credential" | "aws-credential"
    path: str


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str


@dataclass(frozen=True)
class Available:
    credentials: tuple[Credential, ...] = ()
    datasets: tuple[Dataset, ...] = ()


def _names(value: Any, field_name: str) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UserInputError(field_name, "must be a list of names")
    return value


def select(available: Available, credentials: Any, datasets: Any, project: str) -> dict[str, str]:
    """The environment for the chosen credentials and datasets of `project`."""
    by_name = {c.name: c for c in available.credentials}
    env: dict[str, str] = {}
    chosen_types: dict[str, str] = {}
    for i, name in enumerate(_names(credentials, "credentials")):
        cred = by_name.get(name)
        if cred is None:
            raise UserInputError(f"credentials[{i}]", f"the project {project!r} has no credential {name!r}", 403)
        if cred.type in chosen_types:
            raise UserInputError(f"credentials[{i}]", f"choose at most one {cred.type} (already chose "
                                                      f"{chosen_types[cred.type]!r})")
        chosen_types[cred.type] = name
        env[CREDENTIAL_ENV[cred.type]] = cred.path
    ds_by_name = {d.name: d for d in available.datasets}
    chosen: dict[str, str] = {}
    for i, name in enumerate(_names(datasets, "datasets")):
        ds = ds_by_name.get(name)
        if ds is None:
            raise UserInputError(f"datasets[{i}]", f"the project {project!r} has no dataset {name!r}", 403)
        chosen[name] = ds.path
    if chosen:
        env["MLPLATFORM_DATASETS"] = json.dumps(chosen, sort_keys=True)
    return env


def metadata(items: Iterable[Credential | Dataset], project: str) -> list[dict[str, str]]:
    """What the API and the form may show: names and types, never paths' content."""
    out = []
    for item in items:
        entry = {"project": project, "name": item.name}
        if isinstance(item, Credential):
            entry["type"] = item.type
        out.append(entry)
    return out
