"""AI Platform's `HyperparameterSpec` (``trainingInput.hyperparameters``), checked and with
AI Platform's defaults, as frozen objects both sweep backends (Katib, Optuna) read. Pure.

`parse_spec(doc)` takes the spec as `model.parse_job` left it (Google's JSON shape: numbers as
numbers, enums upper-case) and returns a `Spec`, or raises `UserInputError` naming the field
(``trainingInput.hyperparameters.params[1].maxValue``); several independent mistakes are told at
once (`UserInputErrors`, as a job spec's are), each with its field:

- an empty spec (``hyperparameters: {}``) is refused, not read as "no sweep";
- ``goal`` MAXIMIZE or MINIMIZE (required); ``hyperparameterMetricTag`` required (the metric the
  trainer reports; AI Platform's default ``training/hptuning/metric`` is not assumed): a free
  string as AI Platform takes it (spaces, ``/``, ``.``, any letters: ``Taxi Model Accuracy``), at
  most `MAX_TAG` characters, no control, format or line-separator characters (a tab, a newline, a
  zero-width space: never part of a tag a trainer reports). The Katib backend maps it to a name
  Katib's collectors can read (`katib.metric_name`); the user's tag is what every answer shows;
- ``maxTrials`` ≥ 1 (default 1), ``maxParallelTrials`` ≥ 1 (default 1, at most ``maxTrials``),
  ``maxFailedTrials`` ≥ 0 (default: as AI Platform, the sweep fails once enough trials failed
  that it cannot go on: 0 here means "not set"); all three at most `MAX_COUNT` (int32, as Katib's
  Experiment fields);
- ``algorithm`` ALGORITHM_UNSPECIFIED (Bayesian optimisation), GRID_SEARCH or RANDOM_SEARCH;
  GRID_SEARCH needs every parameter discrete, categorical or integer (a DOUBLE has no grid);
- at least one parameter, names unique and usable as ``--name=value`` flags
  (``[A-Za-z][A-Za-z0-9_.-]*``);
- DOUBLE / INTEGER: ``minValue`` < ``maxValue``, both finite and so their distance (no NaN or
  infinity; INTEGER: whole numbers within ±2³¹-1); ``scaleType`` NONE or
  UNIT_LINEAR_SCALE (linear), UNIT_LOG_SCALE or UNIT_REVERSE_LOG_SCALE (both need ``minValue`` >
  0; the backends search the transformed space where their library has no such scale);
- DISCRETE: ``discreteValues`` finite and strictly increasing, 1 to 1000 values; CATEGORICAL:
  ``categoricalValues`` unique non-empty strings, 1 to 1000;
- ``resumePreviousJobId`` a jobId of the same project (the backend checks it exists).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping

from hub_ext.core.errors import UserInputError, collect

FIELD = "trainingInput.hyperparameters"
MAX_VALUES = 1000
MAX_COUNT = 2**31 - 1
MAX_INTEGER = 2**31 - 1  # an INTEGER parameter's bounds
MAX_TAG = 256  # AI Platform documents no limit; Katib's metric names are derived from it (`katib.metric_name`)
_BAD_IN_TAG = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")  # control, format, surrogate, private, unassigned, separators
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
ALGORITHMS = ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH")
SCALES = ("NONE", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # DOUBLE | INTEGER | CATEGORICAL | DISCRETE
    min: float | None = None
    max: float | None = None
    values: tuple = ()  # DISCRETE: floats, increasing; CATEGORICAL: strings
    scale: str = "UNIT_LINEAR_SCALE"  # one of SCALES, NONE read as linear


@dataclass(frozen=True)
class Spec:
    goal: str  # MAXIMIZE | MINIMIZE
    metric: str  # hyperparameterMetricTag
    params: tuple[Param, ...]
    max_trials: int = 1
    max_parallel: int = 1
    max_failed: int = 0  # 0: not set
    algorithm: str = "ALGORITHM_UNSPECIFIED"
    early_stopping: bool = False
    resume_from: str | None = None  # resumePreviousJobId


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserInputError(where, "must be a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise UserInputError(where, "must be a finite number (not NaN or infinity)")
    return number


def _count(doc: Mapping[str, Any], key: str, default: int, low: int) -> int:
    try:
        value = int(doc.get(key) or default)
    except (TypeError, ValueError, OverflowError):
        raise UserInputError(f"{FIELD}.{key}", "must be a whole number") from None
    if value < low:
        raise UserInputError(f"{FIELD}.{key}", f"must be {low} or more")
    if value > MAX_COUNT:
        raise UserInputError(f"{FIELD}.{key}", f"must be at most {MAX_COUNT}")
    return value


def _param(raw: Mapping, i: int, seen: set[str]) -> Param:
    where = f"{FIELD}.params[{i}]"
    name = raw.get("parameterName")
    if not name or not _NAME.fullmatch(str(name)):
        raise UserInputError(f"{where}.parameterName", "is required: a name usable as a --name=value flag")
    if name in seen:
        raise UserInputError(f"{where}.parameterName", f"{name!r} is already a parameter")
    seen.add(name)
    kind = raw.get("type")
    if kind not in ("DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE"):
        raise UserInputError(f"{where}.type", "must be DOUBLE, INTEGER, CATEGORICAL or DISCRETE")
    scale = raw.get("scaleType") or "UNIT_LINEAR_SCALE"
    scale = "UNIT_LINEAR_SCALE" if scale == "NONE" else scale
    if kind in ("DOUBLE", "INTEGER"):
        if "minValue" not in raw or "maxValue" not in raw:
            missing = "minValue" if "minValue" not in raw else "maxValue"
            raise UserInputError(f"{where}.{missing}", f"is required for a {kind} parameter")
        low, high = _number(raw["minValue"], f"{where}.minValue"), _number(raw["maxValue"], f"{where}.maxValue")
        if kind == "INTEGER" and not (low.is_integer() and high.is_integer()):
            raise UserInputError(f"{where}.minValue", "an INTEGER parameter's bounds must be whole numbers")
        for bound, key in ((low, "minValue"), (high, "maxValue")):
            if kind == "INTEGER" and not -MAX_INTEGER <= bound <= MAX_INTEGER:
                raise UserInputError(f"{where}.{key}", f"must be within ±{MAX_INTEGER} (int32, as Katib's "
                                                       "integer parameters)")
        if low >= high:
            raise UserInputError(f"{where}.maxValue", f"must be greater than minValue ({low:g})")
        if not math.isfinite(high - low):
            raise UserInputError(f"{where}.maxValue", f"is too far from minValue ({low:g}): the range is not a "
                                                      "finite number")
        if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and low <= 0:
            raise UserInputError(f"{where}.minValue", f"must be greater than 0 with {scale}")
        return Param(name, kind, low, high, (), scale)
    key = "discreteValues" if kind == "DISCRETE" else "categoricalValues"
    values = raw.get(key) or []
    if not values:
        raise UserInputError(f"{where}.{key}", f"is required for a {kind} parameter")
    if len(values) > MAX_VALUES:
        raise UserInputError(f"{where}.{key}", f"at most {MAX_VALUES} values (has {len(values)})")
    if kind == "DISCRETE":
        numbers = tuple(_number(v, f"{where}.{key}[{j}]") for j, v in enumerate(values))
        for j in range(1, len(numbers)):
            if numbers[j] <= numbers[j - 1]:
                raise UserInputError(f"{where}.{key}[{j}]", "values must be strictly increasing")
        if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and numbers[0] <= 0:
            raise UserInputError(f"{where}.{key}[0]", f"must be greater than 0 with {scale}")
        return Param(name, kind, None, None, numbers, scale)
    texts = tuple(str(v) for v in values)
    if any(not t for t in texts) or len(set(texts)) != len(texts):
        raise UserInputError(f"{where}.{key}", "values must be unique, non-empty strings")
    return Param(name, kind, None, None, texts, "UNIT_LINEAR_SCALE")


def _check_tag(metric: Any) -> str:
    where = f"{FIELD}.hyperparameterMetricTag"
    if not metric:
        raise UserInputError(where, "is required: the name of the metric the trainer reports")
    tag = str(metric)
    if len(tag) > MAX_TAG:
        raise UserInputError(where, f"at most {MAX_TAG} characters (has {len(tag)})")
    bad = next((c for c in tag if unicodedata.category(c) in _BAD_IN_TAG), None)
    if bad is not None:
        raise UserInputError(where, f"must not contain control, format or line-separator characters (has {bad!r}); "
                                    "spaces are fine")
    if not tag.strip():
        raise UserInputError(where, "is required: the name of the metric the trainer reports (not only spaces)")
    return tag


def grid_points(spec: Spec) -> int:
    """The points of the spec's grid (its INTEGER ranges, DISCRETE and CATEGORICAL values multiplied)."""
    size = 1
    for p in spec.params:
        size *= int(p.max - p.min + 1) if p.type == "INTEGER" else len(p.values)
    return size


def at_once(spec: Spec) -> int:
    """How many trials can run at once: ``maxParallelTrials`` (at most ``maxTrials``), and for
    GRID_SEARCH at most its grid's points (a 4-point grid never runs 64 trials together)."""
    return min(spec.max_parallel, grid_points(spec)) if spec.algorithm == "GRID_SEARCH" else spec.max_parallel


def parse_spec(doc: Mapping[str, Any]) -> Spec:
    if not doc:
        raise UserInputError(FIELD, "is empty: a hyperparameter tuning job needs goal, hyperparameterMetricTag and "
                                    "params (leave hyperparameters out to run the job once)")
    with collect() as problems:  # every independent mistake told at once, as a job spec's are
        goal = doc.get("goal")
        if goal not in ("MAXIMIZE", "MINIMIZE"):
            problems.add(f"{FIELD}.goal", "is required: MAXIMIZE or MINIMIZE")
        metric = problems.check(_check_tag, doc.get("hyperparameterMetricTag"))
        raw_params = doc.get("params") or []
        if not raw_params:
            problems.add(f"{FIELD}.params", "at least one parameter is required")
        seen: set[str] = set()
        params = tuple(problems.check(_param, p, i, seen) for i, p in enumerate(raw_params))
        max_trials = problems.check(_count, doc, "maxTrials", 1, 1)
        max_parallel = problems.check(_count, doc, "maxParallelTrials", 1, 1)
        max_failed = problems.check(_count, doc, "maxFailedTrials", 0, 0)
        algorithm = doc.get("algorithm") or "ALGORITHM_UNSPECIFIED"
        if algorithm not in ALGORITHMS:
            problems.add(f"{FIELD}.algorithm", f"must be one of {', '.join(ALGORITHMS)}")
        if algorithm == "GRID_SEARCH":
            for i, p in enumerate(params):
                if p is not None and p.type == "DOUBLE":
                    problems.add(f"{FIELD}.params[{i}].type", "GRID_SEARCH needs INTEGER, DISCRETE or "
                                                              "CATEGORICAL parameters (a DOUBLE has no grid)")
    return Spec(goal=goal, metric=metric, params=params, max_trials=max_trials,
                max_parallel=min(max_parallel, max_trials), max_failed=max_failed, algorithm=algorithm,
                early_stopping=bool(doc.get("enableTrialEarlyStopping")),
                resume_from=doc.get("resumePreviousJobId") or None)


def number_text(value: float, integer: bool = False) -> str:
    """A bound or a discrete value as Katib and the trainer get it: ``7``, ``0.001``, ``1e-05``."""
    if integer or (float(value).is_integer() and abs(value) < 1e15):
        return str(int(value))
    return repr(float(value))


def trial_args(spec: Spec, values: Mapping[str, Any]) -> list[str]:
    """The trial's hyperparameters as AI Platform passed them: ``--name=value``, in the spec's order
    (INTEGER and DISCRETE values as `number_text` writes them, so both backends pass ``64``, not
    ``64.0``)."""
    out = []
    for p in spec.params:
        v = values[p.name]
        if p.type == "INTEGER":
            v = int(v)
        elif p.type == "DISCRETE":
            v = number_text(v)
        elif p.type == "DOUBLE":
            v = repr(float(v))
        out.append(f"--{p.name}={v}")
    return out
