"""The local sweeps reach the job records only through `server_ext.runtimes.local.store.JobRecords`, and
`server_ext.runtimes.local.backend.LocalBackend` lends them as that protocol says: every method with
its signature, and the attributes it names."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pytest

from server_ext.runtimes.local.backend import LocalBackend
from server_ext.runtimes.local.store import JobRecords

pytestmark = pytest.mark.unit
LOCAL = pathlib.Path(__file__).resolve().parents[2] / "server_ext" / "runtimes" / "local"
SWEEPS = [LOCAL / "sweeps.py", LOCAL / "sweep_loop.py", LOCAL / "sweep_studies.py"]


def _members() -> dict[str, object]:
    return {n: v for n, v in vars(JobRecords).items() if not n.startswith("_")}


def test_the_local_backend_lends_its_records_as_the_protocol_says(tmp_path):
    methods = {n: v for n, v in _members().items() if inspect.isfunction(v)}
    assert {"find_record", "ending", "update_record", "finish_record", "submit", "cancel"} <= set(methods)
    for name, method in methods.items():
        assert inspect.signature(getattr(LocalBackend, name)) == inspect.signature(method), name
        assert inspect.iscoroutinefunction(getattr(LocalBackend, name)) == inspect.iscoroutinefunction(method), name
    backend = LocalBackend(tmp_path / "state")  # not started: nothing is opened or owned
    for name in JobRecords.__annotations__:
        assert hasattr(backend, name), name


def test_the_sweeps_use_nothing_else_of_the_backend():
    trees = [ast.parse(path.read_text()) for path in SWEEPS]
    used = {node.attr for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute) and node.value.attr == "jobs"
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"}
    assert used and used <= set(_members()) | set(JobRecords.__annotations__)
