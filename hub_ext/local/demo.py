"""The local demo: a real JupyterHub on one machine, started by ``make demo``.

Run it with ``python -m hub_ext.local.demo [--port 8000] [--state-dir .demo]`` (the port also comes
from ``DEMO_PORT``). It starts ``jupyterhub`` in the foreground with the real
configurable-http-proxy, :class:`~jupyterhub.authenticators.shared.SharedPasswordAuthenticator`
and :class:`~jupyterhub.spawner.SimpleLocalProcessSpawner` (single-user servers are local
processes; their home directories are ``<state-dir>/users/<name>``).

What this module guarantees:

- :func:`demo_config` is pure: it takes the secrets and the ports and returns the whole hub
  configuration as a ``{"Class": {"trait": value}}`` dict, with no I/O and no randomness, so a
  test can start the very same hub on free ports. :func:`render_config` turns such a dict into
  ``jupyterhub_config.py`` source (values are written with ``repr``).
- Everything listens on 127.0.0.1 only: the public proxy port, the proxy API, the hub and the
  single-user servers.
- :meth:`DemoSecrets.generate` makes fresh random passwords on every run (the user password is
  16 characters, the admin password 43, both above SharedPasswordAuthenticator's minimums and
  never equal). They are printed once, to this process's stdout, by :func:`banner`. They are
  written only to the generated config file (mode 0600, in the git-ignored state dir); they are
  never put in any environment variable, so neither the proxy nor any single-user server can
  see them, and the hub does not log them. The cookie secret is regenerated on every run, so
  browser sessions of a previous run (and its password) are logged out.
- The state dir is its OS user's only (:func:`prepare_state_dir`): the directory is ``0700``,
  what an earlier run left readable by group or others is tightened, and the hub starts with
  umask ``077``, which the proxy, the single-user servers and their jobs inherit, so the
  database, the cookie secret, pid files, device allocations, job records and logs and the
  users' home directories are created ``0600``/``0700``. This keeps other OS accounts of the
  machine out; it does not separate the demo's users from each other (they are one OS account:
  see "Trust model" in ``docs/platform.md``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from hub_ext.core.ports import free_port  # noqa: F401  (the demo harnesses take it from here too)
from hub_ext.local.files import PRIVATE_UMASK, private_dir, tighten

#: The project root of a source checkout (where ``node_modules/`` lives).
PROJECT_ROOT = Path(__file__).resolve().parents[2]

AUTHENTICATOR = "jupyterhub.authenticators.shared.SharedPasswordAuthenticator"
SPAWNER = "platform-local"  # hub_ext.spawners.local.LocalPlatformSpawner

#: The demo's example catalogue over a declared inventory, so it works on a machine without GPUs:
#: CPU only, one whole GPU, two MIG 1g.5gb slices and one MIG 3g.20gb slice; two groups
#: ("vision" with a team project and MIG 1g.5gb slices, "research" with the 3g.20gb slice and
#: the GPU) whose members "alice" and "bob" see different profiles.
DEMO_PLATFORM = {
    "accelerators": {
        "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB", "display_name": "NVIDIA A100 40GB"},
        "1g.5gb": {"type": "mig", "profile": "1g.5gb", "display_name": "MIG 1g.5gb slice"},
        "3g.20gb": {"type": "mig", "profile": "3g.20gb", "display_name": "MIG 3g.20gb slice"},
    },
    "profiles": {
        "cpu": {"display_name": "CPU only", "description": "For editing and small experiments",
                "cpu": {"guarantee": 0.5, "limit": 2}, "memory": {"guarantee": "1G", "limit": "4G"},
                "default": True},
        "mig-1g": {"display_name": "Small GPU slice", "description": "One MIG 1g.5gb slice of an A100",
                   "accelerator": "1g.5gb", "cpu": {"limit": 4}, "memory": {"limit": "16G"}},
        "mig-3g": {"display_name": "Medium GPU slice", "description": "One MIG 3g.20gb slice of an A100",
                   "accelerator": "3g.20gb", "cpu": {"limit": 8}, "memory": {"limit": "32G"}},
        "gpu": {"display_name": "Whole GPU", "description": "One NVIDIA A100 40GB",
                "accelerator": "a100", "cpu": {"limit": 16}, "memory": {"limit": "64G"}},
    },
    "everyone": {"profiles": ["cpu"], "limits": {}},
    "groups": {
        "vision": {"project": "vision", "display_name": "Vision team", "profiles": ["cpu", "mig-1g"],
                   "limits": {"1g.5gb": 2}},
        "research": {"profiles": ["cpu", "mig-3g", "gpu"], "limits": {"3g.20gb": 1, "a100": 1}},
    },
    "inventory": {
        "GPU-demo-a100-0": {"type": "gpu", "product": "NVIDIA A100-SXM4-40GB"},
        "MIG-demo-1g5gb-0": {"type": "mig", "profile": "1g.5gb"},
        "MIG-demo-1g5gb-1": {"type": "mig", "profile": "1g.5gb"},
        "MIG-demo-3g20gb-0": {"type": "mig", "profile": "3g.20gb"},
    },
}
DEMO_GROUPS = {"vision": {"users": ["alice"]}, "research": {"users": ["bob"]}}
ADMIN_USER = "admin"
DEFAULT_PORT = 8000


@dataclass(frozen=True)
class DemoSecrets:
    """The two shared passwords of a demo hub (any username + ``user_password``;
    ``admin`` + ``admin_password``)."""

    user_password: str
    admin_password: str

    @classmethod
    def generate(cls) -> DemoSecrets:
        """Fresh random passwords: 16 URL-safe characters for users, 43 for the admin."""
        return cls(
            user_password=secrets.token_urlsafe(12),
            admin_password=secrets.token_urlsafe(32),
        )

    def __repr__(self) -> str:  # keep passwords out of tracebacks and logs
        return "DemoSecrets(user_password=<hidden>, admin_password=<hidden>)"


def demo_config(
    demo_secrets: DemoSecrets,
    *,
    state_dir: Path,
    port: int = DEFAULT_PORT,
    hub_port: int = 8081,
    proxy_api_port: int = 8001,
    proxy_command: str = "configurable-http-proxy",
    python: str = sys.executable,
    allow_root: bool = False,
) -> dict[str, dict[str, object]]:
    """The demo hub's configuration, as ``{"Class": {"trait": value}}``.

    ``python`` is the interpreter that runs the single-user servers (``-m
    jupyterhub.singleuser``); ``allow_root`` lets them run as root (CI containers).
    """
    state_dir = Path(state_dir)
    spawner_args = ["--ServerApp.allow_root=True"] if allow_root else []
    return {
        "JupyterHub": {
            "bind_url": f"http://127.0.0.1:{port}",
            "hub_ip": "127.0.0.1",
            "hub_port": hub_port,
            "authenticator_class": AUTHENTICATOR,
            "spawner_class": SPAWNER,
            "db_url": f"sqlite:///{state_dir / 'jupyterhub.sqlite'}",
            "cookie_secret_file": str(state_dir / "jupyterhub_cookie_secret"),
            "pid_file": str(state_dir / "jupyterhub.pid"),
            "cleanup_servers": True,
            "cleanup_proxy": True,
            "allow_named_servers": True,
            "load_groups": DEMO_GROUPS,
        },
        "ConfigurableHTTPProxy": {
            "command": [proxy_command],
            "api_url": f"http://127.0.0.1:{proxy_api_port}",
            "pid_file": str(state_dir / "jupyterhub-proxy.pid"),
        },
        "Authenticator": {
            "allow_all": True,
            "admin_users": {ADMIN_USER},
        },
        "SharedPasswordAuthenticator": {
            "user_password": demo_secrets.user_password,
            "admin_password": demo_secrets.admin_password,
        },
        "Spawner": {
            "cmd": [python, "-m", "jupyterhub.singleuser"],
            "args": spawner_args,
            "ip": "127.0.0.1",
            "start_timeout": 120,
            "http_timeout": 90,
            # the example training package, for `cp -r $MLPLATFORM_EXAMPLES/trainer .` in a notebook
            "environment": {"MLPLATFORM_EXAMPLES": str(PROJECT_ROOT / "examples")},
        },
        "SimpleLocalProcessSpawner": {
            "home_dir_template": str(state_dir / "users" / "{username}"),
        },
        "LocalPlatformSpawner": {**DEMO_PLATFORM, "state_dir": str(state_dir / "platform")},
    }


def render_config(settings: dict[str, dict[str, object]]) -> str:
    """``jupyterhub_config.py`` source for ``{"Class": {"trait": value}}`` settings.

    Keys may also be flat (``{"Class.trait": value}``). Values must round-trip through
    ``repr`` (str, int, bool, None, lists, dicts, sets of those).
    """
    lines = ["# Generated; do not edit.", "c = get_config()  # noqa: F821"]
    for key, value in settings.items():
        if isinstance(value, dict) and "." not in key:
            for trait, trait_value in value.items():
                lines.append(f"c.{key}.{trait} = {trait_value!r}")
        else:
            lines.append(f"c.{key} = {value!r}")
    return "\n".join(lines) + "\n"


CONFIGURE = "\nfrom hub_ext.setup import configure\n\nconfigure(c)  # validates the platform, adds its API\n"


def demo_source(settings: dict[str, dict[str, object]]) -> str:
    """The demo's ``jupyterhub_config.py``: the settings, then the platform's `configure(c)`."""
    return render_config(settings) + CONFIGURE


def find_proxy_command(root: Path = PROJECT_ROOT) -> str:
    """configurable-http-proxy from ``<root>/node_modules/.bin``, else from ``PATH``."""
    local = root / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return str(local)
    found = shutil.which("configurable-http-proxy")
    if found is None:
        raise SystemExit(
            "configurable-http-proxy not found: run `make node_modules` (npm install) first"
        )
    return found


def banner(url: str, demo_secrets: DemoSecrets) -> str:
    """The one place the passwords are shown: the terminal of whoever ran the demo."""
    return (
        "\n"
        "  JupyterHub demo (local runtime)\n"
        f"    URL:       {url}/hub/login\n"
        f"    Username:  any name; 'alice' (group vision: MIG 1g.5gb slices, team project) and\n"
        f"               'bob' (group research: MIG 3g.20gb slice, whole GPU) see more profiles\n"
        f"    Password:  {demo_secrets.user_password}\n"
        f"    Admin:     user '{ADMIN_USER}', password {demo_secrets.admin_password}\n"
        "  Trusted users only: every user's server and jobs run as this OS account and can read\n"
        "  each other's files (docs/platform.md, \"Trust model\").\n"
        "  Stop with Ctrl-C.\n"
    )


def write_config(path: Path, source: str) -> None:
    """Write the config file readable by its owner only (it holds the passwords), in a private
    directory."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an existing file (an earlier run's) is private before the passwords go in
    with os.fdopen(fd, "w") as f:
        f.write(source)


def prepare_state_dir(state_dir: Path) -> list[str]:
    """Make `state_dir` (and ``users/`` in it) private and tighten what an earlier run left there.
    Returns the paths that could not be tightened (another OS user's)."""
    private_dir(state_dir)
    left = tighten(state_dir)
    private_dir(state_dir / "users")
    return left


def main(argv: list[str] | None = None) -> None:
    """Generate secrets and config into the state dir, print the banner, exec jupyterhub."""
    parser = argparse.ArgumentParser(prog="python -m hub_ext.local.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", DEFAULT_PORT)))
    parser.add_argument("--state-dir", type=Path, default=Path(".demo"))
    args = parser.parse_args(argv)

    state_dir = args.state_dir.resolve()
    os.umask(PRIVATE_UMASK)  # the hub, the proxy, the servers and their jobs inherit it
    for path in prepare_state_dir(state_dir):
        print(f"warning: {path} belongs to another OS user and stays readable by others; remove it or "
              "make it private (chmod go-rwx)", file=sys.stderr)
    demo_secrets = DemoSecrets.generate()
    settings = demo_config(
        demo_secrets,
        state_dir=state_dir,
        port=args.port,
        hub_port=free_port(),
        proxy_api_port=free_port(),
        proxy_command=find_proxy_command(),
        allow_root=os.geteuid() == 0,
    )
    # a new password must not leave sessions of the previous run logged in
    (state_dir / "jupyterhub_cookie_secret").unlink(missing_ok=True)
    config_path = state_dir / "jupyterhub_config.py"
    write_config(config_path, demo_source(settings))

    print(banner(f"http://127.0.0.1:{args.port}", demo_secrets), flush=True)
    os.chdir(state_dir)
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub", "-f", str(config_path)])


if __name__ == "__main__":
    main()
