"""The walkthroughs of README.md and docs/widgets.md name files that exist: after the README's
``cp -r $MLPLATFORM_EXAMPLES/trainer .`` (the demo's ``MLPLATFORM_EXAMPLES`` is ``examples/``),
every path a ``kubectl ai-platform`` line or a ``client.submit(…)`` snippet gives is under
``examples/``."""

import re

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit

DOCS = ("README.md", "docs/widgets.md")
_PATHS = [
    re.compile(r"--(?:package-path|config)[ =]([^\s`]+)"),  # kubectl ai-platform … --config trainer/x.yaml
    re.compile(r"package_path=\"([^\"]+)\""),  # client.submit(…, package_path="trainer/trainer")
    re.compile(r"client\.submit\(\"([^\"]+)\""),  # client.submit("trainer/hptuning_config.yaml", …)
]


def snippet_paths(text: str) -> list[str]:
    """The relative paths the snippets of `text` name (placeholders in capitals and absolute or
    variable paths left out)."""
    found = [m.group(1) for pattern in _PATHS for m in pattern.finditer(text)]
    return [p for p in found if not p.startswith(("$", "/", "<")) and not p.isupper()]


@pytest.mark.parametrize("doc", DOCS)
def test_every_snippet_path_exists_after_copying_the_example(doc):
    paths = snippet_paths((ROOT / doc).read_text())
    assert paths, f"{doc} names no paths: the patterns no longer match its snippets"
    missing = sorted({p for p in paths if not (ROOT / "examples" / p).exists()})
    assert not missing, f"{doc} names {missing}, which `cp -r $MLPLATFORM_EXAMPLES/trainer .` does not give"


def test_the_patterns_find_a_bare_file_name():
    assert snippet_paths('client.submit("hptuning_config.yaml", job_id="s")') == ["hptuning_config.yaml"]
    assert snippet_paths("--package-path DIR --config FILE") == []
