"""Memory sizes with one meaning, read by the libraries that define them (pure).

A profile's memory (``memory: {limit: ...}``, ``kubespawner_override.mem_limit`` /
``mem_guarantee``) sets KubeSpawner's ``mem_limit`` / ``mem_guarantee`` traits (JupyterHub's
`ByteSpecification`). Two spellings meet there, and each is read by its own library:

- KubeSpawner's: bytes as a number, or a number with ``K``, ``M``, ``G`` or ``T``, which
  JupyterHub's trait reads as **1024-based** (``4G`` = 4·2³⁰). These are KubeSpawner's traits and a
  z2jh user writing ``mem_limit: 4G`` means what KubeSpawner gives them, so the platform means it
  too (Kubernetes would read ``4G`` as 4·10⁹: not here). Read by the trait's own ``validate``.
- Kubernetes quantities the trait does not read: ``Ki``, ``Mi``, ``Gi``, ``Ti``, ``Pi``, ``Ei``
  (1024-based), ``k`` (1000), plain bytes as text (``"1073741824"``, ``"1e9"``), fractions
  (``1.5Gi``). Read by the Kubernetes client's ``parse_quantity`` (imported only when one is
  met), rounded up to a whole byte as Kubernetes rounds a memory quantity.

`memory_bytes` gives the one meaning in bytes, or raises `ValueError` with a message that says
what is wrong (anything else, e.g. ``8 GB``, ``8Gb``, ``500m``, ``1P``: the trait's own words;
a negative size). `for_trait` gives what to set on the trait: the value as written where the
trait reads it with that same meaning (``"4G"``, ``2147483648``), else the bytes as an int, which
the trait takes and KubeSpawner writes into the pod. `cpu_hint` words advice for a CPU trait given
a Kubernetes quantity (``"500m"``): KubeSpawner's CPU traits take a number of CPUs, and a string is
refused by them, as by KubeSpawner (there is no second meaning to settle there).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from jupyterhub.traitlets import ByteSpecification
from traitlets import TraitError

MEMORY_TRAITS = ("mem_guarantee", "mem_limit")
CPU_TRAITS = ("cpu_guarantee", "cpu_limit")
_KUBESPAWNER_SUFFIXES = tuple(ByteSpecification.UNIT_SUFFIXES)  # K, M, G, T


@functools.cache
def _trait() -> ByteSpecification:
    return ByteSpecification()


def _read_by_trait(value: Any) -> bool:
    """Whether JupyterHub's trait reads `value` itself (a number, or text ending in K, M, G or T)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and value.endswith(_KUBESPAWNER_SUFFIXES))


def _kubernetes_spelling(value: Any) -> bool:
    """Text the trait does not read but a Kubernetes quantity may be: ``Ki``..``Ei``, ``k``, or no suffix."""
    return isinstance(value, str) and bool(value) and (value.endswith("i") or value[-1] == "k"
                                                       or value[-1].isdigit() or value[-1] == ".")


def _kubernetes_bytes(value: str) -> int:
    from kubernetes.utils.quantity import parse_quantity  # the Kubernetes client's parser

    try:
        amount = parse_quantity(value)
    except ValueError as e:
        raise ValueError(f"{value} is not a Kubernetes quantity ({e}); write a size such as '8Gi', '512Mi' "
                         "or '4G'") from None
    if not amount.is_finite():
        raise ValueError(f"{value} is not a size")
    return math.ceil(amount)


def memory_bytes(value: Any) -> int:
    """The size `value` stands for, in bytes (the module docstring gives the one meaning); a
    ValueError saying what is wrong where it is no usable size."""
    if _kubernetes_spelling(value):
        size = _kubernetes_bytes(value)
    elif isinstance(value, bool):
        raise ValueError(f"{value} is not a size (a number of bytes, or a number with K, M, G, T, Ki, Mi, Gi, Ti)")
    else:
        try:
            size = _trait().validate(None, value)
        except TraitError as e:
            raise ValueError(str(e)) from None
        except (TypeError, ValueError, OverflowError):  # nan, inf, or not text at all
            raise ValueError(f"{value} is not a valid memory specification. Must be an int or a string with "
                             "suffix K, M, G, T") from None
    if size < 0:
        raise ValueError(f"{value} is negative: a size is 0 bytes or more")
    return size


def for_trait(value: Any) -> Any:
    """What to set on ``mem_limit`` / ``mem_guarantee`` for `value` (None stays None): as written
    where the trait reads it with the platform's meaning, else the bytes as an int. ValueError as
    `memory_bytes` where it is no usable size."""
    if value is None:
        return None
    size = memory_bytes(value)
    return value if _read_by_trait(value) else size


def cpu_hint(value: Any) -> str:
    """Advice to add where a CPU trait refused `value`: '' unless it is a Kubernetes CPU quantity."""
    if not isinstance(value, str) or not value or not (value[-1].isdigit() or value[-1] in "m."):
        return ""
    from kubernetes.utils.quantity import parse_quantity

    try:
        cpus = parse_quantity(value)
    except ValueError:
        return ""
    return f" KubeSpawner's CPU settings take a number of CPUs: write {float(cpus):g}, not the text {value!r}."
