"""`kubectl ai-platform` arguments: gcloud's ``ai-platform jobs …`` and ``ai-platform local train``
flags (same names, same value syntax, `server_ext.jobs.options`), read into a submission
(`server_ext.jobs.submission`). Pure: no I/O except reading the ``--config`` file through the
`read` callable `submission_of` is given.

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
- `submission_of(args)` returns the `server_ext.jobs.submission.Submission` of ``submit training``
  (`submission.from_options` of the flags' values and the ``--config`` file, the job in Google's
  canonical JSON shape), which the caller hands to `JobService.create`; every problem it finds
  (all at once) is reported naming the flag that set the field (an item of a list flag is also
  named by its field, ``--packages`` … ``trainingInput.packageUris[1]``), else ``<field> in
  --config`` for any field that came from the file. A ``--config`` file that cannot be read, or is
  not UTF-8 text, is refused naming ``--config``. A ``--config`` that is a Katib Experiment is
  taken as it is, named by JOB; what was replaced is said in the `notes` list the caller passes
  (for stderr).
- `flagged(e, args)`: a refusal found after `submission_of` (planning, mounts, the package, a
  log's task), whose fields are named in REST terms, with each mistake named by the flag that set
  its field, through the CLI's one table of names, `FLAGS`.
- `local_train_job(args, job_id, cwd)`: the Job that ``local train`` runs through the local backend.
"""

from __future__ import annotations

import argparse
import difflib
import os
import pathlib
from typing import Any, Callable, NoReturn

from hub_ext.core.errors import UserInputError
from server_ext.jobs.model import load_config, parse_job
from server_ext.jobs.options import (
    KMS_PARTS,
    OPTIONS,
    SCALE_TIERS,
    accelerator,
    at_least_one,
    boolean,
    bucket,
    csv_list,
    labels,
    non_negative,
    port,
    scale_tier,
)
from server_ext.jobs.submission import Submission, attributed, from_options, given_fields

PROG = "kubectl ai-platform"
# the CLI's one table of names: an option (`OPTIONS`, the REST field it sets) → its flag; and the
# REST fields no option sets → the flag that said them
FLAGS: dict[str, str] = {**{name: "--" + name.replace("_", "-") for name in OPTIONS},
                         "job": "JOB", "user_args": "USER_ARGS", "kms_key_name": "--kms-key"}
FIELD_FLAGS = {"package": "--package-path", "task": "--task-name"}


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
    p.add_argument("--datasets", type=csv_list, metavar="NAME[:copy],…",
                   help="Datasets of the project to mount, shared and read-only; NAME:copy mounts a private writable "
                        "copy instead (where the cluster can snapshot the dataset).")
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


# ---------------------------------------------------------------- flags → submission

def options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The flags' values by option name (`server_ext.jobs.options.OPTIONS`; None: not given)."""
    names = [*OPTIONS, *(f"kms_{part}" for part in KMS_PARTS)]
    return {name: getattr(args, name, None) for name in names if name != "kms_key_name"}


def _read(path: str) -> str:
    try:
        return pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UserInputError("--config", f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UserInputError("--config", f"cannot read {path}: it is not UTF-8 text (byte {e.start})") from None


def submission_of(args: argparse.Namespace, read: Callable[[str], str] = _read,
                  notes: list[str] | None = None) -> Submission:
    config = load_config(read(args.config), "--config") if args.config else None
    options = options_of(args)
    try:
        return from_options(options, config, notes=notes)
    except UserInputError as e:
        raise attributed(e, given_fields(options), config, FLAGS.__getitem__, lambda f: f"{f} in --config",
                         field_name=_field_flag) from None


def _field_flag(field: str) -> str:
    return FIELD_FLAGS.get(field, field)


def flagged(e: UserInputError, args: argparse.Namespace) -> UserInputError:
    """`e` (found after `submission_of`: planning, mounts, the package, a log's task) with each of
    its mistakes named by the flag the user gave that set its field, else the field itself; same
    messages and statuses."""
    return attributed(e, given_fields(options_of(args)), None, FLAGS.__getitem__, lambda f: f"{f} in --config",
                      only_given=True, field_name=_field_flag)


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
