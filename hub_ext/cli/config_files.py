"""Reading the hub configuration an operator points `mlplatform` at: a ``jupyterhub_config.py``, or
z2jh Helm values files merged as Helm merges ``-f`` files (maps merged key by key, anything else
replaced, later files win, ``null`` removes a key), and where in them the platform's sections are
written. A file that cannot be read raises `Unreadable` with what is wrong, never a traceback."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml
from traitlets.config import Config, PyFileConfigLoader

from hub_ext.core.errors import ConfigError
from hub_ext.setup import inferred_spawner, spawner_section


class Unreadable(Exception):
    pass


def _z2jh_root(values: Any) -> dict | None:
    if not isinstance(values, dict):
        return None
    if "singleuser" in values or "hub" in values:
        return values
    for value in values.values():
        if isinstance(value, dict) and ("singleuser" in value or "hub" in value):
            return value
    return None


def is_values(path: pathlib.Path) -> bool:
    return path.suffix in (".yaml", ".yml")


def read_values(path: pathlib.Path) -> dict:
    """One Helm values file: one YAML document, a mapping (empty: ``{}``)."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        raise Unreadable(f"cannot read {path}: {e}") from None
    if len(docs) > 1:
        manifest = any(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs)
        kinds = ", ".join(sorted({str(d.get("kind")) for d in docs if isinstance(d, dict) and "kind" in d}))
        raise Unreadable(f"{path} holds {len(docs)} YAML documents: a values file is one document" + (
            f" (is this a Kubernetes manifest? it holds {kinds}: apply it with kubectl, do not pass it to helm -f)"
            if manifest else " (separate them into files and give each, in order)"))
    values = docs[0] if docs else {}
    if not isinstance(values, dict):
        raise Unreadable(f"{path}: a values file is a mapping of keys to values, not {type(values).__name__}")
    return values


def merge_values(base: dict, overlay: dict) -> dict:
    """Helm's merge of a later ``-f`` file: maps merged key by key, anything else replaced, ``null``
    removes the key."""
    out = dict(base)
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: pathlib.Path, *more: pathlib.Path) -> tuple[Config, str]:
    """The hub configuration in a config file, or in values files merged as Helm merges them, and
    which spawner section applies to it (``PlatformSpawner`` for values: z2jh's spawner is KubeSpawner)."""
    return load_located(path, *more)[:2]


def load_located(path: pathlib.Path, *more: pathlib.Path) -> tuple[Config, str, str, str]:
    """`load_config`, and where its sections are written: (config, section, prefix of the
    ``hub.config`` sections, path of the profile list from ``singleuser.profileList``)."""
    if is_values(path) or more:
        if not all(is_values(p) for p in (path, *more)):
            raise Unreadable("several files are merged as Helm values files (.yaml); a jupyterhub_config.py "
                             "is checked alone")
        values: dict = {}
        for each in (path, *more):
            values = merge_values(values, read_values(each))
        root = _z2jh_root(values)
        if root is None:
            names = " + ".join(str(p) for p in (path, *more))
            raise Unreadable(f"{names}: no z2jh 'singleuser' or 'hub' section found (also not under a parent key)")
        parent = next((f"{k}." for k, v in values.items() if v is root), "")
        c = Config((root.get("hub") or {}).get("config") or {})
        profile_list = (root.get("singleuser") or {}).get("profileList")
        if profile_list:
            c.KubeSpawner.profile_list = profile_list
        return c, "PlatformSpawner", f"{parent}hub.config.", f"{parent}singleuser.profileList"
    try:
        c = PyFileConfigLoader(path.name, path=str(path.parent.resolve())).load_config()
    except ConfigError:
        raise
    except Exception as e:  # the operator's file: show what Python said, not a traceback
        raise Unreadable(f"cannot load {path}: {type(e).__name__}: {e}") from None
    return c, spawner_section(inferred_spawner(c) or ""), "", ""
