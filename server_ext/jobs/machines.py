"""Machines and accelerators of a job: AI Platform's names → what a replica asks the cluster for. Pure.

- Machine types: Compute Engine names (``n1-standard-8``, ``n1-highmem-16``, ``n1-highcpu-32``,
  ``n2-…``, ``e2-…``, ``a2-highgpu-1g``…) by their published vCPU/memory shape, with 1 to the
  family's largest published vCPU count (`MAX_CPUS`: n1 96, n2 128, n2d 224, e2 32, c2 60), and
  AI Platform's legacy names (``standard``, ``large_model``, ``complex_model_m``, ``standard_gpu``,
  ``complex_model_m_p100``, ``standard_v100``…) with the GPUs they implied. An operator's table
  (`Machines(extra=…)`) adds or overrides names. An unknown name is refused with the closest known
  one (``n1-standrd-8`` → did you mean ``n1-standard-8``: its vCPU count is kept).
- Accelerators: Google's spellings (``NVIDIA_TESLA_V100``; gcloud's ``nvidia-tesla-v100`` is
  normalised by the job model) and the platform's MIG names (``NVIDIA_A100_1G_5GB``), mapped to
  the platform catalogue: a MIG accelerator of profile ``1g.5gb`` is ``NVIDIA_A100_1G_5GB``; a
  whole GPU is matched by the model in its product or by an explicit ``aliases`` table. The
  model is matched by whole tokens (`model_matches`): ``NVIDIA_TESLA_A100`` and ``NVIDIA_A100``
  name the product ``NVIDIA-A100-SXM4-40GB`` (its first token after the brand words NVIDIA,
  TESLA, GEFORCE, QUADRO is the model), ``NVIDIA_A100_40GB`` too (later tokens must be among the
  product's), while ``A1``, ``1``, ``SXM4`` or ``_`` name nothing. TPUs are refused by name; an
  accelerator the catalogue lacks is refused with the list of those it has.
- Legacy GPUs: the K80/P100/V100 that AI Platform's legacy GPU machine names and ``BASIC_GPU``
  imply (the user named no accelerator) become, when the catalogue lacks that model,
  `Machines.legacy_gpu` (a catalogue name), else the catalogue's first whole GPU; a catalogue
  with no whole GPU refuses them, saying to choose an accelerator.
- Scale tiers: BASIC, STANDARD_1, PREMIUM_1, BASIC_GPU → master/worker/parameter-server shapes.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Mapping

from hub_ext.core.catalog import Accelerator
from hub_ext.core.errors import UserInputError

_GCE = re.compile(r"(?P<family>n1|n2|n2d|e2|c2)-(?P<shape>standard|highmem|highcpu)-(?P<cpus>\d+)")
_GIB_PER_CPU = {("n1", "standard"): 3.75, ("n1", "highmem"): 6.5, ("n1", "highcpu"): 0.9,
                ("n2", "standard"): 4, ("n2", "highmem"): 8, ("n2", "highcpu"): 1,
                ("n2d", "standard"): 4, ("n2d", "highmem"): 8, ("n2d", "highcpu"): 1,
                ("e2", "standard"): 4, ("e2", "highmem"): 8, ("e2", "highcpu"): 1,
                ("c2", "standard"): 4}
MAX_CPUS = {"n1": 96, "n2": 128, "n2d": 224, "e2": 32, "c2": 60}
_SERIES = ("RTX", "GTX")  # series words before the model in some products
_BRANDS = ("NVIDIA", "TESLA", "GEFORCE", "QUADRO")
_A2 = re.compile(r"a2-highgpu-(?P<gpus>1|2|4|8)g")


@dataclass(frozen=True)
class Machine:
    cpu: float
    memory_gib: float
    accelerator: str | None = None  # Google's accelerator type name
    count: int = 0


LEGACY = {
    "standard": Machine(4, 15), "large_model": Machine(8, 52), "complex_model_s": Machine(8, 7.2),
    "complex_model_m": Machine(16, 14.4), "complex_model_l": Machine(32, 28.8),
    "standard_gpu": Machine(8, 30, "NVIDIA_TESLA_K80", 1), "complex_model_m_gpu": Machine(16, 60, "NVIDIA_TESLA_K80", 4),
    "complex_model_l_gpu": Machine(32, 120, "NVIDIA_TESLA_K80", 8),
    "standard_p100": Machine(8, 30, "NVIDIA_TESLA_P100", 1),
    "complex_model_m_p100": Machine(16, 60, "NVIDIA_TESLA_P100", 4),
    "standard_v100": Machine(8, 30, "NVIDIA_TESLA_V100", 1), "large_model_v100": Machine(8, 52, "NVIDIA_TESLA_V100", 1),
    "complex_model_m_v100": Machine(16, 60, "NVIDIA_TESLA_V100", 4),
    "complex_model_l_v100": Machine(32, 120, "NVIDIA_TESLA_V100", 8),
}
TIERS = {
    "BASIC": {"masterType": "standard"},
    "BASIC_GPU": {"masterType": "standard_gpu"},
    "STANDARD_1": {"masterType": "complex_model_m", "workerType": "standard", "workerCount": "4",
                   "parameterServerType": "standard", "parameterServerCount": "1"},
    "PREMIUM_1": {"masterType": "complex_model_l", "workerType": "complex_model_m", "workerCount": "19",
                  "parameterServerType": "complex_model_m", "parameterServerCount": "11"},
}


def _gce_names(name: str) -> list[str]:
    """The Compute Engine names a misspelt `name` may have meant: every family and shape with its
    vCPU count (``n1-standrd-8`` → ``n1-standard-8``…; common counts when it has none) and the
    ``a2-highgpu-*g`` names."""
    digits = re.search(r"(\d+)\D*$", name)
    counts = [int(digits[1])] if digits and len(digits[1]) <= 4 else [4, 8, 16]
    return [f"{family}-{shape}-{n}" for (family, shape) in _GIB_PER_CPU for n in counts
            if 1 <= n <= MAX_CPUS[family]] + [f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)]


def _tokens(text: str) -> list[str]:
    tokens = [t for t in re.split(r"[^A-Z0-9]+", text.upper()) if t]
    while tokens and tokens[0] in _BRANDS + _SERIES:  # NVIDIA-RTX-A6000 is model A6000
        tokens.pop(0)
    return tokens


def model_matches(google_name: str, product: str) -> bool:
    """`google_name` (``NVIDIA_TESLA_A100``) names the GPU `product` (``NVIDIA-A100-SXM4-40GB``): its
    model token is the product's, and its further tokens (``80GB``) are among the product's."""
    wanted, have = _tokens(google_name), _tokens(product or "")
    return bool(wanted and have) and wanted[0] == have[0] and all(t in have[1:] for t in wanted[1:])


def mig_name(profile: str) -> str:
    return "NVIDIA_A100_" + profile.upper().replace(".", "_").replace("+", "_")


@dataclass(frozen=True)
class Machines:
    accelerators: Mapping[str, Accelerator]  # the platform catalogue
    extra: Mapping[str, Machine] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)  # Google accelerator name → catalogue name
    tiers: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: TIERS)
    legacy_gpu: str | None = None  # the catalogue name standing in for legacy machine names' GPUs

    def machine(self, name: str, where: str) -> Machine:
        if "tpu" in name.lower() and name not in self.extra:
            raise UserInputError(where, f"{name!r} is a TPU machine; TPUs are not offered on this platform, use a "
                                        "GPU or a MIG slice")
        if name in self.extra:
            return self.extra[name]
        if name in LEGACY:
            return LEGACY[name]
        m = _GCE.fullmatch(name)
        if m and (m["family"], m["shape"]) in _GIB_PER_CPU:
            digits, most = m["cpus"].lstrip("0") or "0", MAX_CPUS[m["family"]]
            cpus = int(digits) if len(digits) <= 6 else most + 1
            if not 1 <= cpus <= most:
                raise UserInputError(where, f"{m['family']} machines have 1 to {most} vCPUs, not {name!r}")
            return Machine(cpus, round(cpus * _GIB_PER_CPU[(m["family"], m["shape"])], 2))
        m = _A2.fullmatch(name)
        if m:
            gpus = int(m["gpus"])
            return Machine(12 * gpus, 85 * gpus, "NVIDIA_TESLA_A100", gpus)
        close = difflib.get_close_matches(name, [*self.extra, *LEGACY, *_gce_names(name)], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserInputError(where, f"unknown machine type {name!r}{hint}")

    def is_legacy(self, name: str | None) -> bool:
        """`name` is one of AI Platform's legacy machine names (not overridden by the operator)."""
        return name in LEGACY and name not in self.extra

    def accelerator(self, google_name: str, where: str, *, implied: bool = False) -> Accelerator:
        """The catalogue's accelerator for `google_name`; `implied`: the GPU of a legacy machine name
        (or scale tier), which the user never named (see the module docstring)."""
        if google_name.startswith("TPU"):
            raise UserInputError(where, "TPUs are not offered on this platform; use a GPU or a MIG slice")
        try:
            return self._named(google_name, where)
        except UserInputError:
            if not implied:
                raise
        if self.legacy_gpu:
            if self.legacy_gpu not in self.accelerators:
                raise UserInputError(where, f"implies a {google_name} GPU, which the operator maps to "
                                            f"{self.legacy_gpu!r} (job tables: legacy_gpu), and this project's "
                                            "catalogue has no such accelerator; ask the platform team")
            return self.accelerators[self.legacy_gpu]
        stand_in = next((acc for acc in self.accelerators.values() if acc.type == "gpu"), None)
        if stand_in is None:
            offered = ", ".join(sorted(self.names())) or "none"
            raise UserInputError(where, f"implies a whole {google_name} GPU and this platform has no whole GPU "
                                        f"(offered: {offered}); use scaleTier CUSTOM with an acceleratorConfig")
        return stand_in

    def _named(self, google_name: str, where: str) -> Accelerator:
        wanted = self.aliases.get(google_name)
        for acc in self.accelerators.values():
            if acc.name == wanted or (acc.type == "mig" and mig_name(acc.mig_profile) == google_name):
                return acc
        if wanted is None:
            for acc in self.accelerators.values():
                if acc.type == "gpu" and model_matches(google_name, acc.product or acc.display_name):
                    return acc
        offered = sorted(self.names())
        raise UserInputError(where, f"no {google_name} on this platform (offered: {', '.join(offered) or 'none'})")

    def names(self) -> set[str]:
        out = {k for k, v in self.aliases.items() if v in self.accelerators}
        for acc in self.accelerators.values():
            if acc.type == "mig":
                out.add(mig_name(acc.mig_profile))
            elif acc.product:
                model = re.search(r"(A100|H100|H200|V100|P100|T4|L4|A10G?|K80)", acc.product.upper())
                if model:
                    out.add(f"NVIDIA_TESLA_{model.group(1)}")
        return out
