"""Entry point of ``kubectl ai-platform`` (the ``kubectl-ai_platform`` console script, so kubectl
finds it as a plugin)::

    kubectl ai-platform jobs submit training JOB [gcloud's flags…] [-- USER_ARGS…]
    kubectl ai-platform jobs list|describe|get|stream-logs|cancel …
    kubectl ai-platform local train --module-name M [--package-path DIR] [-- USER_ARGS…]

Guarantees:

- Exit codes as gcloud's: 0 ok; 1 the operation failed (no such job, the backend failed, a job
  streamed with ``--stream-logs`` or run by ``local train`` did not succeed); 2 a usage error or an
  invalid argument, in which case nothing was created.
- Every expected error (`UsageError`, the `hub_ext.core.errors`/`server_ext.errors` tree) is translated
  here, once, into one line on stderr in gcloud's shape, ``ERROR: (kubectl ai-platform.jobs.submit.training)
  Invalid value for [--master-accelerator]: …``, naming the flag or field; never a traceback.
- ``--dry-run`` needs no cluster: the jobs service (`server_ext.service.wiring.dry_run_service`) runs the
  submit's own steps against the `server_ext.runtimes.dry_run.DryRun` backend, which creates nothing and
  answers what it would, so it refuses what the real command would refuse before submitting: it
  validates and plans the job with the built-in catalogue
  (`server_ext.jobs.defaults.DEFAULT_ACCELERATORS`), resolves ``--region`` through the region table
  (Kubernetes only), refuses a Katib Experiment on the local runtime, and builds ``--package-path``
  (in a temporary directory, removed after) to apply the same delivery rules as a submit (a
  ConfigMap when it fits, else ``--staging-bucket``, else exit 2). It prints only YAML documents on
  stdout: the Kubernetes objects of `server_ext.jobs.kube.kubeflow.job_manifest`, followed by the
  package's ConfigMap (its ownerReference without the ``uid`` the created object gives it); with
  the local runtime, the ml.v1 Job as it would be recorded (no Kubernetes objects; a package that
  ships in a ConfigMap on Kubernetes is kept as a copy in the job's directory there, and the note
  says where). Notes (a staging URI, where a package goes, mounts checked only on submit) go to
  stderr.
- Every argument that needs no backend is checked before connecting (``describe --format`` too);
  the Kubernetes client library's own log lines (such as "Config not found") are kept off the
  terminal, as the platform's are, unless ``MLPLATFORM_DEBUG=1``.
- `open_target(args)` picks where the jobs are, as `target_of` decides (pure):

  Each jobs service is built by `server_ext.service.wiring`, as the notebook server's is:

  - ``local train`` → its own `LocalBackend` on a fresh directory of its own,
    ``<state_dir>/local-train/<jobId>/`` (`local_train_dir`), so it never shares a notebook
    server's state (as gcloud's, the run is not a job of ``jobs list``; its log stays there);
  - ``--local``, ``MLPLATFORM_LOCAL=1`` or ``local: true`` in the plugin's settings file
    (`server_ext.service.config.cli_config`): inside a notebook server that runs the local runtime
    (`server_ext.client.from_environment` finds it, ``$MLPLATFORM_BACKEND`` is not
    ``kubernetes``), that server's ml/v1 API, since the server *is* the local runtime (one
    backend supervises its jobs; ``--local`` and plain commands see the same jobs); elsewhere
    `LocalBackend` on ``$MLPLATFORM_STATE_DIR`` (default ``~/.local/share/mlplatform``);
  - else, inside a notebook server (a terminal of a JupyterHub single-user server) with neither
    ``--context`` nor a ``--region`` the region table maps (with no table, every region is the
    platform's one cluster: gcloud scripts' ``--region`` keeps them here), that server's ml/v1
    API (`server_ext.client.RemoteService`:
    its backend and watch cache, its user's projects; ``--package-path`` is sent as the
    directory's absolute path, which must lie inside the server's root directory);
  - otherwise `KubeBackend` on the kubeconfig context of ``--context``, else of ``--region`` (the
    settings file's region table; every ``jobs`` command takes it), else the current context,
    planning with the catalogue the hub published in the project.

- ``--region`` with no region table configured (a platform of one cluster) is accepted whatever
  it names, with one note on stderr per command (`server_ext.service.config.region_note`), ``--dry-run``
  and a Katib Experiment included; with a table, a region it lacks is refused naming
  ``--region`` and the regions it has.

  The commands a submit suggests (``$ kubectl ai-platform jobs describe JOB``) repeat the flags
  that chose the target (``--local`` outside a server, ``--context``, ``--region``,
  ``--project``), so they work as printed.
- The project is ``--project``/``--namespace``/``-n``, else ``$MLPLATFORM_PROJECT``, else the
  context's namespace (Kubernetes), else the caller's personal project
  (`hub_ext.core.entitlements.personal_project_name` of ``$JUPYTERHUB_USER``, else of the OS user).
- Times: ``describe --format yaml|json`` prints the API's values unchanged (RFC 3339, UTC with
  ``Z``); ``jobs list``'s CREATED, a submit's ``startTime``/``endTime`` and ``--summarize`` show
  them in this machine's local time zone without an offset, as gcloud's ``date(tz=LOCAL)`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import getpass
import logging
import os
import pathlib
import sys
from dataclasses import replace
from typing import Awaitable, Callable, Mapping, TextIO

from hub_ext.core.entitlements import personal_project_name
from hub_ext.core.errors import ConfigError, PlatformError, UpstreamError, UserInputError
from hub_ext.core.logs import LOGGER
from server_ext.cli import commands, output
from server_ext.cli.flags import PROG, UsageError, command_path, flagged, local_train_job, parse_args, submission_of
from server_ext.client import RemoteService, from_environment
from server_ext.client.environment import server_from_environment
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.submission import Mounts, Submission
from server_ext.jobs.tables import JobTables
from server_ext.service import wiring
from server_ext.service.config import cli_config, context_for_region, region_note
from server_ext.service.jobs import JobService

_TRUE = ("1", "true", "yes", "on")
_LIBRARY_LOGGERS = ("kubernetes_asyncio", "kubernetes")
Closer = Callable[[], Awaitable[None]]


class BackendUnavailable(PlatformError):
    """The runtime asked for cannot be reached from this command (exit 1)."""


def is_local(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> bool:
    """The local runtime was asked for (``--local``, ``MLPLATFORM_LOCAL``, the settings file, ``local train``)."""
    return (bool(args.local) or args.command == "local-train" or env.get("MLPLATFORM_LOCAL", "").lower() in _TRUE
            or cli_config(env).get("local", False))


def target_of(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> str:
    """Where the command's jobs are: ``"local-train"`` (a `LocalBackend` of the run's own),
    ``"server"`` (the notebook server's ml/v1 API), ``"local"`` (a `LocalBackend` on the state
    dir) or ``"kubernetes"``. Pure: the environment is passed in (see the module docstring)."""
    if args.command == "local-train":
        return "local-train"
    in_server = server_from_environment(env) is not None
    if is_local(args, env):
        return "server" if in_server and env.get("MLPLATFORM_BACKEND") != "kubernetes" else "local"
    mapped = getattr(args, "region", None) and cli_config(env).get("regions")  # no table: every region is here
    if in_server and not getattr(args, "context", None) and not mapped:
        return "server"
    return "kubernetes"


def state_dir(env: Mapping[str, str] = os.environ) -> pathlib.Path:
    """The local runtime's state directory: ``$MLPLATFORM_STATE_DIR``, else the default one."""
    from server_ext.service.config import default_state_dir

    return pathlib.Path(env["MLPLATFORM_STATE_DIR"]).expanduser() if env.get("MLPLATFORM_STATE_DIR") \
        else default_state_dir()


def local_train_dir(env: Mapping[str, str], now: datetime.datetime) -> tuple[str, pathlib.Path]:
    """(jobId, directory) of a new ``local train`` run: ``local_train_<UTC time>`` (``_2``, ``_3``…
    when that directory is taken) and ``<state_dir>/local-train/<jobId>/``, not created yet."""
    base = local_job_id(now)
    root = state_dir(env) / "local-train"
    job_id, n = base, 1
    while (root / job_id).exists():
        n += 1
        job_id = f"{base}_{n}"
    return job_id, root / job_id


def follow_up_scope(args: argparse.Namespace, target: str) -> str:
    """The flags a suggested command needs to reach the same jobs (``" --local"``, ``" --project p"``…)."""
    scope = " --local" if target == "local" else ""
    if target == "kubernetes":
        for flag, value in (("--context", getattr(args, "context", None)), ("--region", getattr(args, "region", None))):
            scope += f" {flag} {value}" if value else ""
    return scope + (f" --project {args.project}" if args.project else "")


def user_name(env: Mapping[str, str] = os.environ) -> str:
    return env.get("JUPYTERHUB_USER") or getpass.getuser()


def project_of(args: argparse.Namespace, user: str, env: Mapping[str, str] = os.environ,
               namespace: str | None = None) -> str:
    return args.project or env.get("MLPLATFORM_PROJECT") or namespace or personal_project_name(user)


async def open_target(args: argparse.Namespace, user: str, err: TextIO, env: Mapping[str, str] = os.environ,
                      run_dir: pathlib.Path | None = None) -> tuple[JobService | RemoteService, str, Closer]:
    """(the jobs service, the project, what closes it) of the command, at `target_of`'s target;
    `run_dir`: the state directory of a ``local train`` run (`local_train_dir`)."""
    target = target_of(args, env)
    if target == "server":
        server = from_environment(env)
        assert server is not None
        return RemoteService(server), project_of(args, user, env), server.close
    if target == "local-train":
        if run_dir is None:
            raise ValueError("local train runs in a directory of its own (local_train_dir)")
        run_dir.mkdir(parents=True, exist_ok=False)
        return await _open_local(args, user, env, run_dir)
    if target == "local":
        return await _open_local(args, user, env, state_dir(env))
    return await _open_backend(args, user, err, env)


async def _open_local(args: argparse.Namespace, user: str, env: Mapping[str, str],
                      state: pathlib.Path) -> tuple[JobService, str, Closer]:
    """A jobs service over a started `LocalBackend` on `state`, as `open_target` answers."""
    project = project_of(args, user, env)  # before the backend's threads start importing
    service = await wiring.local_service(_tables(env), state, wiring.one_project(project),
                                         wiring.local_files(env.get("MLPLATFORM_PROJECTS_DIR")))
    return service, project, service.backend.close


async def _open_backend(args: argparse.Namespace, user: str, err: TextIO,
                        env: Mapping[str, str]) -> tuple[JobService, str, Closer]:
    """A jobs service over a started Kubernetes backend, planning with the project's published
    catalogue, its credentials and datasets chosen through the user's own RBAC; the project; what
    closes the backend and its connections."""
    from hub_ext.kube.cluster import list_available
    from server_ext.runtimes.kube.target import connect, published

    context = context_for_region(getattr(args, "region", None), cli_config(env).get("regions", {}),
                                 getattr(args, "context", None))
    kube, namespace = await connect(context, env)
    project = project_of(args, user, env, namespace)
    try:
        found = await published(kube, project)  # the hub's catalogue and the project's limits (hub-only ConfigMap)
    except BaseException:
        await kube.api_client.close()
        raise
    if not found.published:
        err.write(f"note: project {project!r} has no published catalogue; using the built-in one\n")
    tables = _tables(env)
    mounts = wiring.mount_settings()
    # the user's own RBAC decides which Secrets and PVCs they may mount (Secrets read only if asked for)
    wants_credentials = bool(getattr(args, "credentials", None))
    service = wiring.kube_service(kube, tables, wiring.one_project(project),
                                  lambda p: list_available(kube, p, mounts, credentials=wants_credentials),
                                  settings=tables.plan_settings(found.accelerators, found.limits))

    async def close() -> None:
        await service.backend.close()
        await kube.api_client.close()

    return service, project, close


def _tables(env: Mapping[str, str]) -> JobTables:
    """The operator's job tables from the plugin's settings file (`jobs:`), else the built-in ones."""
    return cli_config(env)["jobs"]


def command_of(args: argparse.Namespace | None) -> str:
    if args is None:
        return PROG
    words = [getattr(args, name, None) for name in ("group", "verb", "kind")]
    return command_path(" ".join([PROG, *(w for w in words if w)]))


def error_message(e: BaseException) -> tuple[int, str]:
    """(exit code, message) of an expected error; the caller prefixes ``ERROR: (command)``."""
    if isinstance(e, UsageError):
        return 2, e.message
    if isinstance(e, UserInputError):  # every mistake, one line each (output.input_error)
        return (1 if e.status == 403 else 2), output.input_error(e)
    if isinstance(e, JobNotFound):
        return 1, f"NOT_FOUND: {e}"
    if isinstance(e, JobExists):
        return 1, f"ALREADY_EXISTS: {e}"
    if isinstance(e, JobFinished):
        return 1, f"FAILED_PRECONDITION: {e}"
    if isinstance(e, UpstreamError):
        return 1, f"UNAVAILABLE: {e}"
    if isinstance(e, ConfigError):
        return 1, "invalid platform configuration: " + "; ".join(str(p) for p in e.problems)
    return 1, str(e)


async def dry_run(args: argparse.Namespace, sub: Submission, user: str, project: str, out: TextIO, err: TextIO,
                  env: Mapping[str, str] = os.environ) -> int:
    """Run the submit's steps against the `DryRun` backend; print what would be created, as YAML documents."""
    import yaml

    local = is_local(args, env)
    if not local:  # as `_open_backend` does before connecting
        context_for_region(getattr(args, "region", None), cli_config(env).get("regions", {}),
                           getattr(args, "context", None))
    mounts = sub.mounts
    try:
        service = wiring.dry_run_service(_tables(env), project, local=local,
                                         state_dir=state_dir(env) if local else None)
    except ImportError as e:
        raise BackendUnavailable(f"the Kubernetes manifests cannot be built here ({e})") from None
    try:  # the mounts are the project's to check, on submit
        answer = await service.create(user, project, replace(sub, mounts=Mounts()))
    except UserInputError as e:
        raise flagged(e, args) from None
    if sub.is_experiment:
        from server_ext.jobs.kube.native_experiment import notes

        err.write("".join(n + "\n" for n in notes(sub.job, project)))
    if mounts:
        err.write("note: --credentials and --datasets are checked against the project, and mounted, only when "
                  "the job is submitted\n")
    shipped = answer["package"]
    if shipped is not None and sub.package is not None:
        err.write(f"note: {shipped['filename']} ({shipped['size']} bytes), built from {sub.package.path}, "
                  f"{shipped['where']}\n")
    if answer["runtime"] == "local":
        out.write(output.to_yaml(answer["manifests"][0]))
    else:
        out.write(yaml.safe_dump_all(answer["manifests"], default_flow_style=False, sort_keys=False))
    return 0


def local_job_id(now: datetime.datetime) -> str:
    return f"local_train_{now:%Y%m%d_%H%M%S}"


async def run(args: argparse.Namespace, out: TextIO, err: TextIO, env: Mapping[str, str] = os.environ) -> int:
    """Everything that can be checked without a backend is checked first (exit 2 before any
    connection); then the command runs against `open_target(args)`'s jobs service."""
    user = user_name(env)
    regions = cli_config(env).get("regions", {})
    note = region_note(getattr(args, "region", None), regions, getattr(args, "context", None))
    if note:
        err.write(note + "\n")
    sub, run_dir = None, None
    if args.command == "submit":
        said: list[str] = []
        sub = submission_of(args, notes=said)
        err.write("".join(n + "\n" for n in said))
        if args.dry_run:
            return await dry_run(args, sub, user, project_of(args, user, env), out, err, env)
    elif args.command == "local-train":
        job_id, run_dir = local_train_dir(env, datetime.datetime.now(datetime.timezone.utc))
        sub = Submission(local_train_job(args, job_id, os.getcwd()))
    elif args.command == "list":
        output.jobs_listing([], args.format)
    elif args.command == "describe" and not args.summarize:
        output.describe({}, args.format)
    target = target_of(args, env)
    service, project, close = await open_target(args, user, err, env, run_dir=run_dir)
    try:
        if sub is not None and sub.is_experiment and target in ("kubernetes", "server"):
            from server_ext.jobs.kube.native_experiment import native_experiment, notes

            native_experiment(sub.job, project, user)  # its refusal first, alone: the notes are for what is submitted
            err.write("".join(n + "\n" for n in notes(sub.job, project)))
        # settle: a LocalBackend of this process is the jobs' only supervisor while it runs
        ctx = commands.Context(service, user, project, out, err, scope=follow_up_scope(args, target),
                               settle=target in ("local", "local-train"))
        if args.command == "submit":
            return await commands.submit_training(ctx, args, sub.in_project(project))
        if args.command == "local-train":
            return await commands.local_train(ctx, sub.in_project(project))
        return await commands.COMMANDS[args.command](ctx, args)
    finally:
        await close()


def _quiet_logs(env: Mapping[str, str], err: TextIO) -> None:
    """The platform's own log lines (meant for server logs) and the Kubernetes client library's
    warnings (such as "Config not found", said better by our own error) stay off the terminal unless
    ``MLPLATFORM_DEBUG=1``; what the user needs is printed by the commands."""
    debug = env.get("MLPLATFORM_DEBUG", "").lower() in _TRUE
    logger = logging.getLogger(LOGGER)  # every module of the platform logs under it (hub_ext.core.logs)
    if debug:
        if not logger.handlers:
            logger.addHandler(logging.StreamHandler(err))
        logger.setLevel(logging.DEBUG)
    elif not logger.handlers:
        logger.addHandler(logging.NullHandler())
    for name in _LIBRARY_LOGGERS:  # their warnings only (never DEBUG: the REST client logs bodies)
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(logging.StreamHandler(err) if debug else logging.NullHandler())


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None,
         env: Mapping[str, str] | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    env = os.environ if env is None else env
    _quiet_logs(env, err)
    args = None
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
        return asyncio.run(run(args, out, err, env))
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    except KeyboardInterrupt:
        err.write("Received keyboard interrupt.\n")
        return 130
    except (UsageError, PlatformError) as e:
        code, message = error_message(e)
        where = e.command if isinstance(e, UsageError) else command_of(args)
        err.write(f"ERROR: ({where}) {message}\n")
        return code


if __name__ == "__main__":
    sys.exit(main())
