"""Benchmark (prints figures, asserts nothing, exits 0) of P8, login → notebook ready: the time a
user waits from the hub's login form to a single-user server answering through the proxy, on the
local runtime (the demo's `LocalPlatformSpawner`) beside stock JupyterHub's
`SimpleLocalProcessSpawner`, the baseline, in the same process (goal: ≤ 1.2× the baseline).

    .venv/bin/python -m tests.bench.login_ready [--rounds 5]   (or: make bench)

Each spawner gets a real hub (`tests.harness.hub.HubProcess`: jupyterhub + configurable-http-proxy)
with the demo's configuration, differing only in ``JupyterHub.spawner_class``. A round, as a browser
would do it: log in through the HTML form, start the default server (the hub API, with the session's
cookie and XSRF token), then poll ``/user/<name>/api/status`` through the proxy until it answers
200 (its first 403, the server up but not yet authorised, is followed by the OAuth dance that a
browser's first page load does); then the server is stopped (not timed). The spawners alternate
round by round so that both see the same machine load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

from hub_ext.local.demo import DemoSecrets, demo_config, demo_source, find_proxy_command
from tests.bench.figures import table
from tests.harness.hub import HubProcess
from tests.hub.test_hub_harness import form_login

USER = "alice"
SPAWNERS = {
    "LocalPlatformSpawner (ours)": None,  # the demo's own spawner_class
    "SimpleLocalProcessSpawner (stock)": "jupyterhub.spawner.SimpleLocalProcessSpawner",
}


def hub_source(state: Path, secrets: DemoSecrets, spawner_class: str | None) -> str:
    settings = demo_config(secrets, state_dir=state, python=sys.executable, allow_root=os.geteuid() == 0,
                           proxy_command=find_proxy_command())
    if spawner_class:
        settings["JupyterHub"]["spawner_class"] = spawner_class
    return demo_source(settings)


def login_to_ready(hub: HubProcess, password: str, timeout: float = 120) -> float:
    """One round: seconds from the login form to ``api/status`` answering through the proxy."""
    t0 = time.perf_counter()
    session, r = form_login(hub.url, USER, password)
    if r.status_code != 302:
        raise RuntimeError(f"login refused: {r.status_code}")
    r = session.post(f"{hub.api_url}/users/{USER}/server", headers={"X-XSRFToken": session.cookies["_xsrf"]},
                     timeout=60)
    if r.status_code not in (201, 202):
        raise RuntimeError(f"spawn refused: {r.status_code} {r.text[:200]}")
    deadline = t0 + timeout
    while time.perf_counter() < deadline:
        try:
            status = session.get(f"{hub.url}/user/{USER}/api/status", timeout=30)
            if status.status_code == 200 and "started" in status.text:
                return time.perf_counter() - t0
            if status.status_code == 403:  # the server answers: the OAuth dance sets its cookie
                session.get(f"{hub.url}/user/{USER}/", timeout=60)
                continue
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"not ready in {timeout}s:\n{hub.log_tail()}")


def stop_server(hub: HubProcess) -> None:
    hub.api("DELETE", f"/users/{USER}/server")
    deadline = time.monotonic() + 60
    while hub.api("GET", f"/users/{USER}").json()["servers"] and time.monotonic() < deadline:
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="logins per spawner")
    args = parser.parse_args(argv)
    secrets = DemoSecrets.generate()
    with tempfile.TemporaryDirectory(prefix="bench-login-") as tmp:
        hubs = {}
        try:
            for i, (name, cls) in enumerate(SPAWNERS.items()):
                directory = Path(tmp) / f"hub{i}"
                hubs[name] = HubProcess(hub_source(directory / "state", secrets, cls), directory).start()
            times: dict[str, list[float]] = {name: [] for name in SPAWNERS}
            for _ in range(args.rounds):
                for name, hub in hubs.items():
                    times[name].append(login_to_ready(hub, secrets.user_password))
                    stop_server(hub)
        finally:
            for hub in hubs.values():
                hub.stop(check=False)
    print(f"P8 login → notebook ready (api/status through the proxy), {args.rounds} rounds per spawner")
    print(table(times, "spawner", ("min", min)))
    ours, stock = (statistics.median(v) for v in times.values())
    print(f"ratio (ours / stock, medians): {ours / stock:.2f}× (goal ≤ 1.2×)")


if __name__ == "__main__":
    main()
