"""``…/submitForm`` (server_ext/rest/submit_form.py): the notebook widget's submit form served for
the JupyterLab panel: its choices, and its values checked and submitted by the widget's own code,
every mistake at once naming the server's field; nothing created on an error."""

from __future__ import annotations

import pytest

from tests.local.rest.conftest import PROJECT, TRAINER

pytestmark = pytest.mark.local


def test_the_forms_choices_are_the_widgets(api, run):
    from server_ext.widgets.form import _FIELDS, SCALE_TIERS
    from server_ext.widgets.form_choices import SWEEP_TEMPLATE

    code, form = run(api("GET", PROJECT, "submitForm"))
    assert code == 200, form
    assert form["scaleTiers"] == list(SCALE_TIERS) and form["fields"] == _FIELDS
    assert form["sweepTemplate"] == SWEEP_TEMPLATE
    assert form["accelerators"][0] == {"value": "", "label": "none (CPU only)", "most": 0}
    assert form["notes"][0].startswith("Local runtime")
    assert run(api("GET", "nobody", "submitForm"))[0] == 403


def test_every_mistake_at_once_then_a_job(api, run, jp_serverapp):
    import shutil

    shutil.copytree(TRAINER, __import__("pathlib").Path(jp_serverapp.root_dir) / "pkg")
    bad = {"job_id": "9bad", "module": "trainer.task", "package_path": "pkg", "args": '"unclosed'}
    code, error = run(api("POST", PROJECT, "submitForm", body=bad))
    fields = [v["field"] for d in error["error"]["details"] for v in d.get("fieldViolations", [])]
    assert code == 400 and fields == ["jobId", "trainingInput.args"], error
    assert run(api("POST", PROJECT, "submitForm", body={"nope": 1}))[0] == 400
    code, error = run(api("POST", PROJECT, "submitForm", body={"module": "trainer.task", "package_path": "missing"}))
    assert code == 400 and "package.path" in str(error), error
    assert run(api("GET", PROJECT, "jobs"))[1].get("jobs", []) == []

    good = {"job_id": "from_form", "module": "trainer.task", "package_path": "pkg", "args": "--epochs=1 --sleep=0",
            "scale_tier": "BASIC", "accelerator": "", "accelerator_count": 1, "credentials": [], "datasets": [],
            "hyperparameters_on": False, "hyperparameters": "", "project": PROJECT, "machine_type": ""}
    code, job = run(api("POST", PROJECT, "submitForm", body=good))
    assert code == 200 and job["jobId"] == "from_form", job
    assert job["trainingInput"]["args"] == ["--epochs=1", "--sleep=0"]
    code, job = run(api("POST", PROJECT, "submitForm", body={**good, "job_id": ""}))
    assert code == 200 and job["jobId"].startswith("task_"), job
