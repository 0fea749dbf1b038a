"""`kubectl ai-platform` arguments: gcloud's ``ai-platform jobs …`` and ``ai-platform local train``
flags (same names, same value syntax), and their conversion to an ``ml.v1`` Job document. Pure: no
I/O except reading the ``--config`` file through the `read` callable `flags_to_job` is given.

Guarantees:

- `build_parser()` accepts exactly gcloud's flags of each command (plus the platform's own:
  ``--credentials``, ``--datasets``, ``--project``/``--namespace``/``-n``, ``--context``,
  ``--local``, ``--dry-run``; ``--region`` on every ``jobs`` command, which picks the cluster
  through the settings file's region table as ``--context`` does (no table: any region, the one
  cluster), and on ``submit training`` is
  also the job's ``trainingInput.region``), anywhere on the line, with no abbreviations; a bad
  flag or value raises `UsageError` naming the flag (the caller exits 2); an unknown flag close to one
  of the command's own gets gcloud's "(did you mean '--module-name'?)" (`unrecognized`). ``--``
  ends the flags: everything after it is the trainer's arguments (`split_user_args`).
- `flags_to_job(args)` returns ``(job, package_path)``: the Job in Google's canonical JSON shape
  (int64 as strings, upper-case enums, as `server_ext.jobs.model.parse_job` makes it) and the
  ``--package-path`` directory (or None), which the caller hands to `JobService.create`
  (``package_path=``) to build and ship, on every runtime. As gcloud does, the ``--config`` file (YAML or JSON, a Job with
  ``trainingInput:`` at the top) is read first and every flag given overrides its field (``--labels``
  replaces all labels; an accelerator flag replaces that replica's ``acceleratorConfig``). Unlike
  gcloud (which leaves it to the server to refuse), a job with custom-tier fields (machine types,
  counts) and no scale tier anywhere gets ``scaleTier: CUSTOM``. The whole job is validated by
  `parse_job` (``shipped_package=True`` with ``--package-path``: the package is still to be
  built), and every problem it finds (all at once: `UserInputErrors` when several; the flag
  rules of `_check_groups` together too) is reported naming the flag that set the field (an
  item of a list flag is also named by its field, ``--packages`` … ``trainingInput.packageUris[1]``),
  else ``<field> in --config`` for any field that came from the file (list items included, e.g.
  ``trainingInput.hyperparameters.params[0].minValue in --config``). A ``--config`` file that
  cannot be read, or is not UTF-8 text, is refused naming ``--config``. A ``--config`` that is a
  Katib Experiment is taken as it is, named by JOB (`native_experiment_of`); what was replaced is
  said in the `notes` list the caller passes (for stderr).
- `flagged(e, args)`: a refusal found after `flags_to_job` (planning, mounts) with each mistake
  named by the flag that set its field (`flag_for`).
- `local_train_job(args, job_id, cwd)`: the Job that ``local train`` runs through the local backend.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import os
import pathlib
import re
from typing import Any, Callable, NoReturn

from hub_ext.errors import UserInputError, UserInputErrors, collect, errors_of
from server_ext.jobs.model import load_config, parse_job

from .argtypes import (SCALE_TIERS, accelerator, at_least_one, boolean, bucket, csv_list, labels, non_negative, port,
                       scale_tier)

PROG = "kubectl ai-platform"
CUSTOM_FIELDS = ("masterType", "workerType", "parameterServerType", "evaluatorType", "workerCount",
                 "parameterServerCount", "evaluatorCount")
_KMS = re.compile(r"projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+")

# args attribute → (flag as the user wrote it, the Job field it sets)
FLAG_FIELDS: dict[str, tuple[str, str]] = {
    "job": ("JOB", "jobId"),
    "labels": ("--labels", "labels"),
    "module_name": ("--module-name", "trainingInput.pythonModule"),
    "packages": ("--packages", "trainingInput.packageUris"),
    "user_args": ("USER_ARGS", "trainingInput.args"),
    "region": ("--region", "trainingInput.region"),
    "job_dir": ("--job-dir", "trainingInput.jobDir"),
    "scale_tier": ("--scale-tier", "trainingInput.scaleTier"),
    "runtime_version": ("--runtime-version", "trainingInput.runtimeVersion"),
    "python_version": ("--python-version", "trainingInput.pythonVersion"),
    "network": ("--network", "trainingInput.network"),
    "service_account": ("--service-account", "trainingInput.serviceAccount"),
    "enable_web_access": ("--enable-web-access", "trainingInput.enableWebAccess"),
    "use_chief_in_tf_config": ("--use-chief-in-tf-config", "trainingInput.useChiefInTfConfig"),
    "kms_key_name": ("--kms-key", "trainingInput.encryptionConfig.kmsKeyName"),
    "master_machine_type": ("--master-machine-type", "trainingInput.masterType"),
    "master_image_uri": ("--master-image-uri", "trainingInput.masterConfig.imageUri"),
    "master_accelerator": ("--master-accelerator", "trainingInput.masterConfig.acceleratorConfig"),
    "worker_machine_type": ("--worker-machine-type", "trainingInput.workerType"),
    "worker_count": ("--worker-count", "trainingInput.workerCount"),
    "worker_image_uri": ("--worker-image-uri", "trainingInput.workerConfig.imageUri"),
    "worker_accelerator": ("--worker-accelerator", "trainingInput.workerConfig.acceleratorConfig"),
    "parameter_server_machine_type": ("--parameter-server-machine-type", "trainingInput.parameterServerType"),
    "parameter_server_count": ("--parameter-server-count", "trainingInput.parameterServerCount"),
    "parameter_server_image_uri": ("--parameter-server-image-uri", "trainingInput.parameterServerConfig.imageUri"),
    "parameter_server_accelerator": ("--parameter-server-accelerator",
                                     "trainingInput.parameterServerConfig.acceleratorConfig"),
}


class UsageError(Exception):
    """A command line argparse could not read; `command` is the command's path (``jobs.list``)."""

    def __init__(self, command: str, message: str):
        self.command, self.message = command, message
        super().__init__(message)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(command_path(self.prog), message)


def command_path(prog: str) -> str:
    """``kubectl ai-platform jobs list`` → ``kubectl ai-platform.jobs.list`` (gcloud's ERROR prefix)."""
    rest = prog[len(PROG):].split() if prog.startswith(PROG) else prog.split()[1:]
    return ".".join([PROG, *rest])


# ---------------------------------------------------------------- the parser tree

def _common(parser: argparse.ArgumentParser) -> None:
    """Flags every command takes, before or after the command words (SUPPRESS: the last one wins)."""
    g = parser.add_argument_group("platform flags")
    g.add_argument("--project", "--namespace", "-n", dest="project", default=argparse.SUPPRESS,
                   help="the project (Kubernetes namespace); default: the context's namespace, or your own project")
    g.add_argument("--context", default=argparse.SUPPRESS, help="the kubeconfig context to use")
    g.add_argument("--local", action="store_true", default=argparse.SUPPRESS,
                   help="use the local runtime on this machine (also MLPLATFORM_LOCAL=1)")


def _region(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument("--region", help=f"{what}Region whose cluster to use: the kubeconfig context the plugin's "
                                         "settings file maps it to (--context wins).")


def _training_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("job", metavar="JOB", help="Name of the job.")
    p.add_argument("--config", help="Path to a job configuration file (YAML or JSON) holding a Job resource; "
                                    "flags override its fields.")
    p.add_argument("--package-path", help="Path to a local Python package directory to build and ship.")
    p.add_argument("--packages", type=csv_list, metavar="PACKAGE,…", help="Python archives used for training.")
    p.add_argument("--module-name", help="Name of the module to run.")
    p.add_argument("--job-dir", help="Path in which to store training outputs, passed to the trainer as --job-dir.")
    p.add_argument("--labels", type=labels, metavar="KEY=VALUE,…", help="Labels of the job.")
    _region(p, "Region to run the job in. ")
    p.add_argument("--runtime-version", help="Runtime version of the job (the trainer image).")
    p.add_argument("--python-version", help="Python version of the runtime.")
    p.add_argument("--scale-tier", type=scale_tier, metavar="SCALE_TIER",
                   help=f"One of {', '.join(SCALE_TIERS)} (upper case also accepted).")
    p.add_argument("--staging-bucket", type=bucket, help="Bucket in which to stage training archives.")
    p.add_argument("--service-account", help="Service account the job runs as.")
    p.add_argument("--network", help="Network the job is peered with.")
    p.add_argument("--enable-web-access", action="store_true", default=None,
                   help="Enable interactive shell access to the training containers.")
    p.add_argument("--use-chief-in-tf-config", type=boolean, metavar="USE_CHIEF_IN_TF_CONFIG",
                   help='Use the "chief" role in TF_CONFIG instead of "master".')
    for role, what in (("master", "master worker"), ("worker", "worker nodes"),
                       ("parameter-server", "parameter servers")):
        if role != "master":
            p.add_argument(f"--{role}-count", type=at_least_one, help=f"Number of {what}.")
        p.add_argument(f"--{role}-machine-type", help=f"Machine type of the {what}.")
        p.add_argument(f"--{role}-accelerator", type=accelerator, metavar="type=TYPE,count=COUNT",
                       help=f"Accelerators of each of the {what}, e.g. type=nvidia-tesla-a100,count=1 "
                            f"or type=nvidia-a100-1g.5gb,count=1.")
        p.add_argument(f"--{role}-image-uri", help=f"Container image of the {what}.")
    for part in ("key", "keyring", "location", "project"):
        p.add_argument(f"--kms-{part}", help=f"Customer-managed encryption key: the {part}.")
    sync = p.add_mutually_exclusive_group()
    sync.add_argument("--async", dest="async_", action="store_true",
                      help="(DEPRECATED) Return once the job is submitted; the default.")
    sync.add_argument("--stream-logs", action="store_true", help="Block until the job ends, streaming its logs.")
    p.add_argument("--credentials", type=csv_list, metavar="NAME,…", help="Credentials of the project to mount.")
    p.add_argument("--datasets", type=csv_list, metavar="NAME,…", help="Datasets of the project to mount.")
    p.add_argument("--dry-run", action="store_true",
                   help="Print the objects that would be created, as YAML, and create nothing.")


def build_parser() -> Parser:
    common = Parser(add_help=False, allow_abbrev=False)
    _common(common)
    kw: dict[str, Any] = {"parents": [common], "allow_abbrev": False}
    root = Parser(prog=PROG, description="AI Platform Training commands for this platform", **kw)
    groups = root.add_subparsers(dest="group", metavar="GROUP", required=True, parser_class=Parser)
    jobs = groups.add_parser("jobs", help="Submit, watch and cancel training jobs.", **kw)
    verbs = jobs.add_subparsers(dest="verb", metavar="COMMAND", required=True, parser_class=Parser)
    submit = verbs.add_parser("submit", help="Submit a job.", **kw)
    kinds = submit.add_subparsers(dest="kind", metavar="KIND", required=True, parser_class=Parser)
    training = kinds.add_parser("training", help="Submit a training job.", **kw)
    _training_flags(training)
    training.set_defaults(command="submit")

    listing = verbs.add_parser("list", help="List the project's jobs, newest first.", **kw)
    listing.add_argument("--filter", help="Keep jobs matching this expression, e.g. state=RUNNING or jobId:census*.")
    listing.add_argument("--limit", type=at_least_one, help="Show at most this many jobs.")
    listing.add_argument("--page-size", type=at_least_one, help="Jobs fetched per request.")
    listing.add_argument("--sort-by", type=csv_list, metavar="FIELD,…", help="Sort by these fields; ~FIELD: descending.")
    listing.add_argument("--format", help="table (default), json, yaml, value(FIELD,…) or table(FIELD,…).")
    _region(listing)
    listing.set_defaults(command="list")

    for name, help_text in (("describe", "Describe a job."), ("get", "Describe a job (alias of describe).")):
        describe = verbs.add_parser(name, help=help_text, **kw)
        describe.add_argument("job", metavar="JOB", help="Name of the job.")
        describe.add_argument("--summarize", action="store_true", help="Summarize the job in tables.")
        describe.add_argument("--format", help="yaml (default) or json.")
        _region(describe)
        describe.set_defaults(command="describe")

    logs = verbs.add_parser("stream-logs", help="Show the logs of a job, following them while it runs.", **kw)
    logs.add_argument("job", metavar="JOB", help="Name of the job.")
    logs.add_argument("--task-name", help="Show only this task's logs, e.g. master-replica-0 or worker-1.")
    logs.add_argument("--allow-multiline-logs", action="store_true", help="Print multi-line messages as one record.")
    logs.add_argument("--polling-interval", type=at_least_one, default=60,
                      help="Seconds between polls for new log lines.")
    _region(logs)
    logs.set_defaults(command="stream-logs")

    cancel = verbs.add_parser("cancel", help="Cancel a running job.", **kw)
    cancel.add_argument("job", metavar="JOB", help="Name of the job.")
    _region(cancel)
    cancel.set_defaults(command="cancel")

    local = groups.add_parser("local", help="Run training on this machine.", **kw)
    local_verbs = local.add_subparsers(dest="verb", metavar="COMMAND", required=True, parser_class=Parser)
    train = local_verbs.add_parser("train", help="Run a trainer locally, in the foreground.", **kw)
    train.add_argument("--module-name", required=True, help="Name of the module to run.")
    train.add_argument("--package-path", help="Path to the Python package directory of the module.")
    train.add_argument("--job-dir", help="Directory for training outputs, passed to the trainer as --job-dir.")
    train.add_argument("--distributed", action="store_true", help="Run a master, workers and parameter servers.")
    train.add_argument("--parameter-server-count", type=non_negative, help="With --distributed; default 2.")
    train.add_argument("--worker-count", type=non_negative, help="With --distributed; default 2.")
    train.add_argument("--evaluator-count", type=non_negative, help="With --distributed; default 0.")
    train.add_argument("--start-port", type=port, default=27182, help="First port of the local cluster.")
    train.set_defaults(command="local-train")
    return root


def split_user_args(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(the flags, the words after ``--``, or None when there is no ``--``)."""
    if "--" not in argv:
        return list(argv), None
    i = argv.index("--")
    return list(argv[:i]), list(argv[i + 1:])


def _command_parser(root: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    """The parser of the command `words` names (``["jobs", "submit", "training"]``)."""
    parser = root
    for word in words:
        subparsers = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if subparsers is None or word not in subparsers.choices:
            break
        parser = subparsers.choices[word]
    return parser


def unrecognized(extra: list[str], parser: argparse.ArgumentParser) -> str:
    """argparse's "unrecognized arguments" with gcloud's "(did you mean '--module-name'?)" after
    each unknown flag close to one of the command's own flags (difflib)."""
    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    words = []
    for word in extra:
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6) if flag.startswith("--") else []
        words.append(f"{word} (did you mean {close[0]!r}?)" if close else word)
    return "unrecognized arguments: " + " ".join(words)


def parse_args(argv: list[str]) -> argparse.Namespace:
    flags, user_args = split_user_args(argv)
    root = build_parser()
    args, extra = root.parse_known_args(flags)
    words = [w for w in (args.group, getattr(args, "verb", None), getattr(args, "kind", None)) if w]
    if extra:
        raise UsageError(command_path(" ".join([PROG, *words])), unrecognized(extra, _command_parser(root, words)))
    if user_args is not None and args.command not in ("submit", "local-train"):
        raise UsageError(command_path(" ".join([PROG, *words])),
                         f"unrecognized arguments: -- {' '.join(user_args)}".rstrip())
    args.user_args = user_args
    for name, default in (("project", None), ("context", None), ("local", False), ("region", None)):
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


# ---------------------------------------------------------------- flags → Job

def kms_key_name(args: argparse.Namespace) -> str | None:
    key, ring, location, project = (getattr(args, f"kms_{p}", None) for p in ("key", "keyring", "location", "project"))
    if key and _KMS.fullmatch(key):
        return key
    if key and ring and location and project:
        return f"projects/{project}/locations/{location}/keyRings/{ring}/cryptoKeys/{key}"
    if key or ring or location or project:
        raise UserInputError("--kms-key", "Encryption key not fully specified.")
    return None


def _set(doc: dict, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        if not isinstance(doc.get(part), dict):
            doc[part] = {}
        doc = doc[part]
    doc[last] = value


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


def _check_groups(args: argparse.Namespace) -> None:
    """gcloud's rules between flags (before any field is looked at)."""
    with collect() as problems:
        if args.master_image_uri and args.runtime_version:
            problems.add("--master-image-uri", "Only one of --master-image-uri, --runtime-version can be set.")
        for role in ("worker", "parameter_server"):
            count, machine = getattr(args, f"{role}_count"), getattr(args, f"{role}_machine_type")
            flag = role.replace("_", "-")
            if count is not None and not machine:
                problems.add(f"--{flag}-machine-type", f"must be specified with --{flag}-count")
            if machine and count is None:
                problems.add(f"--{flag}-count", f"must be specified with --{flag}-machine-type")


def _blame(field: str, given: dict[str, str], config: dict) -> str:
    """The flag that set `field` (or a field above it), else the field as named in the config file."""
    best = None
    for flag, path in given.items():
        if _under(field, path):
            if best is None or len(path) > len(given[best]):
                best = flag
    if best:
        return best
    if _get(config, field) is not None:
        return f"{field} in --config"
    for flag, path in FLAG_FIELDS.values():
        if _under(field, path):
            return flag
    if any(_get(config, parent) is not None for parent in _parents(field)):
        return f"{field} in --config"  # a field missing from a part only the file gave
    return field


def flag_for(field: str, args: argparse.Namespace) -> str:
    """The flag the user gave that set `field` (for errors found after `flags_to_job`: planning,
    mounts), else the field itself."""
    given = {flag: path for attr, (flag, path) in FLAG_FIELDS.items() if getattr(args, attr, None) is not None}
    for name in ("credentials", "datasets"):
        if getattr(args, name, None):
            given[f"--{name}"] = name
    if field.split("[")[0] in ("credentials", "datasets"):
        field = field.split("[")[0]
    best = _blame(field, given, {})
    return best if best in given else field


def flagged(e: UserInputError, args: argparse.Namespace) -> UserInputError:
    """`e` (found after `flags_to_job`: planning, mounts) with each of its mistakes named by
    `flag_for`; same messages and statuses."""
    renamed = [UserInputError(flag_for(one.field, args), one.message, one.status) for one in errors_of(e)]
    return renamed[0] if len(renamed) == 1 else UserInputErrors(renamed)


def _read(path: str) -> str:
    try:
        return pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UserInputError("--config", f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UserInputError("--config", f"cannot read {path}: it is not UTF-8 text (byte {e.start})") from None


def native_experiment_of(args: argparse.Namespace, config: dict, notes: list[str] | None = None) -> dict:
    """A ``--config`` file that is a Katib Experiment, taken as it is: no job flag may change it
    (``--region`` picks the cluster, as for any job), and JOB names it as gcloud's names any job
    (`native_experiment.named`: ``metadata.name`` becomes JOB with ``_`` read as ``-``; a note in
    `notes` names the name it replaced)."""
    from server_ext.jobs.native_experiment import named

    given = [flag for attr, (flag, _) in FLAG_FIELDS.items()
             if attr not in ("job", "region") and getattr(args, attr, None)]
    given += ["--package-path"] if args.package_path else []
    if given:
        raise UserInputError(given[0], "cannot be combined with a Katib Experiment in --config: it is submitted "
                                       "as it is")
    if not isinstance(config.get("metadata") or {}, dict):
        raise UserInputError("metadata in --config", "must be a mapping")
    doc, said = named(config, args.job)
    if notes is not None:
        notes.extend(said)
    return doc


def is_experiment(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "Experiment"


def flags_to_job(args: argparse.Namespace, read: Callable[[str], str] = _read,
                 notes: list[str] | None = None) -> tuple[dict, str | None]:
    _check_groups(args)
    config = load_config(read(args.config), "--config") if args.config else {}
    if is_experiment(config):
        return native_experiment_of(args, config, notes), None
    doc = copy.deepcopy(config)
    if not isinstance(doc.get("trainingInput", {}), dict):
        raise UserInputError("trainingInput in --config", "must be a mapping of fields")
    doc.setdefault("trainingInput", {})
    values = {attr: getattr(args, attr, None) for attr in FLAG_FIELDS}
    values["kms_key_name"] = kms_key_name(args)
    given: dict[str, str] = {}
    for attr, (flag, path) in FLAG_FIELDS.items():
        value = values[attr]
        if value is None:
            continue
        given[flag] = path
        _set(doc, path, copy.deepcopy(value))
    training = doc["trainingInput"]
    if "scaleTier" not in training and any(key in training for key in CUSTOM_FIELDS):
        training["scaleTier"] = "CUSTOM"
    try:
        job = parse_job(doc, shipped_package=bool(args.package_path)).to_json()
    except UserInputError as e:
        renamed = [_renamed(one, given, config) for one in errors_of(e)]
        raise (renamed[0] if len(renamed) == 1 else UserInputErrors(renamed)) from None
    return job, args.package_path or None


def _renamed(e: UserInputError, given: dict[str, str], config: dict) -> UserInputError:
    """`e` naming the flag (or the field in --config) that set its field."""
    where, message = _blame(e.field, given, config), e.message
    if where in given and e.field.startswith(given[where] + "["):
        message = f"{e.field}: {message}"  # which item of the flag's list
    return UserInputError(where, message, e.status)


def mounts_from_flags(args: argparse.Namespace) -> dict[str, list[str]]:
    """The platform's ``mounts`` field of a create request (`JobService.create`); empty when none."""
    out = {}
    for name in ("credentials", "datasets"):
        if getattr(args, name, None):
            out[name] = list(getattr(args, name))
    return out


def local_train_job(args: argparse.Namespace, job_id: str, cwd: str) -> dict:
    """The Job ``local train`` runs: the module from ``--package-path`` (or the working directory) as
    a ``file://`` package; with ``--distributed``, gcloud's defaults of 2 parameter servers, 2
    workers and no evaluators (as CUSTOM-tier ``standard`` machines)."""
    package = os.path.abspath(os.path.join(cwd, args.package_path or "."))
    training: dict[str, Any] = {"pythonModule": args.module_name, "packageUris": [pathlib.Path(package).as_uri()]}
    if args.user_args:
        training["args"] = list(args.user_args)
    if args.job_dir:
        training["jobDir"] = args.job_dir
    if args.distributed:
        training.update(scaleTier="CUSTOM", masterType="standard")
        counts = {"worker": args.worker_count, "parameterServer": args.parameter_server_count,
                  "evaluator": args.evaluator_count}
        for role, default in (("worker", 2), ("parameterServer", 2), ("evaluator", 0)):
            count = default if counts[role] is None else counts[role]
            if count:
                training[f"{role}Type"] = "standard"
                training[f"{role}Count"] = str(count)
    return parse_job({"jobId": job_id, "trainingInput": training}).to_json()
