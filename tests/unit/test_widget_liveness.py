"""When a widget may talk (`server_ext.widgets.liveness`): awake for `QUIET_AFTER_S` after its
creation, a view's message or the end of a cell, and all the while a cell runs; the cells are
followed through a real IPython shell's events. And where the kernel's jobs client goes in a
JupyterHub: straight to its own server (the spawner's bind URL), never through the hub's proxy,
whose route activity would count as the user's."""

from __future__ import annotations

import pytest

from server_ext.client.environment import server_from_environment
from server_ext.widgets import liveness
from server_ext.widgets.liveness import Cells, Liveness

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_awake_after_creation_and_each_message_then_quiet():
    clock = Clock()
    alive = Liveness(Cells(clock), quiet_after=30, clock=clock)
    assert alive.awake()
    clock.now += 29.9
    assert alive.awake()
    clock.now += 0.1
    assert not alive.awake()
    alive.heard()  # a view's `alive`
    assert alive.awake()
    clock.now += 31
    assert not alive.awake()


def test_a_running_cell_keeps_it_awake_and_its_end_gives_it_time():
    clock = Clock()
    cells = Cells(clock)
    alive = Liveness(cells, quiet_after=30, clock=clock)
    cells.started()
    clock.now += 600  # a cell that blocks: the views' messages wait unread
    assert alive.awake()
    cells.ended()
    clock.now += 29
    assert alive.awake()  # the messages queued behind the cell come now
    clock.now += 1
    assert not alive.awake()


def test_the_default_follows_the_module_setting(monkeypatch):
    clock = Clock()
    alive = Liveness(Cells(clock), clock=clock)
    monkeypatch.setattr(liveness, "QUIET_AFTER_S", 5.0)  # a notebook may shorten it
    clock.now += 5
    assert not alive.awake()


def test_cells_follow_a_real_ipython_shell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        cells = Cells()
        cells.install()
        assert cells.running is False  # installed outside a cell
        shell.user_ns["cells"] = cells
        result = shell.run_cell("seen = cells.running")
        assert result.success and shell.user_ns["seen"] is True
        assert cells.running is False and cells.ended_at > float("-inf")
        inside = Cells()
        shell.user_ns["inside"] = inside
        shell.run_cell("inside.install(); seen = inside.running")  # installed by a cell: it runs
        assert shell.user_ns["seen"] is True and inside.running is False
    finally:
        InteractiveShell.clear_instance()


def test_without_a_shell_no_cell_runs():
    cells = Cells()
    cells.install()
    cells.install()
    assert cells.running is False


@pytest.mark.parametrize("bind_url, expected", [
    ("http://127.0.0.1:53211/user/alice/", "http://127.0.0.1:53211/user/alice/"),  # LocalPlatformSpawner
    ("http://0.0.0.0:8888/user/alice/", "http://127.0.0.1:8888/user/alice/"),      # KubeSpawner's pod
])
def test_a_kernel_in_a_hub_calls_its_own_server_not_the_proxy(bind_url, expected):
    # what JupyterHub's Spawner.get_env gives a server (and so its kernels): the public URL is
    # there too, but the client takes the server's own address
    env = {"JUPYTERHUB_SERVICE_URL": bind_url, "JUPYTERHUB_API_TOKEN": "t",
           "JUPYTERHUB_BASE_URL": "/", "JUPYTERHUB_SERVICE_PREFIX": "/user/alice/",
           "JUPYTERHUB_PUBLIC_URL": "https://hub.example.org/", "JUPYTERHUB_API_URL": "http://127.0.0.1:8081/hub/api",
           "JUPYTERHUB_USER": "alice"}
    assert server_from_environment(env) == (expected, "t")
