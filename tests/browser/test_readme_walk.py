"""The README walked as a newcomer walks it (issue 39): the commands it gives for "a demo
notebook's terminal", typed as written into a JupyterLab terminal of a server started through the
spawn form, in `make demo` (the local runtime) and in `make demo-kube` (the Kubernetes runtime:
the notebook's `kubectl ai-platform` talks to its server's jobs API, which runs the job on real
Kubeflow Trainer v2 and the sweep on real Katib with TrainJob trials). Each command must exit 0; a broken path (a
command not on PATH, an example that does not run, a flag the CLI lost) fails here.

The commands are read from README.md (the ``shell`` block after "In a demo notebook's terminal"),
not copied. After each one the test types one line of its own, ``echo "<n> $?" >> <file>``, and reads
that file from the host (the server's home is a directory here), so it knows when each command
ended and how. The time of each command and of the whole walk is printed. In `make demo` alice
walks it (here); in `make demo-kube` carol, as anyone else of the README's table may
(`tests/browser/test_demo_kube.py`, whose tests share one demo).
"""

from __future__ import annotations

import os
import pathlib
import re
import sys
import time

import pytest

from hub_ext.local.demo import DemoSecrets, demo_config, demo_source
from tests.conftest import ROOT
from tests.harness.browser import screenshot
from tests.harness.demo_kube_process import log_in, start_in_lab

pytestmark = pytest.mark.browser

USER = "alice"
LEAD = re.compile(r"In a demo\s+notebook's terminal")
RESULTS = ".readme-walk"


def readme_terminal_commands() -> list[list[str]]:
    """The README's commands for a demo notebook's terminal, each as its lines (continuations kept)."""
    text = (ROOT / "README.md").read_text()
    lead = LEAD.search(text)
    assert lead, f"README.md: no {LEAD.pattern!r}"
    block = re.search(r"```shell\n(.*?)```", text[lead.end():], re.S)
    assert block, f"README.md: no shell block after {LEAD.pattern!r}"
    commands, current = [], []
    for line in block.group(1).splitlines():
        if not line.strip():
            continue
        current.append(line)
        if not line.endswith("\\"):
            commands.append(current)
            current = []
    assert commands and not current
    return commands


def open_terminal(page, lab: str) -> None:
    """A new terminal in JupyterLab (its launcher's card), focused."""
    page.goto(f"{lab}/lab")
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)
    card = page.locator('.jp-LauncherCard[data-category="Other"][title*="terminal" i], '
                        '.jp-LauncherCard:has-text("Terminal")').first
    card.wait_for(timeout=60_000)
    card.click()
    term = page.locator(".jp-Terminal").last
    term.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)  # the shell's prompt
    term.click()


def walk(page, lab: str, home: pathlib.Path, timeout: float = 600) -> list[tuple[str, int, float]]:
    """Type each README command into a terminal; (command, exit status, seconds) for each."""
    commands = readme_terminal_commands()
    results = home / RESULTS
    results.unlink(missing_ok=True)
    open_terminal(page, lab)
    out = []
    for n, lines in enumerate(commands):
        started = time.monotonic()
        for line in lines:
            page.keyboard.type(line)
            page.keyboard.press("Enter")
        page.keyboard.type(f'echo "{n} $?" >> ~/{RESULTS}')
        page.keyboard.press("Enter")
        deadline = started + timeout
        while True:
            done = dict(ln.split() for ln in results.read_text().splitlines()) if results.exists() else {}
            if str(n) in done:
                out.append((" ".join(x.rstrip("\\").strip() for x in lines), int(done[str(n)]),
                            time.monotonic() - started))
                break
            assert time.monotonic() < deadline, f"README command {lines} still running after {timeout} s"
            time.sleep(0.5)
    return out


def job_state(page, lab: str, project: str, job: str) -> str:
    """The jobs API's state of `job` (what `--stream-logs` waited for)."""
    answer = page.request.get(f"{lab}/ml/v1/projects/{project}/jobs/{job}")
    assert answer.ok, answer.text()
    return answer.json()["state"]


def report(where: str, results: list[tuple[str, int, float]], total: float) -> None:
    print(f"\nREADME walk in {where}: {total:.1f} s")
    for command, code, seconds in results:
        print(f"  {seconds:6.1f} s  exit {code}  {command}")


def login_and_start(page, url: str, password: str, user: str, profile: str, project_label: str) -> float:
    """Log in as `user` and start a server; seconds from Start to JupyterLab."""
    log_in(page, url, password, user)
    page.get_by_label(profile).check()
    page.get_by_label(project_label).check()
    clicked = time.monotonic()
    start_in_lab(page, user)
    return time.monotonic() - clicked


def test_the_readme_walk_in_make_demo(hub_factory, browser_page, tmp_path):
    demo_secrets = DemoSecrets.generate()
    state = tmp_path / "state"
    hub = hub_factory(demo_source(demo_config(demo_secrets, state_dir=state, python=sys.executable,
                                              allow_root=os.geteuid() == 0)))
    page = browser_page
    started = time.monotonic()
    spawn = login_and_start(page, hub.url, demo_secrets.user_password, USER, "CPU only", "Personal")
    print(f"\nmake demo: Start to JupyterLab {spawn:.1f} s")
    results = walk(page, f"{hub.url}/user/{USER}", state / "users" / USER)
    screenshot(page, "readme-walk-demo-terminal")
    report("make demo", results, time.monotonic() - started)
    assert [(c, code) for c, code, _ in results] == [(c, 0) for c, _, _ in results]
    assert job_state(page, f"{hub.url}/user/{USER}", f"user-{USER}", "census_1") == "SUCCEEDED"
