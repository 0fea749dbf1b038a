"""Entry point of ``kubectl ai-platform`` (the ``kubectl-ai_platform`` console script, so kubectl
finds it as a plugin)::

    kubectl ai-platform jobs submit training JOB [gcloud's flags…] [-- USER_ARGS…]
    kubectl ai-platform jobs list|describe|get|stream-logs|cancel …
    kubectl ai-platform local train --module-name M [--package-path DIR] [-- USER_ARGS…]

Guarantees:

- Exit codes as gcloud's: 0 ok; 1 the operation failed (no such job, the backend failed, a job
  streamed with ``--stream-logs`` or run by ``local train`` did not succeed); 2 a usage error or an
  invalid argument, in which case nothing was created.
- Every expected error (`UsageError`, the `hub_ext.errors`/`server_ext.errors` tree) is translated
  here, once, into one line on stderr in gcloud's shape, ``ERROR: (kubectl ai-platform.jobs.submit.training)
  Invalid value for [--master-accelerator]: …``, naming the flag or field; never a traceback.
- ``--dry-run`` needs no cluster and no backend, but refuses what the real command would refuse
  before submitting: it validates and plans the job with the built-in catalogue
  (`server_ext.jobs.defaults.DEFAULT_ACCELERATORS`), resolves ``--region`` through the region table
  (Kubernetes only), refuses a Katib Experiment on the local runtime, and builds ``--package-path``
  (in a temporary directory, removed after) to apply the same delivery rules as a submit (a
  ConfigMap when it fits, else ``--staging-bucket``, else exit 2). It prints only YAML documents on
  stdout: the Kubernetes objects of `server_ext.jobs.kubeflow.job_manifest`, followed by the
  package's ConfigMap (its ownerReference without the ``uid`` the created object gives it); with
  the local runtime, the ml.v1 Job as it would be recorded (no Kubernetes objects; a package that
  ships in a ConfigMap on Kubernetes is kept as a copy in the job's directory there, and the note
  says where). Notes (a staging URI, where a package goes, mounts checked only on submit) go to
  stderr.
- Every argument that needs no backend is checked before connecting (``describe --format`` too);
  the Kubernetes client library's own log lines (such as "Config not found") are kept off the
  terminal, as the platform's are, unless ``MLPLATFORM_DEBUG=1``.
- `open_target(args)` picks where the jobs are, as `target_of` decides (pure):

  - ``local train`` → its own `LocalBackend` on a fresh directory of its own,
    ``<state_dir>/local-train/<jobId>/`` (`local_train_dir`), so it never shares a notebook
    server's state (as gcloud's, the run is not a job of ``jobs list``; its log stays there);
  - ``--local``, ``MLPLATFORM_LOCAL=1`` or ``local: true`` in the plugin's settings file
    (`server_ext.config.cli_config`): inside a notebook server that runs the local runtime
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
  it names, with one note on stderr per command (`server_ext.config.region_note`), ``--dry-run``
  and a Katib Experiment included; with a table, a region it lacks is refused naming
  ``--region`` and the regions it has.

  The commands a submit suggests (``$ kubectl ai-platform jobs describe JOB``) repeat the flags
  that chose the target (``--local`` outside a server, ``--context``, ``--region``,
  ``--project``), so they work as printed.
- The project is ``--project``/``--namespace``/``-n``, else ``$MLPLATFORM_PROJECT``, else the
  context's namespace (Kubernetes), else the caller's personal project
  (`hub_ext.entitlements.personal_project_name` of ``$JUPYTERHUB_USER``, else of the OS user).
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
import tempfile
from typing import Awaitable, Callable, Mapping, TextIO

from hub_ext.entitlements import personal_project_name
from hub_ext.errors import ConfigError, PlatformError, UpstreamError, UserInputError
from hub_ext.logs import LOGGER
from hub_ext.mounts import Available
from server_ext.client import RemoteService, from_environment
from server_ext.client.environment import server_from_environment
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs import package
from server_ext.jobs.local_package import SHIPPED_DIR
from server_ext.jobs.backend import JobBackend
from server_ext.jobs.model import parse_job
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS, DEFAULT_CREDENTIAL_TYPES
from server_ext.jobs.plan import JobPlan, PlanSettings, plan_job, with_package
from server_ext.jobs.service import LOCAL_EXPERIMENT, Files, JobService
from server_ext.jobs.tables import JobTables
from server_ext.config import cli_config, context_for_region, region_note

from . import commands, output
from .flags import (PROG, UsageError, command_path, flagged, flags_to_job, is_experiment, local_train_job,
                    mounts_from_flags, parse_args)

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
    from server_ext.config import default_state_dir

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


def _service(backend: JobBackend, settings: PlanSettings, project: str, files: Files,
             close: Closer) -> tuple[JobService, str, Closer]:
    async def projects(caller: str) -> list[str]:
        return [project]  # Kubernetes RBAC gates projects; the local runtime trusts its users

    return JobService(backend, settings, projects, files), project, close


def _local_files(env: Mapping[str, str]) -> Files:
    """The local runtime's credentials and datasets: the files under ``MLPLATFORM_PROJECTS_DIR``."""
    import pathlib

    from hub_ext.local_files import project_files

    root = env.get("MLPLATFORM_PROJECTS_DIR")

    async def files(project: str) -> Available:
        return project_files(pathlib.Path(root), project) if root else Available()

    return files


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
        return _service(*await _open_local(args, user, env, run_dir))
    if target == "local":
        return _service(*await _open_local(args, user, env, state_dir(env)))
    return _service(*await _open_backend(args, user, err, env))


async def _open_local(args: argparse.Namespace, user: str, env: Mapping[str, str],
                      state: pathlib.Path) -> tuple[JobBackend, PlanSettings, str, Files, Closer]:
    """A started `LocalBackend` on `state`, as `_open_backend` answers."""
    from server_ext.jobs.local_backend import LocalBackend

    project = project_of(args, user, env)  # before the backend's threads start importing
    backend = LocalBackend(state)
    await backend.start()

    return backend, _tables(env).plan_settings(DEFAULT_ACCELERATORS), project, _local_files(env), backend.close


async def _open_backend(args: argparse.Namespace, user: str, err: TextIO,
                        env: Mapping[str, str]) -> tuple[JobBackend, PlanSettings, str, Files, Closer]:
    """(started Kubernetes backend, plan settings, project, where its credentials and datasets are
    chosen from, what closes the backend and its connections)."""
    from hub_ext.cluster import list_available
    from hub_ext.kube_mounts import MountSettings
    from server_ext.jobs.kube_backend import KubeBackend
    from server_ext.kube_target import connect, published

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
    mounts = MountSettings(DEFAULT_CREDENTIAL_TYPES)
    tables = _tables(env)
    backend = KubeBackend(kube, tables.kube_settings(mounts))
    # the user's own RBAC decides which Secrets and PVCs they may mount (Secrets read only if asked for)
    wants_credentials = bool(getattr(args, "credentials", None))

    async def close() -> None:
        await backend.close()
        await kube.api_client.close()

    return backend, tables.plan_settings(found.accelerators, found.limits), project, \
        lambda p: list_available(kube, p, mounts, credentials=wants_credentials), close


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


async def _with_built_package(plan: JobPlan, package_path: str, staging_bucket: str | None, tmp: pathlib.Path,
                               err: TextIO, kept_in: pathlib.Path | None = None) -> JobPlan:
    """`plan` with the package built from `package_path` into `tmp`, by `JobService.create`'s steps
    and rules (errors name ``--package-path`` or ``--staging-bucket``). `kept_in`: the local
    runtime's state directory, which keeps a copy of a package that would ship in a ConfigMap on
    Kubernetes in the job's own directory instead (the note says where)."""
    if not plan.python_module:
        raise UserInputError("--package-path", "needs a pythonModule (--module-name) to run from the package")
    if staging_bucket:
        package.check_staging_bucket(staging_bucket)
    sdist = await package.build_sdist(pathlib.Path(package_path), tmp)
    sha256, size = await asyncio.to_thread(package.digest, sdist)
    plan = with_package(plan, sdist, sha256, size, staging_bucket=staging_bucket, limit=package.CONFIGMAP_LIMIT)
    shipped = plan.package
    assert shipped is not None
    if shipped.delivery == "bucket":
        where = f"would be staged to {shipped.uri}"
    elif kept_in is not None:
        copy = kept_in / "jobs" / plan.project / plan.job.job_id / SHIPPED_DIR / shipped.filename
        where = (f"would be kept as a copy in the job's directory, {copy} (the job's packageUris names it "
                 f"{shipped.uri}, as on Kubernetes)")
    else:
        where = f"would ship as {shipped.uri}"
    err.write(f"note: {shipped.filename} ({size} bytes), built from {package_path}, {where}\n")
    return plan


def _package_configmap(plan: JobPlan, obj: dict) -> dict:
    """The ConfigMap that carries `plan`'s package, owned by `obj` (the manifest to be created)."""
    shipped = plan.package
    assert shipped is not None
    owner = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": "assigned-on-create"}
    manifest = package.package_configmap(plan.name, plan.project, shipped.path.read_bytes(), shipped.filename, owner)
    for ref in manifest["metadata"]["ownerReferences"]:
        ref.pop("uid")
    return manifest


async def dry_run(args: argparse.Namespace, doc: dict, package_path: str | None, user: str, project: str,
                  out: TextIO, err: TextIO, env: Mapping[str, str] = os.environ) -> int:
    """Plan the job (`flags_to_job`'s) offline; print what would be created, as YAML documents."""
    import yaml

    local = is_local(args, env)
    if not local:  # as `_open_backend` does before connecting
        context_for_region(getattr(args, "region", None), cli_config(env).get("regions", {}),
                           getattr(args, "context", None))
    if is_experiment(doc):
        if local:
            raise UserInputError("kind", LOCAL_EXPERIMENT)
        from server_ext.jobs.native_experiment import native_experiment, notes

        manifest = native_experiment(doc, project, user)
        err.write("".join(n + "\n" for n in notes(doc, project)))
        out.write(yaml.safe_dump(manifest, default_flow_style=False, sort_keys=False))
        return 0
    job = parse_job(doc, shipped_package=package_path is not None)
    try:
        plan = plan_job(job, _tables(env).plan_settings(DEFAULT_ACCELERATORS), project=project, owner=user)
    except UserInputError as e:
        raise flagged(e, args) from None
    if mounts_from_flags(args):
        err.write("note: --credentials and --datasets are checked against the project, and mounted, only when "
                  "the job is submitted\n")
    with tempfile.TemporaryDirectory(prefix="mlplatform-dry-run-") as tmp:
        if package_path:
            plan = await _with_built_package(plan, package_path, getattr(args, "staging_bucket", None),
                                             pathlib.Path(tmp), err, kept_in=state_dir(env) if local else None)
        if local:
            out.write(output.to_yaml(plan.job.to_json()))
            return 0
        try:
            from hub_ext.kube_mounts import MountSettings
            from server_ext.jobs.kubeflow import job_manifest
        except ImportError as e:
            raise BackendUnavailable(f"the Kubernetes manifests cannot be built here ({e})") from None

        settings = _tables(env).kube_settings(MountSettings(DEFAULT_CREDENTIAL_TYPES))
        if plan.sweep is not None:
            from server_ext.jobs.katib import experiment_manifest

            manifest = experiment_manifest(plan, settings)
        else:
            manifest = job_manifest(plan, settings)
        docs = list(manifest) if isinstance(manifest, list) else [manifest]
        if plan.package is not None and plan.package.delivery == "configmap":
            docs.append(_package_configmap(plan, docs[0]))
        out.write(yaml.safe_dump_all(docs, default_flow_style=False, sort_keys=False))
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
    doc, package_path, run_dir = None, None, None
    if args.command == "submit":
        said: list[str] = []
        doc, package_path = flags_to_job(args, notes=said)
        err.write("".join(n + "\n" for n in said))
        if args.dry_run:
            return await dry_run(args, doc, package_path, user, project_of(args, user, env), out, err, env)
    elif args.command == "local-train":
        job_id, run_dir = local_train_dir(env, datetime.datetime.now(datetime.timezone.utc))
        doc = local_train_job(args, job_id, os.getcwd())
    elif args.command == "list":
        output.jobs_listing([], args.format)
    elif args.command == "describe" and not args.summarize:
        output.describe({}, args.format)
    target = target_of(args, env)
    service, project, close = await open_target(args, user, err, env, run_dir=run_dir)
    try:
        if is_experiment(doc) and target in ("kubernetes", "server"):
            from server_ext.jobs.native_experiment import native_experiment, notes

            native_experiment(doc, project, user)  # its refusal first, alone: the notes are for what is submitted
            err.write("".join(n + "\n" for n in notes(doc, project)))
        # settle: a LocalBackend of this process is the jobs' only supervisor while it runs
        ctx = commands.Context(service, user, project, out, err, scope=follow_up_scope(args, target),
                               settle=target in ("local", "local-train"))
        if args.command == "submit":
            return await commands.submit_training(ctx, args, doc, package_path)
        if args.command == "local-train":
            return await commands.local_train(ctx, doc)
        return await commands.COMMANDS[args.command](ctx, args)
    finally:
        await close()


def _quiet_logs(env: Mapping[str, str], err: TextIO) -> None:
    """The platform's own log lines (meant for server logs) and the Kubernetes client library's
    warnings (such as "Config not found", said better by our own error) stay off the terminal unless
    ``MLPLATFORM_DEBUG=1``; what the user needs is printed by the commands."""
    debug = env.get("MLPLATFORM_DEBUG", "").lower() in _TRUE
    logger = logging.getLogger(LOGGER)  # every module of the platform logs under it (hub_ext.logs)
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
