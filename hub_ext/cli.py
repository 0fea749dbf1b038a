"""`mlplatform`, the operator's command line.

    mlplatform check-config FILE     validate a jupyterhub_config.py or z2jh Helm values file
    mlplatform demo [--port N]       start the local platform (what `make demo` runs)

`check-config` reads ``c.PlatformConfig`` / ``c.LocalPlatformSpawner`` / ``c.PlatformSpawner``
settings and a plain ``c.KubeSpawner.profile_list``; from Helm values it reads
``singleuser.profileList`` and ``hub.config`` (also under a parent chart key such as
``jupyterhub:``). It prints each resolved profile with what it would request and exits 0, or
prints every problem with its field path and exits 1 (2 when the file cannot be read at all).
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


def load(path: pathlib.Path) -> dict[str, Any]:
    """The platform settings in a config or values file, as the configured spawner would see them."""
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
        return settings_from_config(c, "PlatformSpawner")
    try:
        c = PyFileConfigLoader(path.name, path=str(path.parent.resolve())).load_config()
    except ConfigError:
        raise
    except Exception as e:  # the operator's file: show what Python said, not a traceback
        raise Unreadable(f"cannot load {path}: {type(e).__name__}: {e}") from None
    spawner = str(c.JupyterHub.get("spawner_class", "")) if "JupyterHub" in c else ""
    return settings_from_config(c, spawner_section(spawner))


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


def check_config(path: pathlib.Path, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        settings = load(path)
        runtime = Runtime.parse(settings, kubespawner_traits())
    except Unreadable as e:
        print(f"error: {e}", file=err)
        return 2
    except ConfigError as e:
        for problem in e.problems:
            print(f"error: {problem}", file=err)
        print(f"{path}: {len(e.problems)} problem(s)", file=err)
        return 1
    print(f"{path}: OK, {len(runtime.accelerators)} accelerator(s), {len(runtime.profiles)} profile(s)", file=out)
    for line in describe(runtime):
        print(line, file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlplatform", description="jupyterhub-mlplatform operator tools")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check-config", help="validate a jupyterhub_config.py or Helm values file")
    check.add_argument("file", type=pathlib.Path)
    demo = sub.add_parser("demo", help="start the local platform on http://127.0.0.1:8000")
    demo.add_argument("--port", type=int, default=None)
    demo.add_argument("--state-dir", type=pathlib.Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "check-config":
        if not args.file.exists():
            print(f"error: {args.file}: no such file", file=sys.stderr)
            return 2
        return check_config(args.file)
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
