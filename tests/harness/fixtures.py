"""pytest plugin: ``hub_factory`` (real JupyterHubs) and ``browser_page`` (Chromium page).

Register from ``tests/conftest.py`` with ``pytest_plugins = ["tests.harness.fixtures"]``.

Guarantees:

- ``hub_factory(config, env=None, **kw) -> HubProcess`` starts a hub (see
  :class:`tests.harness.hub.HubProcess`) in its own directory under the test's ``tmp_path``
  and returns it ready. At teardown every hub it started is stopped, newest first, and the test
  errors if any left a process behind. If the test failed, the tail of each hub's log is
  printed (it shows up as "Captured stdout teardown").
- ``browser_page`` is a Playwright ``Page`` of a fresh headless Chromium profile; if the test
  failed, a screenshot ``<test id>-failed.png`` is saved under ``artifacts/screenshots/``.
"""

from __future__ import annotations

import pytest

from tests.harness.browser import launch, screenshot
from tests.harness.hub import HubProcess


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item (``item.rep_setup`` / ``rep_call``) for fixtures."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _failed(request) -> bool:
    return any(
        getattr(getattr(request.node, f"rep_{when}", None), "failed", False)
        for when in ("setup", "call")
    )


@pytest.fixture
def hub_factory(tmp_path, request):
    hubs: list[HubProcess] = []

    def start(config, *, env=None, **kwargs) -> HubProcess:
        hub = HubProcess(config, tmp_path / f"hub{len(hubs)}", env=env, **kwargs)
        hubs.append(hub)
        return hub.start()

    yield start

    if _failed(request):
        for hub in hubs:
            print(f"--- {hub.log_path} (tail) ---\n{hub.log_tail(200)}")
    errors = []
    for hub in reversed(hubs):
        try:
            hub.stop()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)


@pytest.fixture
def browser_page(tmp_path, request):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = launch(playwright, tmp_path / "chromium-profile")
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(30_000)
            yield page
            if _failed(request):
                print(f"screenshot: {screenshot(page, request.node.nodeid + '-failed')}")
        finally:
            context.close()
