"""A submission, described once: `Submission` (the project, the ``ml.v1`` Job body or a Katib
Experiment, the `Package` to build and ship, the `Mounts`), which every face fills: the REST create
body (`from_rest`), the CLI's flags and ``client.submit``'s keyword arguments (`from_options`, from
the options of `server_ext.jobs.options`), the widgets' form (through ``client.submit``). The jobs
service takes it (`server_ext.service.jobs.JobService.create`); `Submission.to_job` is the one
conversion to the ``ml.v1`` Job; `to_rest` is the create body a client sends. Pure.

Fields are named in REST terms everywhere: ``package`` / ``package.path`` /
``package.stagingBucket``, ``mounts`` / ``mounts.credentials[0]``, the Job's own fields
(``trainingInput.pythonModule``). A face that spells them otherwise renames them at its edge, and
only there: the CLI names the flag that set the field (``--package-path``), ``client.submit`` its
keyword argument (``module_name``); both find which option or config field set it with `origin`.

- `from_options(options, config, notes)`: gcloud's reading of ``jobs submit training``: the config
  (a Job with ``trainingInput:`` at the top) first, then every option given overrides its field
  (``labels`` replaces all labels; an accelerator replaces that replica's ``acceleratorConfig``); a
  job with custom-tier fields and no scale tier gets ``scaleTier: CUSTOM``; gcloud's rules between
  flags; the whole job validated by `parse_job` (every mistake at once). A config that is a Katib
  Experiment is taken as it is, named by the ``job`` option (`native_experiment.named`; what it
  replaced is appended to `notes`); no option that sets a Job field may change it.
- `from_rest(body, project, resolve)`: the create body with its platform fields ``package``
  (``{"path", "stagingBucket"}``) and ``mounts`` (``{"credentials", "datasets"}``) taken out and
  checked for shape (all mistakes at once); `resolve` turns the package path into the directory to
  build (the REST face checks it lies inside the server's root).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from hub_ext.core.errors import UserInputError, UserInputErrors, collect, errors_of
from server_ext.jobs.model import Job, parse_job
from server_ext.jobs.options import OPTIONS

CUSTOM_FIELDS = ("masterType", "workerType", "parameterServerType", "evaluatorType", "workerCount",
                 "parameterServerCount", "evaluatorCount")
JOB_OPTIONS = tuple(name for name, (path, _) in OPTIONS.items() if not path.startswith(("package.", "mounts.")))
_KMS = re.compile(r"projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+")
MAX_PATH = 4096  # PATH_MAX on Linux
_UNFIT = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")  # control characters (NUL: "embedded null byte"), lone surrogates


@dataclass(frozen=True)
class Package:
    """``--package-path`` / ``"package"``: a directory to build into an sdist and ship with the job."""
    path: str
    staging_bucket: str | None = None  # gs:// or s3://, for a package too large for a ConfigMap

    def to_rest(self) -> dict:
        return {"path": self.path, **({"stagingBucket": self.staging_bucket} if self.staging_bucket else {})}


@dataclass(frozen=True)
class Mounts:
    """``--credentials`` / ``--datasets`` / ``"mounts"``: the project's credentials and datasets to mount."""
    credentials: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.credentials or self.datasets)

    def to_rest(self) -> dict:
        return {k: list(v) for k, v in (("credentials", self.credentials), ("datasets", self.datasets)) if v}


@dataclass(frozen=True)
class Submission:
    job: Mapping[str, Any]  # an ml.v1 Job body (Google's JSON), or a Katib Experiment taken as it is
    project: str = ""
    package: Package | None = None
    mounts: Mounts = field(default_factory=Mounts)

    @property
    def is_experiment(self) -> bool:
        return self.job.get("kind") == "Experiment"

    def to_job(self) -> Job:
        """The ``ml.v1`` Job, validated (`parse_job`; its ``packageUris`` may be left out when a
        package is to be built)."""
        return parse_job(dict(self.job), shipped_package=self.package is not None)

    def in_project(self, project: str) -> "Submission":
        return replace(self, project=project)


def to_rest(sub: Submission) -> dict:
    """The REST create body of `sub` (the Job, with ``package`` and ``mounts`` when it has them)."""
    body = dict(sub.job)
    if sub.package is not None:
        body["package"] = sub.package.to_rest()
    if sub.mounts:
        body["mounts"] = sub.mounts.to_rest()
    return body


# ---------------------------------------------------------------- the REST body

def _names(value: Any, where: str) -> tuple[str, ...]:
    """A list of names (one name alone is read as a list of it), as `hub_ext.core.mounts.select` reads them."""
    if value in (None, ""):
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UserInputError(where, "must be a list of names")
    return tuple(value)


def path_text(text: str) -> str:
    """A package path's text: at most `MAX_PATH` characters, no control character or lone surrogate."""
    if len(text) > MAX_PATH or _UNFIT.search(text):
        raise UserInputError("package.path", f"must be a directory's path: at most {MAX_PATH} characters, "
                                             "no control characters")
    return text


def from_rest(body: Any, project: str = "", resolve: Callable[[str], str] = path_text) -> Submission:
    if not isinstance(body, dict):
        raise UserInputError("job", "must be a JSON object")
    body = dict(body)
    sent_package = "package" in body
    spec = body.pop("package", None)
    experiment = body.get("kind") == "Experiment"  # taken as it is: a "mounts" in it is its own
    mounts = body.pop("mounts", None) if not experiment else None
    package = credentials = datasets = None
    with collect() as problems:  # a bad bucket, a bad path and bad mounts are told together
        if sent_package:
            if not isinstance(spec, dict) or not set(spec) <= {"path", "stagingBucket"} or \
                    not isinstance(spec.get("path"), str) or not spec["path"]:
                raise UserInputError("package", "must be {\"path\": \"<package directory>\"} with an optional "
                                                "\"stagingBucket\"")
            bucket = spec.get("stagingBucket")
            if bucket is not None and not isinstance(bucket, str):
                problems.add("package.stagingBucket", "must be a gs:// or s3:// bucket")
            path = problems.check(resolve, spec["path"])
            package = Package(str(path), bucket or None) if path is not None else None
        if mounts is not None:
            if not isinstance(mounts, dict) or not set(mounts) <= {"credentials", "datasets"}:
                raise UserInputError("mounts", "must be a mapping with 'credentials' and/or 'datasets' lists")
            credentials = problems.check(_names, mounts.get("credentials"), "mounts.credentials")
            datasets = problems.check(_names, mounts.get("datasets"), "mounts.datasets")
    return Submission(body, project, package, Mounts(credentials or (), datasets or ()))


# ---------------------------------------------------------------- options (flags, keyword arguments)

def kms_key_name(key: str | None, ring: str | None, location: str | None, project: str | None) -> str | None:
    """gcloud's ``--kms-key`` (a full name, or with ``--kms-keyring``, ``--kms-location``, ``--kms-project``)."""
    if key and _KMS.fullmatch(key):
        return key
    if key and ring and location and project:
        return f"projects/{project}/locations/{location}/keyRings/{ring}/cryptoKeys/{key}"
    if key or ring or location or project:
        raise UserInputError(OPTIONS["kms_key_name"][0], "Encryption key not fully specified.")
    return None


def _check_groups(options: Mapping[str, Any]) -> None:
    """gcloud's rules between flags (before any field is looked at)."""
    with collect() as problems:
        if options.get("master_image_uri") and options.get("runtime_version"):
            problems.add(OPTIONS["master_image_uri"][0],
                         "Only one of --master-image-uri, --runtime-version can be set.")
        for role in ("worker", "parameter_server"):
            count, machine = options.get(f"{role}_count"), options.get(f"{role}_machine_type")
            flag = role.replace("_", "-")
            if count is not None and not machine:
                problems.add(OPTIONS[f"{role}_machine_type"][0], f"must be specified with --{flag}-count")
            if machine and count is None:
                problems.add(OPTIONS[f"{role}_count"][0], f"must be specified with --{flag}-machine-type")


def _set(doc: dict, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        if not isinstance(doc.get(part), dict):
            doc[part] = {}
        doc = doc[part]
    doc[last] = value


def given_fields(options: Mapping[str, Any]) -> dict[str, str]:
    """option → the field it set, for each option given (not None)."""
    return {name: OPTIONS[name][0] for name in OPTIONS if options.get(name) is not None}


def from_options(options: Mapping[str, Any], config: dict | None = None, project: str = "",
                 notes: list[str] | None = None) -> Submission:
    """`options`: `OPTIONS` names → parsed values (None: not given), plus ``kms_key``,
    ``kms_keyring``, ``kms_location``, ``kms_project``; `config`: the loaded config file, if any."""
    _check_groups(options)
    config = config or {}
    package = Package(str(options["package_path"]), options.get("staging_bucket") or None) \
        if options.get("package_path") else None
    mounts = Mounts(tuple(options.get("credentials") or ()), tuple(options.get("datasets") or ()))
    if config.get("kind") == "Experiment":
        return Submission(_experiment(options, config, notes), project, package, mounts)
    doc = copy.deepcopy(config)
    if not isinstance(doc.get("trainingInput", {}), dict):
        raise UserInputError("trainingInput", "must be a mapping of fields")
    doc.setdefault("trainingInput", {})
    values = {name: options.get(name) for name in JOB_OPTIONS}
    values["kms_key_name"] = kms_key_name(*(options.get(f"kms_{p}") for p in ("key", "keyring", "location",
                                                                               "project")))
    for name in JOB_OPTIONS:
        if values[name] is not None:
            _set(doc, OPTIONS[name][0], copy.deepcopy(values[name]))
    training = doc["trainingInput"]
    if "scaleTier" not in training and any(key in training for key in CUSTOM_FIELDS):
        training["scaleTier"] = "CUSTOM"
    sub = Submission(doc, project, package, mounts)
    return replace(sub, job=sub.to_job().to_json())


def _experiment(options: Mapping[str, Any], config: dict, notes: list[str] | None) -> dict:
    """A Katib Experiment, taken as it is, named after the ``job`` option."""
    from server_ext.jobs.kube.native_experiment import named

    given = [OPTIONS[name][0] for name in JOB_OPTIONS
             if name not in ("job", "region") and options.get(name)]
    given += ["package.path"] if options.get("package_path") else []
    if given:
        raise UserInputError(given[0], "cannot be combined with a Katib Experiment in --config: it is submitted "
                                       "as it is")
    if not isinstance(config.get("metadata") or {}, dict):
        raise UserInputError("metadata", "must be a mapping")
    try:
        doc, said = named(config, options.get("job"))
    except UserInputError as e:
        raise UserInputError("jobId" if e.field == "JOB" else e.field, e.message, e.status) from None
    if notes is not None:
        notes.extend(said)
    return doc


# ---------------------------------------------------------------- which option set a field

def _get(doc: Any, path: str) -> Any:
    """The value at `path` (``a.b[2].c``, as `UserInputError` fields name them), else None."""
    for part in path.split("."):
        name, *indexes = part.split("[")
        if not isinstance(doc, dict) or name not in doc:
            return None
        doc = doc[name]
        for index in indexes:
            i = index.rstrip("]")
            if not isinstance(doc, list) or not i.isdigit() or int(i) >= len(doc):
                return None
            doc = doc[int(i)]
    return doc


def _under(field: str, path: str) -> bool:
    """`field` is `path` or inside it (a subfield or a list item)."""
    return field == path or field.startswith((path + ".", path + "["))


def _parents(field: str) -> list[str]:
    """``a.b[1].c`` → ``a.b[1]``, ``a.b``, ``a`` (nearest first)."""
    out = []
    while True:
        cut = max(field.rfind("."), field.rfind("["))
        if cut <= 0:
            return out
        field = field[:cut]
        out.append(field)


def origin(field: str, given: Mapping[str, str], config: Any = None) -> tuple[str, str]:
    """Where the value of `field` came from: ``("option", name)`` (the given option that set it or a
    field above it; else the option that would have), ``("config", field)`` (the config file), or
    ``("field", field)``. `given`: `given_fields`."""
    best = None
    for name, path in given.items():
        if _under(field, path) and (best is None or len(path) > len(given[best])):
            best = name
    if best:
        return "option", best
    if _get(config, field) is not None:
        return "config", field
    ungiven = [(name, path) for name, (path, _) in OPTIONS.items() if _under(field, path)]
    if ungiven:
        return "option", max(ungiven, key=lambda item: len(item[1]))[0]
    if any(_get(config, parent) is not None for parent in _parents(field)):
        return "config", field  # a field missing from a part only the file gave
    return "field", field


def attributed(e: UserInputError, given: Mapping[str, str], config: Any, option_name: Callable[[str], str],
               config_name: Callable[[str], str], only_given: bool = False,
               field_name: Callable[[str], str] = str) -> UserInputError:
    """`e` with each mistake named where its field came from (`origin`): ``option_name(option)``
    (a list option's item says which: ``trainingInput.packageUris[1]: …``), ``config_name(field)``,
    or ``field_name(field)``. `only_given`: for errors found after the options were read (planning, mounts, the
    package): only an option the caller gave is named, without the item. Same messages and statuses."""
    renamed = []
    for one in errors_of(e):
        kind, name = origin(one.field, given, config)
        message = one.message
        if kind == "option" and (name in given or not only_given):
            if not only_given and name in given and one.field.startswith(given[name] + "["):
                message = f"{one.field}: {message}"  # which item of the option's list
            where = option_name(name)
        elif kind == "config":
            where = config_name(name)
        else:
            where = field_name(one.field)
        renamed.append(one if (where, message) == (one.field, one.message) else
                       UserInputError(where, message, one.status))
    return renamed[0] if len(renamed) == 1 else UserInputErrors(renamed)
