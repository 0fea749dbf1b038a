"""Settings shared by the notebook server extension and the kubectl plugin (the built-in
catalogue is `server_ext.jobs.defaults`):

- `default_state_dir()`: where the local backend keeps its state;
- `cli_config(env)`: the plugin's own settings file, ``$MLPLATFORM_CONFIG`` or
  ``$XDG_CONFIG_HOME/mlplatform/kubectl-ai-platform.yaml`` (absent: no settings; malformed or an
  unknown key: `ConfigError` naming it)::

      regions: {us-central1: gke-prod, europe-west4: dgx-eu}   # --region → kubeconfig context
      local: false                                              # true: the local runtime by default
      jobs: {legacy_gpu: a100, machines: {...}, runtimes: {...}}  # job tables (server_ext.jobs.tables)

- `context_for_region(region, regions, context)`: ``--context`` wins; else ``--region`` through
  the region → context table (a region the table lacks is refused, naming ``--region`` and the
  regions it has); else ``None``, the current context. With no region table (a platform of one
  cluster) every region is accepted and is that cluster: ``None``, the current context, and
  `region_note` says so (every ``gcloud ai-platform jobs submit training`` script passes
  ``--region``, since gcloud asks for one).
- `region_note(region, regions, context)`: the one-line note (for stderr, once per command) when
  ``--region`` is accepted without a table to map it; None otherwise.
"""

from __future__ import annotations

import os
import pathlib
from typing import Mapping

import yaml

from hub_ext.core.errors import ConfigError, Problem, UserInputError
from server_ext.jobs.tables import JobTables, parse_tables


def default_state_dir() -> pathlib.Path:
    """``$MLPLATFORM_STATE_DIR``, else ``$XDG_DATA_HOME/mlplatform`` (``~/.local/share/mlplatform``)."""
    if os.environ.get("MLPLATFORM_STATE_DIR"):
        return pathlib.Path(os.environ["MLPLATFORM_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return pathlib.Path(base) / "mlplatform"


def cli_config(env: Mapping[str, str] = os.environ) -> dict:
    path = env.get("MLPLATFORM_CONFIG")
    if not path:
        base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        path = os.path.join(base, "mlplatform", "kubectl-ai-platform.yaml")
    try:
        doc = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return {"jobs": JobTables()}
    except UnicodeDecodeError as e:
        raise ConfigError([Problem(path, f"cannot be read: it is not UTF-8 text (byte {e.start})")]) from None
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError([Problem(path, f"cannot be read: {type(e).__name__}")]) from None
    problems = []
    if not isinstance(doc, dict):
        raise ConfigError([Problem(path, "must be a mapping")])
    regions = doc.get("regions", {})
    if not isinstance(regions, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in regions.items()):
        problems.append(Problem(f"{path}: regions", "must map region names to kubeconfig context names"))
    if not isinstance(doc.get("local", False), bool):
        problems.append(Problem(f"{path}: local", "must be true or false"))
    for key in sorted(set(doc) - {"regions", "local", "jobs"}):
        problems.append(Problem(f"{path}: {key}", "unknown setting (known: regions, local, jobs)"))
    try:
        doc["jobs"] = parse_tables(doc.get("jobs"), f"{path}: jobs")
    except ConfigError as e:
        problems.extend(e.problems)
    if problems:
        raise ConfigError(problems)
    return doc


def region_note(region: str | None, regions: Mapping[str, str], context: str | None) -> str | None:
    if context or not region or regions:
        return None
    return (f"note: --region {region} is accepted: no region table is configured, so this platform's one cluster "
            "serves every region")


def context_for_region(region: str | None, regions: Mapping[str, str], context: str | None) -> str | None:
    if context or not region or not regions:
        return context
    if region not in regions:
        offered = ", ".join(sorted(regions)) or "none configured"
        raise UserInputError("--region", f"no cluster is configured for region {region!r} (regions: {offered})")
    return regions[region]
