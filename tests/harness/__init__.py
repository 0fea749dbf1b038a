"""Test harness: a real JupyterHub (:mod:`tests.harness.hub`), Debian's Chromium through
Playwright (:mod:`tests.harness.browser`), and the pytest fixtures over both
(:mod:`tests.harness.fixtures`, registered from ``tests/conftest.py``)."""
