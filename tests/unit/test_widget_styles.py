"""The widgets' stylesheets touch nothing outside a widget: every rule of each view's CSS (and the
state badge's, shared by the three) is scoped to a view's root element, so a widget in a notebook
never restyles JupyterLab or the platform's panel, which uses some of the same class names (a
global ``.mlp-status`` rule once turned the panel's "0 jobs running" status bar item red)."""

from __future__ import annotations

import pathlib
import re

import pytest

pytestmark = pytest.mark.unit

STATIC = pathlib.Path(__file__).resolve().parents[2] / "server_ext" / "widgets" / "static"
ROOTS = {"job_detail.js": ".mlp-job-detail", "jobs_table.js": ".mlp-jobs", "sweep.js": ".mlp-sweep"}
ANY_VIEW = ":is(.mlp-jobs, .mlp-job-detail, .mlp-sweep)"


def selectors(css: str) -> list[str]:
    """Every selector of every rule in `css` (comma-separated parts, across lines)."""
    css = re.sub(r"\$\{[^}]*\}", "0", css).replace(ANY_VIEW, "@VIEW")  # template values; the badge's scope
    css = re.sub(r"\{[^{}]*\}", ";", css)  # rule bodies out (none is nested)
    return [part.strip().replace("@VIEW", ANY_VIEW) for rule in css.split(";") for part in rule.split(",")
            if part.strip()]


def css_of(source: str, name: str) -> str:
    start = source.index(f"const {name} = `") + len(f"const {name} = `")
    return source[start:source.index("`;", start)]


@pytest.mark.parametrize("view", sorted(ROOTS))
def test_every_rule_of_a_view_is_scoped_to_its_root(view):
    root = ROOTS[view]
    found = selectors(css_of((STATIC / view).read_text(), "CSS"))
    assert found and all(s == root or s.startswith((root + " ", root + "[", root + ":")) for s in found), \
        [s for s in found if not s.startswith(root)]


def test_the_state_badge_is_scoped_to_the_views():
    found = selectors(css_of((STATIC / "common.js").read_text(), "BADGE_CSS"))
    assert len(found) == 6 and all(s.startswith(ANY_VIEW + " .mlp-state") for s in found), found
