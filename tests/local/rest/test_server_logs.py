"""The notebook server extension's log lines (the platform's one logger root, `mlplatform.*`) go
out through the server's own handlers and format (`MLPlatformApp.initialize_settings`)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.local


def test_the_platforms_log_lines_go_out_in_the_servers_format(jp_serverapp):
    """The one logger root (`mlplatform.*`) goes through the notebook server's own handlers (a
    server started by jupyter has one on its log; pytest-jupyter's has none, so one is added)."""
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("SERVER %(name)s %(message)s"))
    jp_serverapp.log.addHandler(handler)
    root = logging.getLogger("mlplatform")
    try:
        (ext,) = jp_serverapp.extension_manager.extension_apps["server_ext"]
        ext.initialize_settings()
        logging.getLogger("mlplatform.jobs.local").warning("a warning")
        assert "SERVER mlplatform.jobs.local a warning" in stream.getvalue()
    finally:
        jp_serverapp.log.removeHandler(handler)
        root.removeHandler(handler)
