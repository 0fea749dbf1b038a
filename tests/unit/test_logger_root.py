"""One logger root: every module of hub_ext and server_ext logs under ``mlplatform.<area>``, so a
warning from either side comes out through the hub's handler in the hub's format
(`hub_ext.core.logs.use_hub_format`), and through the CLI's handler (`server_ext.cli.main`), never raw
through Python's last-resort handler on the CLI's stderr.
"""

from __future__ import annotations

import ast
import io
import logging
import pathlib
import re

import pytest

import hub_ext.login.rules.claims as claims
import server_ext.runtimes.fetch as fetch
import server_ext.runtimes.local.backend as local_backend
from hub_ext.core.logs import LOGGER, use_hub_format
from server_ext.cli import main as cli_main

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]
WARNERS = [claims.log, fetch.log, local_backend.log]  # hub_ext and server_ext modules that warn


@pytest.fixture
def fresh_root():
    """The ``mlplatform`` logger without handlers for the test, as it was after."""
    logger = logging.getLogger(LOGGER)
    handlers, level = list(logger.handlers), logger.level
    logger.handlers.clear()
    logger.setLevel(logging.NOTSET)
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)


def _logger_names(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, first argument as written) of every ``getLogger(…)`` call in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "getLogger":
            found.append((node.lineno, ast.unparse(node.args[0]) if node.args else ""))
    return found


def test_every_module_logs_under_the_one_root():
    wrong = {}
    for area in ("hub_ext", "server_ext"):
        for path in sorted((ROOT / area).rglob("*.py")):
            for line, arg in _logger_names(path):
                literal = re.fullmatch(r"['\"]mlplatform(\.[a-z_.]+)?['\"]", arg)
                from_root = arg.startswith(("f'{LOGGER}", 'f"{LOGGER}')) or arg in ("LOGGER", "name")
                if not (literal or from_root):
                    wrong[f"{path.relative_to(ROOT)}:{line}"] = arg
    assert wrong == {}
    assert all(w.name.startswith(LOGGER + ".") for w in WARNERS)


def test_warnings_of_both_sides_come_out_in_the_hubs_format(fresh_root):
    handler = next(h for h in use_hub_format().handlers if getattr(h, "_mlplatform", False))
    stream = io.StringIO()
    handler.setStream(stream)
    claims.log.warning("hub side %s", "warned")
    fetch.log.warning("server side %s", "warned")
    lines = stream.getvalue().splitlines()
    hub_line = r"\[W \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} %s \w+:\d+\] %s"
    assert re.fullmatch(hub_line % (r"mlplatform\.login", "hub side warned"), lines[0]), lines
    assert re.fullmatch(hub_line % (r"mlplatform\.jobs\.fetch", "server side warned"), lines[1]), lines


def test_the_cli_keeps_them_off_the_terminal_unless_debugging(fresh_root, capsys):
    err = io.StringIO()
    cli_main._quiet_logs({}, err)
    for w in WARNERS:
        w.warning("not for the terminal")
    assert err.getvalue() == "" and capsys.readouterr().err == ""  # not Python's last-resort handler either


def test_the_cli_shows_them_through_its_handler_when_debugging(fresh_root, capsys):
    err = io.StringIO()
    cli_main._quiet_logs({"MLPLATFORM_DEBUG": "1"}, err)
    for w in WARNERS:
        w.warning("from %s", w.name)
    assert err.getvalue().splitlines() == [f"from {w.name}" for w in WARNERS]
    assert capsys.readouterr().err == ""
