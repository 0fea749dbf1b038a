"""The built-in platform catalogue, for when no cluster or hub can be asked (``kubectl ai-platform
--dry-run`` on a laptop, offline; the notebook server extension without configured accelerators).
Pure constants.

Guarantees: `DEFAULT_ACCELERATORS` is `RAW_ACCELERATORS` parsed with
`hub_ext.core.catalog.parse_accelerators` (at import, so a broken entry fails loudly here); it offers a
whole A100 and a whole H100 (pinned to their GPU Feature Discovery product labels) and the
A100-40GB MIG slices ``1g.5gb``, ``2g.10gb``, ``3g.20gb``, ``4g.20gb`` and ``7g.40gb`` under the
device plugin's ``mixed`` strategy, so job accelerator names such as ``NVIDIA_TESLA_A100``,
``NVIDIA_TESLA_H100`` and ``NVIDIA_A100_1G_5GB`` resolve. `default_plan_settings()` wraps it for
`server_ext.jobs.plan.plan_job`.
"""

from __future__ import annotations

from hub_ext.core.catalog import Accelerator, parse_accelerators
from server_ext.jobs.machines import Machines
from server_ext.jobs.plan import PlanSettings

RAW_ACCELERATORS: dict[str, dict] = {
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB", "display_name": "NVIDIA A100 40GB"},
    "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3", "display_name": "NVIDIA H100 80GB"},
    **{profile: {"type": "mig", "profile": profile}
       for profile in ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")},
}
DEFAULT_ACCELERATORS: dict[str, Accelerator] = parse_accelerators(RAW_ACCELERATORS)
DEFAULT_CREDENTIAL_TYPES = {"gcp-credential": "gcp-credential", "aws-credential": "aws-credential"}


def default_plan_settings() -> PlanSettings:
    return PlanSettings(machines=Machines(DEFAULT_ACCELERATORS))
