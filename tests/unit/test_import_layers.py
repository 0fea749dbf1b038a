"""The layers hold: import-linter's contracts (``[tool.importlinter]`` in pyproject.toml) are kept,
and the pure modules they name import, at module level, none of the third-party libraries they
forbid (the Kubernetes clients, KubeSpawner, tornado, the storage SDKs, …).

The contracts read every import statement, those inside functions too; the few function-level
imports a pure module makes for pure work (``hub_ext.core.slugs`` → KubeSpawner's ``safe_slug``) are
named in their ``ignore_imports``. The second test checks what those exceptions leave open:
importing the pure modules, in this process, with those libraries made unimportable.

Run here rather than as a Makefile step: it is then part of ``make test-unit`` and ``make test``
alike, its failure reads like any other test's, and it runs in-process (no subprocess, ~0.3 s).
"""

from __future__ import annotations

import importlib
import importlib.abc
import pathlib
import sys
import tomllib

import importlinter.api  # noqa: F401  (configures import-linter's readers and graph builder)
import pytest
from importlinter.application.use_cases import lint_imports

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in CONFIG["contracts"]}
PURE = ("pure",)


def test_the_import_contracts_are_kept(capsys):
    # the use case, not `importlinter.cli.lint_imports`: that one also reconfigures logging (disabling
    # every logger made before it) and puts the working directory on sys.path
    kept = lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True)
    out = capsys.readouterr().out
    assert kept, out
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in out


def _third_party(contract: dict) -> set[str]:
    ours = set(CONFIG["root_packages"])
    return {m for m in contract["forbidden_modules"]
            if m.split(".")[0] not in ours and m.split(".")[0] not in sys.stdlib_module_names}


def _modules_under(rooms: list[str]) -> list[str]:
    """Every module of each room (a package: it and everything below it; a module: itself)."""
    out = []
    for room in rooms:
        path = ROOT.joinpath(*room.split("."))
        if path.is_dir():
            out += sorted(".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                          for f in path.rglob("*.py"))
        else:
            out.append(room)
    return out


class _Refuse(importlib.abc.MetaPathFinder):
    def __init__(self, blocked: set[str]):
        self.blocked = blocked

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ImportError(f"{name} was imported, which the contract forbids")
        return None


@pytest.mark.parametrize("contract", PURE)
def test_pure_modules_import_without_the_libraries_they_forbid(contract):
    blocked = _third_party(CONTRACTS[contract])
    assert {"kubernetes", "kubernetes_asyncio", "kubespawner", "tornado"} <= blocked
    fresh = set(CONFIG["root_packages"]) | blocked
    saved = dict(sys.modules)
    refuse = _Refuse(blocked)
    try:
        for name in list(sys.modules):
            if name.split(".")[0] in fresh:
                del sys.modules[name]
        sys.meta_path.insert(0, refuse)
        for module in _modules_under(CONTRACTS[contract]["source_modules"]):
            importlib.import_module(module)
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in blocked)
    finally:
        sys.meta_path.remove(refuse)
        for name in set(sys.modules) - set(saved):
            del sys.modules[name]
        sys.modules.update(saved)
    assert loaded == []
