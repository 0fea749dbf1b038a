"""`mlplatform`, the operator's command line.

    mlplatform check-config FILE [FILE ...]
                                     validate a jupyterhub_config.py, or z2jh Helm values files
                                     merged as ``helm -f a.yaml -f b.yaml`` merges them
    mlplatform render-project --config FILE --user NAME [--group G ...] [--admin]
                                     the Kubernetes objects of that user's projects, as YAML
    mlplatform doctor [--config FILE ...] [--kubeconfig F] [--context C] [--hub-account NS/NAME] [--json]
                                     check a cluster for everything the platform needs, each problem
                                     with its fix (`hub_ext.cli.doctor`)
    mlplatform demo [--port N]       start the local platform (what `make demo` runs)
    mlplatform operator [...]        the cluster side (`hub_ext.operator`): credential webhooks and
                                     the dataset loader controller, on kopf

`check-config` reads ``c.PlatformConfig`` / ``c.LocalPlatformSpawner`` / ``c.PlatformSpawner``
settings and a plain ``c.KubeSpawner.profile_list`` (without ``spawner_class``, profiles on
KubeSpawner or PlatformSpawner mean the Kubernetes spawner, as `hub_ext.setup.configure` decides);
from Helm values it reads ``singleuser.profileList`` and ``hub.config`` (also under a parent chart
key such as ``jupyterhub:``) of the files merged as Helm merges ``-f`` files (maps merged key by
key, anything else replaced, later files win, ``null`` removes a key). A file of several YAML
documents is refused, saying what it holds. It prints each resolved profile with what it would
request and exits 0, or prints every problem with its path as written in the file
(``singleuser.profileList[0].slug``, ``PlatformConfig.groups['vision']``) and exits 1 (2 when a
file cannot be read at all). Warnings (keys KubeSpawner or the platform's spawner would ignore,
with a did-you-mean) are printed either way and do not change the exit status. A callable
``profile_list`` is reported as such: it is checked at each spawn.

`render-project` (`hub_ext.cli.render`) prints, like ``helm template``, every object the hub would
create or keep in the user's project namespaces (personal project first, then team projects):
exit 0; 1 with every problem of a file with problems; 2 when the file cannot be read or
configures the local runtime (which makes no Kubernetes objects).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any


from hub_ext.cli import doctor
from hub_ext.cli.config_files import Unreadable, load_config, load_located
from hub_ext.core.errors import ConfigError, Problem
from hub_ext.core.profiles import resolve
from hub_ext.setup import locate, located_settings, unread_keys
from hub_ext.spawners.runtime import Runtime, kubespawner_traits


def load(path: pathlib.Path, *more: pathlib.Path) -> dict[str, Any]:
    """The platform settings in a config file or values files, as the configured spawner would see them."""
    c, section = load_config(path, *more)
    return located_settings(c, section)[0]


def describe(runtime: Runtime) -> list[str]:
    lines = []
    for p in runtime.profiles:
        settings = resolve(p, {})
        limits = settings.get("extra_resource_limits") or {}
        parts = [f"{res}={n}" for res, n in limits.items()]
        for trait in ("cpu_guarantee", "cpu_limit", "mem_guarantee", "mem_limit", "image"):
            if settings.get(trait) is not None:
                parts.append(f"{trait}={settings[trait]}")
        if settings.get("node_selector"):
            parts.append("node_selector=" + ",".join(f"{k}={v}" for k, v in settings["node_selector"].items()))
        mark = " (default)" if p.default else ""
        lines.append(f"  {p.slug}{mark}: {p.display_name}\n      " + (", ".join(parts) or "no resource settings"))
    return lines


def _problems(path: pathlib.Path, e: ConfigError, err) -> int:
    """Every problem of a file with problems, then their count; exit status 1."""
    for problem in e.problems:
        print(f"error: {problem}", file=err)
    print(f"{path}: {len(e.problems)} problem(s)", file=err)
    return 1


def _no_profiles(problem: Problem, profile_list_path: str, path: pathlib.Path, more) -> Problem:
    """"No profiles" of values files: at ``singleuser.profileList``, and for a lone file, the hint
    that an overlay is checked after the values it overlays."""
    if problem.message != "no profiles are configured" or not profile_list_path:
        return problem
    hint = "" if more else (f" ({path.name} holds none; if it is an overlay, give the base values file first, as "
                            f"to helm -f: mlplatform check-config values.yaml {path.name})")
    return Problem(profile_list_path, problem.message + hint)


def check_config(path: pathlib.Path, out=None, err=None, more: tuple[pathlib.Path, ...] = ()) -> int:
    """`path` (then the values files `more`, merged over it) checked; the exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    name = " + ".join(str(p) for p in (path, *more))
    try:
        c, section, prefix, profile_list_path = load_located(path, *more)
    except Unreadable as e:
        print(f"error: {e}", file=err)
        return 2
    settings, origins = located_settings(c, section)
    origins = {key: prefix + origin for key, origin in origins.items()}
    if profile_list_path and "profile_list" in origins and origins["profile_list"].endswith("KubeSpawner.profile_list"):
        origins["profile_list"] = profile_list_path
    warnings = [Problem(prefix + w.path, w.message) for w in unread_keys(c, section)]
    try:
        runtime = Runtime.parse(settings, kubespawner_traits())
    except ConfigError as e:
        problems = [_no_profiles(locate(p, origins), profile_list_path, path, more) for p in e.problems]
        for w in warnings:
            print(f"warning: {w}", file=err)
        return _problems(pathlib.Path(name), ConfigError(problems), err)
    for w in [*warnings, *(locate(w, origins) for w in runtime.warnings)]:
        print(f"warning: {w}", file=err)
    print(f"{name}: OK, {len(runtime.accelerators)} accelerator(s), {len(runtime.profiles)} profile(s)", file=out)
    if runtime.dynamic is not None:
        print(f"  {origins.get('profile_list', 'profile_list')} is a function of the spawner: its profiles are "
              "checked each time it is called (each spawn form and spawn)", file=out)
    for line in describe(runtime):
        print(line, file=out)
    return 0


def render_project(path: pathlib.Path, user: str, groups: list[str], admin: bool, out=None, err=None) -> int:
    from hub_ext.cli.render import NotKubernetes, render_file

    out, err = out or sys.stdout, err or sys.stderr
    if not user.strip():
        print("error: --user: must be a hub user name, not empty", file=err)
        return 2
    try:
        text = render_file(path, user, groups, admin)
    except (Unreadable, NotKubernetes) as e:
        print(f"error: {e}", file=err)
        return 2
    except ConfigError as e:
        return _problems(path, e, err)
    out.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["operator"]:  # its own flags (hub_ext.operator.rules.settings), and kopf only there
        from hub_ext.operator.main import main as operator_main

        return operator_main(argv[1:])
    parser = argparse.ArgumentParser(prog="mlplatform", description="jupyterhub-mlplatform operator tools")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check-config", help="validate a jupyterhub_config.py or Helm values files",
                           description="Validate a jupyterhub_config.py, or z2jh values files merged in order as "
                                       "helm -f a.yaml -f b.yaml merges them.")
    check.add_argument("file", type=pathlib.Path, nargs="+", metavar="FILE",
                       help="jupyterhub_config.py, or values.yaml then overlays (login-github.yaml ...)")
    render = sub.add_parser(
        "render-project", help="print the Kubernetes objects of a user's projects (like helm template)",
        description="Print, as multi-document YAML, every object the hub would create or keep for the user's "
                    "projects (personal project first, then team projects), from a jupyterhub_config.py or z2jh "
                    "values file. Exit 1 with every problem of a file with problems, 2 when it cannot be read.")
    render.add_argument("--config", required=True, type=pathlib.Path, metavar="FILE",
                        help="jupyterhub_config.py or z2jh values.yaml")
    render.add_argument("--user", required=True, metavar="NAME", help="the hub user name")
    render.add_argument("--group", action="append", default=[], metavar="G",
                        help="a JupyterHub group of the user (repeat for several)")
    render.add_argument("--admin", action="store_true", help="the user is a hub admin (every project; no limits in their own)")
    doctor.add_parser(sub)
    demo = sub.add_parser("demo", help="start the local platform on http://127.0.0.1:8000")
    demo.add_argument("--port", type=int, default=None)
    demo.add_argument("--state-dir", type=pathlib.Path, default=None)
    sub.add_parser("operator", add_help=False,
                   help="the cluster side: credential webhooks and the dataset loader (see mlplatform operator --help)")
    args = parser.parse_args(argv)
    if args.command == "check-config":
        for f in args.file:
            if not f.exists():
                print(f"error: {f}: no such file", file=sys.stderr)
                return 2
        return check_config(args.file[0], more=tuple(args.file[1:]))
    if args.command == "doctor":
        return doctor.run(args)
    if args.command == "render-project":
        if not args.config.exists():
            print(f"error: {args.config}: no such file", file=sys.stderr)
            return 2
        return render_project(args.config, args.user, args.group, args.admin)
    from hub_ext.local.demo import main as demo_main

    demo_args = []
    if args.port is not None:
        demo_args += ["--port", str(args.port)]
    if args.state_dir is not None:
        demo_args += ["--state-dir", str(args.state_dir)]
    demo_main(demo_args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
