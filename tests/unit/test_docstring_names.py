"""Docstrings name only what exists: every module of ours a docstring of hub_ext or server_ext
names (``server_ext.service.config.cli_config``, ``kubeflow.job_manifest`` beside it, ``jobs/model.py``)
is there, with the name after it. Read from the source (ast), nothing imported.

- An absolute name (``hub_ext.…``, ``server_ext.…``) must be a module, or a module and one of its
  top-level names or submodules.
- A name relative to a package above the docstring's module (``kubeflow.job_manifest`` in
  ``server_ext/jobs``) must be a module and a word of its source (a field such as ``plan.name``
  counts).
- A file (``x.py``, ``jobs/x.py``) must be in the repository; the operator's config files are not ours.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]
AREAS = ("hub_ext", "server_ext")
NOT_OURS = {"jupyterhub_config.py", "jupyter_server_config.py"}  # the operator's files
TOKEN = re.compile(r"`{1,2}([A-Za-z_][\w./]*)`{1,2}")


class Module:
    def __init__(self, path: pathlib.Path):
        self.path, self.source = path, path.read_text()
        self.tree = ast.parse(self.source)
        self.names: set[str] = set()  # its top-level names, those under a top-level if/try too
        body = list(self.tree.body)
        while body:
            node = body.pop()
            if isinstance(node, (ast.If, ast.Try)):
                body += node.body + node.orelse + getattr(node, "finalbody", []) + [
                    n for h in getattr(node, "handlers", []) for n in h.body]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    self.names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.names.update((a.asname or a.name).split(".")[0] for a in node.names)


def _modules() -> dict[str, Module]:
    found = {}
    for area in AREAS:
        for path in (ROOT / area).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = Module(path)
    return found


MODULES = _modules()


def _resolves(full: str, strict: bool) -> bool | None:
    """Whether `full` (a dotted name) is a module of ours with its next name; None: it names none."""
    parts = full.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        if name in MODULES:
            rest = parts[i:]
            if not rest or f"{name}.{rest[0]}" in MODULES or rest[0] in MODULES[name].names:
                return True
            return not strict and re.search(rf"\b{re.escape(rest[0])}\b", MODULES[name].source) is not None
    return None


def _file_exists(token: str, module: Module) -> bool:
    if token in NOT_OURS:
        return True
    here = [module.path.parent, *module.path.parents]
    if any((d / token).exists() for d in here if d == ROOT or ROOT in d.parents):
        return True
    return any(p.as_posix().endswith("/" + token) for area in AREAS for p in (ROOT / area).rglob(token.split("/")[-1]))


def stale_names() -> list[str]:
    stale = []
    for name, module in sorted(MODULES.items()):
        packages = name.split(".")
        for node in ast.walk(module.tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node, clean=False) or ""
            for token in (t.rstrip(".") for t in TOKEN.findall(doc)):
                where = f"{module.path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}: {token}"
                if token.endswith(".py"):
                    if not _file_exists(token, module):
                        stale.append(where)
                elif "/" in token or "." not in token:
                    continue
                elif token.split(".")[0] in AREAS:
                    if not _resolves(token, strict=True):
                        stale.append(where)
                else:  # relative to a package above this module, if it names a module of ours at all
                    answers = [_resolves(".".join(packages[:i] + [token]), strict=False)
                               for i in range(len(packages), 0, -1)]
                    if False in answers and True not in answers:
                        stale.append(where)
    return stale


def test_docstrings_name_only_modules_and_files_that_exist():
    assert stale_names() == []


def test_the_check_finds_a_moved_name():
    assert _resolves("server_ext.service.config.cli_config", strict=True)
    assert not _resolves("server_ext.runtimes.kube.target.cli_config", strict=True)  # it moved to server_ext.service.config
    assert not _resolves("server_ext.no_such_module", strict=True)
    assert _resolves("server_ext.jobs.kube.kubeflow.job_manifest", strict=False)
    assert not _resolves("server_ext.jobs.kube.kubeflow.no_such_name", strict=False)
