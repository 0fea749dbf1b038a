"""The JupyterLab panel's TypeScript unit tests (labextension/test/*.test.ts: the jobs store, the
formatting, the bounded log buffer, the SSE parser) run by Vitest from labextension/node_modules,
which `make` installs from the lockfile (`make labextension`)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.local

LABEXT = ROOT / "labextension"


def test_the_panels_typescript_unit_tests_pass():
    vitest = LABEXT / "node_modules" / ".bin" / "vitest"
    assert vitest.exists(), "labextension/node_modules is missing: run `make labextension`"
    node = shutil.which("node")
    assert node, "node is not on PATH"
    out = subprocess.run([str(vitest), "run", "--reporter=dot"], cwd=LABEXT, capture_output=True, text=True,
                         timeout=240, env={**os.environ, "CI": "true"})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert " passed" in out.stdout, out.stdout[-2000:]
