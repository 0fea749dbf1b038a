"""Defaults shared by the notebook server extension and the kubectl plugin: where the local
backend keeps its state, and the built-in accelerator catalogue used when no cluster (or hub)
publishes one (e.g. ``kubectl ai-platform jobs submit training --dry-run`` offline)."""

from __future__ import annotations

import os
import pathlib

# hub_ext.catalog syntax: whole A100/H100 GPUs and the A100-40GB MIG profiles (mixed strategy).
DEFAULT_ACCELERATORS = {
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "2g.10gb": {"type": "mig", "profile": "2g.10gb"},
    "3g.20gb": {"type": "mig", "profile": "3g.20gb"},
    "4g.20gb": {"type": "mig", "profile": "4g.20gb"},
    "7g.40gb": {"type": "mig", "profile": "7g.40gb"},
}


def default_state_dir() -> pathlib.Path:
    """``$MLPLATFORM_STATE_DIR``, else ``$XDG_DATA_HOME/mlplatform`` (``~/.local/share/mlplatform``)."""
    if os.environ.get("MLPLATFORM_STATE_DIR"):
        return pathlib.Path(os.environ["MLPLATFORM_STATE_DIR"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return pathlib.Path(base) / "mlplatform"
