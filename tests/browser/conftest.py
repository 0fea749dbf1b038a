"""The browser tier's `make demo-kube`: one per worker, shared by the tests that walk it.

Starting the demo (its control plane, Training Operator, Trainer v2, Kueue, Katib, operator and hub)
is most of what such a test costs, so the tests that use `demo` are one xdist group
(``DEMO_KUBE_GROUP``; the tier runs ``--dist loadgroup``): one worker runs them, one after another,
on one demo, each as a user of its own (`alice`, `bob`, `carol`: no test sees another's server,
projects or jobs). At the end of the session the demo gets Ctrl-C, and what must hold after it
(`tests.harness.demo_kube_process.stop_cleanly`) is checked: a failure there errors the tier.
"""

from __future__ import annotations

import pytest

from tests.harness.demo_kube_process import Launcher, stop_cleanly


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    launcher = Launcher(tmp_path_factory.mktemp("demo-kube") / "demo")
    try:
        yield launcher
    finally:
        try:
            if launcher.proc.poll() is None:
                stop_cleanly(launcher)
            else:
                assert launcher.proc.returncode == 0, launcher.output()[-6000:]
        except BaseException:
            print(f"--- demo-kube output ---\n{launcher.output()[-6000:]}")
            raise
