"""Defaults shared by the notebook server extension and the kubectl plugin: where the local
backend keeps its state (the built-in catalogue is `server_ext.jobs.defaults`)."""

from __future__ import annotations

import os
import pathlib


def default_state_dir() -> pathlib.Path:
    """``$MLPLATFORM_STATE_DIR``, else ``$XDG_DATA_HOME/mlplatform`` (``~/.local/share/mlplatform``)."""
    if os.environ.get("MLPLATFORM_STATE_DIR"):
        return pathlib.Path(os.environ["MLPLATFORM_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return pathlib.Path(base) / "mlplatform"
