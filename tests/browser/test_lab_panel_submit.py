""""Submit as training job" in a real JupyterLab and Chromium: from the file browser's context menu
on the example trainer's ``task.py``, the form (the notebook widget's, served by
``…/submitForm``) opens with the package and module filled in; a mistake the form's checks find
(args that are not words) and one only the server finds (a package directory that does not exist)
are each shown next to their field, nothing is created; corrected, the job is submitted, the panel
opens on it and it finishes. The form passes axe-core with no serious or critical violation."""

from __future__ import annotations

import pytest

from tests.browser.test_lab_panel import AXE, PANEL, lab, shoot  # noqa: F401  (the fixture)
from tests.harness.notebook_ui import open_submit_form

pytestmark = pytest.mark.browser


def test_submit_as_training_job_from_the_file_browser(lab, browser_page, tmp_path):  # noqa: F811
    page = browser_page
    form = open_submit_form(page, f"{lab.url}lab/tree/trainer/trainer?token={lab.token}")
    assert form.locator(".mlp-field-package_path").input_value() == "trainer/trainer"
    assert form.locator(".mlp-field-module").input_value() == "trainer.task"

    # a mistake the form's checks find, and one only the server can: each next to its field
    form.locator(".mlp-field-args").fill('--epochs="3')
    form.locator(".mlp-field-job_id").fill("from_menu")
    form.locator(".mlp-submit").click()
    form.locator(".mlp-error-args").filter(has_text="cannot be split into words").wait_for()
    form.locator(".mlp-field-args").fill("--epochs=2 --sleep=0")
    form.locator(".mlp-field-package_path").fill("no/such/dir")
    form.locator(".mlp-submit").click()
    form.locator(".mlp-error-package_path").filter(has_text="not a directory").wait_for()
    assert form.locator(".mlp-error-args").inner_text() == ""
    assert form.locator(".mlp-field-package_path").get_attribute("aria-invalid") == "true"
    shoot(page, tmp_path, "submit-field-error")
    assert lab.api("GET", f"ml/v1/projects/{lab.project}/jobs").json().get("jobs", []) == []

    page.add_script_tag(path=str(AXE))
    bad = page.evaluate("""async () => (await axe.run(document.querySelector('.mlp-submit-form'),
        {resultTypes: ['violations']})).violations.filter(v => ['serious', 'critical'].includes(v.impact))
        .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '))""")
    assert bad == []

    # corrected: submitted, and the panel follows it
    form.locator(".mlp-field-package_path").fill("trainer/trainer")
    form.locator(".mlp-submit").click()
    page.locator(f"{PANEL} .mlp-detail-title", has_text="from_menu").wait_for(timeout=30_000)
    page.locator(f"{PANEL} .mlp-detail-view .mlp-badge", has_text="SUCCEEDED").wait_for(timeout=60_000)
    assert lab.api("GET", f"ml/v1/projects/{lab.project}/jobs/from_menu").json()["state"] == "SUCCEEDED"
