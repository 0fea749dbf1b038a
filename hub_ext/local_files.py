"""The local runtime's projects as directories: ``<projects_dir>/<project>/credentials/`` holds
``<name>.json`` (gcp-credential) and ``<name>.aws`` (aws-credential) files;
``<projects_dir>/<project>/datasets/<name>/`` are dataset directories. Reading only names and
types; file contents are never read here."""

from __future__ import annotations

import pathlib

from .mounts import Available, Credential, Dataset

_SUFFIX_TYPES = {".json": "gcp-credential", ".aws": "aws-credential"}


def project_files(projects_dir: str | pathlib.Path, project: str) -> Available:
    root = pathlib.Path(projects_dir) / project
    creds = []
    cred_dir = root / "credentials"
    if cred_dir.is_dir():
        for path in sorted(cred_dir.iterdir()):
            kind = _SUFFIX_TYPES.get(path.suffix)
            if kind and path.is_file():
                creds.append(Credential(path.stem, kind, str(path)))
    datasets = []
    ds_dir = root / "datasets"
    if ds_dir.is_dir():
        datasets = [Dataset(p.name, str(p)) for p in sorted(ds_dir.iterdir()) if p.is_dir()]
    return Available(tuple(creds), tuple(datasets))
