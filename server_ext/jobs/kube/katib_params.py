"""The search space of a sweep as Katib parameters, and a Katib ``Trial``'s assignments read back as
AI Platform hyperparameters. Pure: no I/O. The mapping is in ``docs/sweeps.md``.

`katib_parameters(spec)` gives one Katib parameter per AI Platform parameter, named `search_name`:

- ``DOUBLE``/``INTEGER`` as ``double``/``int`` with their bounds, ``DISCRETE`` and ``CATEGORICAL`` as
  lists;
- ``UNIT_LOG_SCALE`` (not ``GRID_SEARCH``): Katib searches ``y`` uniformly in ``[ln min, ln max]``
  (a double, no ``distribution``) as parameter ``<name>-log``; the trial passes ``x = exp(y)``
  (INTEGER: rounded), clamped to ``[min, max]``, computed by the trainer image's Python (`LOG_PY`)
  exactly as `log_value` computes it. Not ``distribution: logUniform``, which some of Katib's
  suggestion services ignore (goptuna: random, tpe, cmaes, sobol search it linearly); uniform in log
  space is log-uniform whichever service samples it;
- ``UNIT_REVERSE_LOG_SCALE`` (not ``GRID_SEARCH``): Katib searches ``z`` uniformly in
  ``[ln min, ln max]`` (a double, no ``distribution``: goptuna ignores ``logUniform`` here too) as
  parameter ``<name>-reversed-log``; the trial passes ``x = min + (max − y)`` with ``y = exp(z)``
  (INTEGER: ``y`` rounded; exactly ``max`` at ``y ≤ min``, ``min`` at ``y = max``, clamped to
  ``[min, max]``), computed by the trainer image's Python (`REVERSE_PY`) exactly as
  `reverse_log_value` computes it, so `trial_hyperparameters` reports what the trainer was given (an
  Experiment made before, whose ``<name>-reversed`` was ``y`` itself searched with ``logUniform``, is
  read with `reverse_value`).

Bayesian optimisation (``ALGORITHM_UNSPECIFIED`` → ``bayesianoptimization``, Katib's skopt service)
is searched otherwise: skopt samples every double log-uniformly in ``[min, max]`` (its
``Real(min, max, "log-uniform")``), which gives ``nan`` for the ``[ln min, ln max]`` above whenever
``min < 1``, and is not what a linear scale means. So under it every DOUBLE, and every INTEGER on a log
or reverse-log scale, is searched as ``<name>-unit``, a double ``w`` in ``[1, e]``: skopt samples
``u = ln w`` uniformly in ``[0, 1]``, and the trial passes ``x`` from ``u`` by the parameter's scale
(linear ``min + u (max − min)``; log ``exp(ln min + u (ln max − ln min))``; reverse-log ``min + max −``
that; INTEGER rounded; clamped), computed by the trainer image's Python (`UNIT_PY`) exactly as
`unit_value` computes it. INTEGER on a linear scale stays an ``int`` (skopt's ``Integer`` is uniform).

`trial_hyperparameters(spec, trial)` reads a Trial's ``parameterAssignments`` back as AI Platform
showed them (strings, keyed by parameter name, log and reverse-log undone, INTEGER values whole).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from server_ext.jobs.hptuning import Param, Spec, number_text

REVERSED_SUFFIX = "-reversed-log"  # z = ln y, y = min + max - x
OLD_REVERSED_SUFFIX = "-reversed"  # Experiments made before: y itself, with distribution logUniform
LOG_SUFFIX = "-log"
KATIB_TYPES = {"DOUBLE": "double", "INTEGER": "int", "DISCRETE": "discrete", "CATEGORICAL": "categorical"}

# x = min + (max - y), y = exp(z), for a reverse-log parameter searched as z = ln y (INTEGER: y rounded);
# the same arithmetic as `reverse_log_value`.
REVERSE_PY = ('import math, sys; k, a, b, z = sys.argv[1:]; y = math.exp(float(z)); '
              'a, b, y = (int(a), int(b), round(y)) if k == "INTEGER" else (float(a), float(b), y); '
              'x = b if y <= a else min(max(a + (b - y), a), b); print(x if k == "INTEGER" else repr(x))')

# x = exp(y) for a log-scale parameter searched as y = ln x (INTEGER: rounded), clamped to [min, max];
# the same arithmetic as `log_value`.
LOG_PY = ('import math, sys; k, a, b, y = sys.argv[1:]; a, b = (int(a), int(b)) if k == "INTEGER" else '
          '(float(a), float(b)); x = math.exp(float(y)); x = round(x) if k == "INTEGER" else x; '
          'x = min(max(x, a), b); print(x if k == "INTEGER" else repr(x))')


# x from w in [1, e] for a parameter Bayesian optimisation searches (see the module's docstring); the
# same arithmetic as `unit_value`.
UNIT_PY = ('import math, sys; k, s, a, b, w = sys.argv[1:]; i = k == "INTEGER"; '
           'a, b = (int(a), int(b)) if i else (float(a), float(b)); u = min(max(math.log(float(w)), 0.0), 1.0); '
           'y = a + u * (b - a) if s not in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") else '
           'math.exp(math.log(a) + u * (math.log(b) - math.log(a))); y = a + b - y if s == "UNIT_REVERSE_LOG_SCALE" '
           'else y; x = min(max(round(y) if i else y, a), b); print(x if i else repr(x))')
UNIT_SUFFIX = "-unit"
LOG_SCALES = ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
UNIT_BOUNDS = ("1.0", repr(math.e))  # w's interval: ln w in [0, 1]


def unit_params(spec: Spec) -> tuple[Param, ...]:
    """The parameters Bayesian optimisation (skopt) searches as ``w`` in ``[1, e]``."""
    if spec.algorithm != "ALGORITHM_UNSPECIFIED":
        return ()
    return tuple(p for p in spec.params if p.type == "DOUBLE" or (
        p.type == "INTEGER" and p.scale in LOG_SCALES))


def unit_value(param: Param, searched: str) -> str:
    """The value the trainer gets for the searched ``w`` (see `UNIT_PY`)."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    a, b = (int(low), int(high)) if integer else (float(low), float(high))
    u = min(max(math.log(float(searched)), 0.0), 1.0)
    if param.scale in LOG_SCALES:
        y = math.exp(math.log(a) + u * (math.log(b) - math.log(a)))
    else:
        y = a + u * (b - a)
    y = a + b - y if param.scale == "UNIT_REVERSE_LOG_SCALE" else y
    x = min(max(round(y) if integer else y, a), b)
    return str(x) if integer else repr(x)


def reversed_params(spec: Spec) -> tuple[Param, ...]:
    """The parameters searched in the transformed space (UNIT_REVERSE_LOG_SCALE, not under grid nor
    Bayesian optimisation)."""
    if spec.algorithm in ("GRID_SEARCH", "ALGORITHM_UNSPECIFIED"):
        return ()
    return tuple(p for p in spec.params if p.type in ("DOUBLE", "INTEGER") and p.scale == "UNIT_REVERSE_LOG_SCALE")


def log_params(spec: Spec) -> tuple[Param, ...]:
    """The parameters searched in log space (UNIT_LOG_SCALE, not under grid nor Bayesian optimisation)."""
    if spec.algorithm in ("GRID_SEARCH", "ALGORITHM_UNSPECIFIED"):
        return ()
    return tuple(p for p in spec.params if p.type in ("DOUBLE", "INTEGER") and p.scale == "UNIT_LOG_SCALE")


def search_name(spec: Spec, param: Param) -> str:
    """The Katib parameter a trial parameter references (``lr``, ``lr-log``, ``lr-reversed-log`` or
    ``lr-unit``)."""
    if param in unit_params(spec):
        return param.name + UNIT_SUFFIX
    if param in reversed_params(spec):
        return param.name + REVERSED_SUFFIX
    return param.name + LOG_SUFFIX if param in log_params(spec) else param.name


def log_bounds(param: Param) -> tuple[str, str]:
    """``[ln min, ln max]``: the searched interval of a log-scale parameter."""
    integer = param.type == "INTEGER"
    low, high = float(number_text(param.min, integer)), float(number_text(param.max, integer))
    return repr(math.log(low)), repr(math.log(high))


def log_value(param: Param, searched: str) -> str:
    """The value the trainer gets for the searched ``y = ln x`` (see `LOG_PY`)."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    a, b = (int(low), int(high)) if integer else (float(low), float(high))
    x = math.exp(float(searched))
    x = min(max(round(x) if integer else x, a), b)
    return str(x) if integer else repr(x)


def reverse_log_value(param: Param, searched: str) -> str:
    """The value the trainer gets for the searched ``z = ln y``: ``min + (max − y)`` (see `REVERSE_PY`)."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    y = math.exp(float(searched))
    a, b, y = (int(low), int(high), round(y)) if integer else (float(low), float(high), y)
    x = b if y <= a else min(max(a + (b - y), a), b)
    return str(x) if integer else repr(x)


def reverse_value(param: Param, searched: str) -> str:
    """What the trainer got for ``y`` itself (an Experiment made before reverse-log parameters were
    searched as ``ln y``): ``min + (max − y)``."""
    integer = param.type == "INTEGER"
    low, high = number_text(param.min, integer), number_text(param.max, integer)
    a, b, y = (int(low), int(high), int(float(searched))) if integer else (float(low), float(high), float(searched))
    x = b if y <= a else min(max(a + (b - y), a), b)
    return str(x) if integer else repr(x)


def katib_parameters(spec: Spec) -> list[dict]:
    out = []
    for p in spec.params:
        space: dict[str, Any]
        if p.type in ("DOUBLE", "INTEGER"):
            integer = p.type == "INTEGER"
            space = {"min": number_text(p.min, integer), "max": number_text(p.max, integer)}
            if p in unit_params(spec):
                out.append({"name": search_name(spec, p), "parameterType": "double",
                            "feasibleSpace": {"min": UNIT_BOUNDS[0], "max": UNIT_BOUNDS[1]}})
                continue
            if p in log_params(spec) or p in reversed_params(spec):
                low, high = log_bounds(p)
                out.append({"name": search_name(spec, p), "parameterType": "double",
                            "feasibleSpace": {"min": low, "max": high}})
                continue
        elif p.type == "DISCRETE":
            space = {"list": [number_text(v) for v in p.values]}
        else:
            space = {"list": list(p.values)}
        out.append({"name": search_name(spec, p), "parameterType": KATIB_TYPES[p.type], "feasibleSpace": space})
    return out


def assignments(trial: Mapping) -> dict[str, str]:
    """A Trial's ``spec.parameterAssignments`` as a dict (Katib parameter name → value)."""
    items = ((trial.get("spec") or {}).get("parameterAssignments")) or []
    return {str(a["name"]): str(a.get("value", "")) for a in items if isinstance(a, dict) and "name" in a}


def trial_hyperparameters(spec: Spec | None, trial: Mapping) -> dict[str, str]:
    """AI Platform's ``hyperparameters`` of a trial: what its trainer got as ``--name=value``
    (reverse-log undone; INTEGER values as whole numbers). Without a `spec`: the assignments as
    they are. Parameters not assigned (yet) are left out."""
    given = assignments(trial)
    if spec is None:
        return given
    units = unit_params(spec)
    if units and not any(search_name(spec, p) in given for p in units):
        # a Bayesian sweep made before it searched w: read as it was then, as the other algorithms search
        spec, units = dataclasses.replace(spec, algorithm="RANDOM_SEARCH"), ()
    out = {}
    for p in spec.params:
        value = given.get(search_name(spec, p))
        if p in units and value is not None:
            try:
                value = unit_value(p, value)
            except (ValueError, OverflowError):
                pass
            out[p.name] = value
            continue
        if value is None and p in log_params(spec) and p.name in given:
            out[p.name] = given[p.name]  # an Experiment made before log scales were searched as ln x
            continue
        transform = reverse_log_value if p in reversed_params(spec) else log_value
        if value is None and p in reversed_params(spec):  # made before reverse-log was searched as ln y
            value, transform = given.get(p.name + OLD_REVERSED_SUFFIX), reverse_value
        if value is None:
            continue
        if p in reversed_params(spec) or p in log_params(spec):
            try:
                value = transform(p, value)
            except (ValueError, OverflowError):
                pass
        elif p.type == "INTEGER":
            try:
                f = float(value)
                value = str(int(f)) if math.isfinite(f) and f.is_integer() else value
            except ValueError:
                pass
        out[p.name] = value
    return out
