"""`mlplatform`, the operator's command line.

    mlplatform check-config FILE     validate a jupyterhub_config.py or z2jh Helm values file
    mlplatform render-project --config FILE --user NAME [--group G ...] [--admin]
                                     the Kubernetes objects of that user's projects, as YAML
    mlplatform demo [--port N]       start the local platform (what `make demo` runs)

`check-config` reads ``c.PlatformConfig`` / ``c.LocalPlatformSpawner`` / ``c.PlatformSpawner``
settings and a plain ``c.KubeSpawner.profile_list``; from Helm values it reads
``singleuser.profileList`` and ``hub.config`` (also under a parent chart key such as
``jupyterhub:``). It prints each resolved profile with what it would request and exits 0, or
prints every problem with its field path and exits 1 (2 when the file cannot be read at all).

`render-project` (`hub_ext.render`) prints, like ``helm template``, every object the hub would
create or keep in the user's project namespaces (personal project first, then team projects):
exit 0; 1 with every problem of a file with problems; 2 when the file cannot be read or
configures the local runtime (which makes no Kubernetes objects).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

import yaml
from traitlets.config import Config, PyFileConfigLoader

from .errors import ConfigError
from .platform import Runtime, kubespawner_traits
from .profiles import resolve
from .setup import settings_from_config, spawner_section



class Unreadable(Exception):
    pass


def _z2jh_root(values: Any) -> dict | None:
    if not isinstance(values, dict):
        return None
    if "singleuser" in values or "hub" in values:
        return values
    for value in values.values():
        if isinstance(value, dict) and ("singleuser" in value or "hub" in value):
            return value
    return None


def load_config(path: pathlib.Path) -> tuple[Config, str]:
    """The hub configuration in a config or values file, and which spawner section applies to it
    (``PlatformSpawner`` for a values file: z2jh's spawner is KubeSpawner)."""
    if path.suffix in (".yaml", ".yml"):
        try:
            values = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise Unreadable(f"cannot read {path}: {e}") from None
        root = _z2jh_root(values)
        if root is None:
            raise Unreadable(f"{path}: no z2jh 'singleuser' or 'hub' section found (also not under a parent key)")
        c = Config((root.get("hub") or {}).get("config") or {})
        profile_list = (root.get("singleuser") or {}).get("profileList")
        if profile_list:
            c.KubeSpawner.profile_list = profile_list
        return c, "PlatformSpawner"
    try:
        c = PyFileConfigLoader(path.name, path=str(path.parent.resolve())).load_config()
    except ConfigError:
        raise
    except Exception as e:  # the operator's file: show what Python said, not a traceback
        raise Unreadable(f"cannot load {path}: {type(e).__name__}: {e}") from None
    spawner = str(c.JupyterHub.get("spawner_class", "")) if "JupyterHub" in c else ""
    return c, spawner_section(spawner)


def load(path: pathlib.Path) -> dict[str, Any]:
    """The platform settings in a config or values file, as the configured spawner would see them."""
    c, section = load_config(path)
    return settings_from_config(c, section)


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


def check_config(path: pathlib.Path, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        settings = load(path)
        runtime = Runtime.parse(settings, kubespawner_traits())
    except Unreadable as e:
        print(f"error: {e}", file=err)
        return 2
    except ConfigError as e:
        return _problems(path, e, err)
    print(f"{path}: OK, {len(runtime.accelerators)} accelerator(s), {len(runtime.profiles)} profile(s)", file=out)
    for line in describe(runtime):
        print(line, file=out)
    return 0


def render_project(path: pathlib.Path, user: str, groups: list[str], admin: bool, out=None, err=None) -> int:
    from .render import NotKubernetes, render_file

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
    parser = argparse.ArgumentParser(prog="mlplatform", description="jupyterhub-mlplatform operator tools")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check-config", help="validate a jupyterhub_config.py or Helm values file")
    check.add_argument("file", type=pathlib.Path)
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
    render.add_argument("--admin", action="store_true", help="the user is a hub admin (every profile, no limits)")
    demo = sub.add_parser("demo", help="start the local platform on http://127.0.0.1:8000")
    demo.add_argument("--port", type=int, default=None)
    demo.add_argument("--state-dir", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "check-config":
        if not args.file.exists():
            print(f"error: {args.file}: no such file", file=sys.stderr)
            return 2
        return check_config(args.file)
    if args.command == "render-project":
        if not args.config.exists():
            print(f"error: {args.config}: no such file", file=sys.stderr)
            return 2
        return render_project(args.config, args.user, args.group, args.admin)
    from .demo import main as demo_main

    demo_args = []
    if args.port is not None:
        demo_args += ["--port", str(args.port)]
    if args.state_dir is not None:
        demo_args += ["--state-dir", str(args.state_dir)]
    demo_main(demo_args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
