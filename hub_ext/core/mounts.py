"""Credentials and datasets a server may mount, and how a user's choice of them is checked.

Pure: `choose_mounts(available, credentials, datasets)` makes a spawn's `Mounts` (what a plan carries);
`select(available, credentials, datasets)` validates an (untrusted) choice against what
the chosen project has and returns the environment that points at the files — paths only, never
their content. Rules: every name must exist in the project (else `UserInputError` naming
``credentials[1]`` / ``datasets[0]``); at most one credential of each type, because each type
is exposed through one variable:

- ``gcp-credential`` (a service-account JSON key) → ``GOOGLE_APPLICATION_CREDENTIALS``
- ``aws-credential`` (an AWS shared-credentials file) → ``AWS_SHARED_CREDENTIALS_FILE``, and
  ``AWS_CONFIG_FILE`` when it has a config file (the region)

Datasets are listed in ``MLPLATFORM_DATASETS`` as a JSON object of name → directory. A dataset
that is not ready (still loading, or failed to load) is refused here unless the caller allows
loading ones (`allow_loading`), in which case the runtime waits for it.

``<name>:copy`` asks for a private writable copy of a loaded dataset instead of the shared read-only
volume (`COPY_SUFFIX`): offered only where the dataset's load has a snapshot (`Dataset.snapshot`,
written by the operator where the storage can snapshot), at the same directory; the runtime makes
the copy (a claim from the snapshot) and removes it with the job.

The spawn form lists every project's credentials and datasets (fields ``credential--<project>``
and ``dataset--<project>``), and a server mounts only those of its own project: a tick under
another project than the chosen one is refused by `refuse_other_projects`, naming the item, the
two projects and what to do, rather than dropped without a word.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from hub_ext.core.errors import UserInputError

CREDENTIAL_ENV = {"gcp-credential": "GOOGLE_APPLICATION_CREDENTIALS", "aws-credential": "AWS_SHARED_CREDENTIALS_FILE"}


@dataclass(frozen=True)
class Credential:
    name: str
    type: str  # "gcp-credential" | "aws-credential"
    path: str  # the key / shared-credentials file, where the server sees it
    config_path: str | None = None  # aws-credential: the config file (region), if any
    description: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    path: str  # where the server sees it
    state: str = "ready"  # "ready" | "loading" | "failed"
    message: str = ""
    source: str = ""  # s3://… or gs://…
    description: str = ""
    size: str = ""
    snapshot: str = ""  # the VolumeSnapshot of its current load, if copies can be made ("": not here)
    copy: bool = False  # chosen as a private writable copy (``<name>:copy``)
    claim: str = ""  # the claim to mount, when not the dataset's own (a copy's, named by the runtime)


@dataclass(frozen=True)
class Available:
    credentials: tuple[Credential, ...] = ()
    datasets: tuple[Dataset, ...] = ()


@dataclass(frozen=True)
class Mounts:
    """A spawn's chosen credentials and datasets (`choose_mounts`) and the environment that points at them."""
    credentials: tuple[Credential, ...] = ()
    datasets: tuple[Dataset, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def loading(self) -> tuple[Dataset, ...]:
        """The chosen datasets still loading (accepted only with `allow_loading`)."""
        return tuple(d for d in self.datasets if d.state == "loading")


FORM_FIELDS = {"credential": "credentials", "dataset": "datasets"}  # form field prefix → user_options key


def refuse_other_projects(formdata: Mapping[str, list[str]], project: str | None) -> None:
    """UserInputError (``datasets`` / ``credentials``) when the form's ticks include one under a
    project other than `project`, the chosen one."""
    for key, values in sorted(formdata.items()):
        kind, sep, owner = key.partition("--")
        chosen = [v for v in values or [] if isinstance(v, str) and v]
        if not sep or kind not in FORM_FIELDS or owner == project or not chosen:
            continue
        where = f"the project {project!r}" if project else "another project"
        raise UserInputError(FORM_FIELDS[kind], f"the {kind} {chosen[0]!r} of the project {owner!r} is ticked, but "
                                                f"the server starts in {where} and mounts only that project's "
                                                f"{FORM_FIELDS[kind]}: untick it or choose the project {owner!r}")


COPY_SUFFIX = ":copy"


def split_choice(name: str) -> tuple[str, bool]:
    """A dataset choice → (its name, whether a writable copy is asked for)."""
    return (name[:-len(COPY_SUFFIX)], True) if name.endswith(COPY_SUFFIX) else (name, False)


def _names(value: Any, field_name: str) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UserInputError(field_name, "must be a list of names")
    return value


def select(available: Available, credentials: Any, datasets: Any, project: str,
           allow_loading: bool = False, allow_copies: bool = False) -> dict[str, str]:
    """The environment for the chosen credentials and datasets of `project` (`allow_copies`: the
    caller makes ``:copy`` choices into copies; others refuse them)."""
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
        if cred.config_path:
            env["AWS_CONFIG_FILE"] = cred.config_path
    ds_by_name = {d.name: d for d in available.datasets}
    chosen: dict[str, str] = {}
    for i, choice in enumerate(_names(datasets, "datasets")):
        name, copy = split_choice(choice)
        ds = ds_by_name.get(name)
        if ds is None:
            raise UserInputError(f"datasets[{i}]", f"the project {project!r} has no dataset {name!r}", 403)
        if name in chosen:
            raise UserInputError(f"datasets[{i}]", f"the dataset {name!r} is chosen twice: mount it once, shared "
                                                   f"({name}) or as your own writable copy ({name}{COPY_SUFFIX})")
        if ds.state == "failed" or (ds.state == "loading" and not (allow_loading and not copy)):
            detail = f": {ds.message}" if ds.message else ""
            then = "a copy is made from a loaded dataset; " if copy else ""
            raise UserInputError(f"datasets[{i}]", f"the dataset {name!r} is {ds.state}{detail}; {then}"
                                                   "start without it or try again later", 409)
        if copy and not (allow_copies and ds.snapshot):
            raise UserInputError(f"datasets[{i}]", f"no writable copy of the dataset {name!r} can be made here (its "
                                                   "storage has no volume snapshots, or its snapshot is not ready "
                                                   f"yet); mount it shared and read-only as {name!r}", 409)
        chosen[name] = ds.path
    if chosen:
        env["MLPLATFORM_DATASETS"] = json.dumps(chosen, sort_keys=True)
    return env


def choose_mounts(available: Available, credentials: Any, datasets: Any, project: str,
           allow_loading: bool = False, allow_copies: bool = False) -> Mounts:
    """The chosen credentials and datasets of `project`, checked (`select`), with their environment."""
    env = select(available, credentials, datasets, project, allow_loading, allow_copies)
    return Mounts(tuple(selected(available.credentials, credentials, "credentials")),
                  tuple(selected(available.datasets, datasets, "datasets")), env)


def selected(items: Iterable[Credential | Dataset], names: Any, field_name: str) -> list:
    """The chosen credentials or datasets (after `select` accepted the choice); a dataset chosen
    as ``<name>:copy`` comes with ``copy`` set."""
    by_name = {i.name: i for i in items}
    out = []
    for choice in _names(names, field_name):
        name, copy = split_choice(choice) if field_name == "datasets" else (choice, False)
        if name in by_name:
            out.append(replace(by_name[name], copy=True) if copy else by_name[name])
    return out


def metadata(items: Iterable[Credential | Dataset], project: str) -> list[dict[str, str]]:
    """What the API and the form may show: names, types, descriptions, states and where the files
    are seen (``path``; an AWS credential's ``config_path`` when it has a config file), never
    content. A notebook server rebuilds the choices it may mount for jobs from this
    (`credential_from_metadata`, `dataset_from_metadata`)."""
    out = []
    for item in items:
        entry = {"project": project, "name": item.name, "description": item.description, "path": item.path}
        if isinstance(item, Credential):
            entry["type"] = item.type
            if item.config_path:
                entry["config_path"] = item.config_path
        else:
            entry.update(state=item.state, message=item.message, source=item.source, size=item.size)
            if item.snapshot:
                entry["snapshot"] = item.snapshot
        out.append(entry)
    return out


def credential_from_metadata(entry: dict) -> Credential:
    """The `Credential` a `metadata` entry describes (KeyError/TypeError on a malformed entry)."""
    return Credential(entry["name"], entry["type"], entry["path"], entry.get("config_path") or None,
                      entry.get("description", ""))


def dataset_from_metadata(entry: dict) -> Dataset:
    return Dataset(entry["name"], entry["path"], entry.get("state", "ready"), entry.get("message", ""),
                   entry.get("source", ""), entry.get("description", ""), entry.get("size", ""),
                   entry.get("snapshot", ""))
