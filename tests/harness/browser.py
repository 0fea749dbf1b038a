"""Debian's Chromium driven by Playwright (sync API), and screenshots as test artifacts.

Guarantees: the browser is always ``/usr/bin/chromium`` (override with ``CHROMIUM``; Playwright's
own browser download is never used), launched headless with the platform's fixed flags and a
fresh user-data directory supplied by the caller, so no state leaks between tests. Screenshots
go to ``artifacts/screenshots/`` under the project root (override with ``ARTIFACTS_DIR``), named
from the caller's name with anything but ``[A-Za-z0-9._-]`` replaced by ``_``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def artifacts_dir() -> Path:
    return Path(os.environ.get("ARTIFACTS_DIR", PROJECT_ROOT / "artifacts"))


def launch(playwright, user_data_dir: Path):
    """A persistent BrowserContext of Debian's Chromium on a fresh ``user_data_dir``."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir),
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
    )


def screenshot(page, name: str) -> Path:
    """Save a full-page PNG of ``page`` as ``artifacts/screenshots/<name>.png``; returns the path."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "screenshot"
    path = artifacts_dir() / "screenshots" / f"{safe}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


def run_notebook(page, url: str) -> str:
    """Open a notebook in JupyterLab, wait for its kernel, Run All Cells (again, until the first
    output shows: a first run may race the kernel's start) and return that output's text."""
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)
    output = page.locator(".jp-OutputArea-output").first
    for _ in range(5):
        page.get_by_role("menuitem", name="Run").click()
        page.get_by_text("Run All Cells", exact=True).click()
        try:
            output.wait_for(timeout=20_000)
            break
        except Exception:  # Playwright's TimeoutError: run again
            continue
    return output.inner_text().strip()
