"""The notebook client's `submit(config)` of a Katib example Experiment hears what the CLI hears
(issue 20, item 3): `submission_of` collects the note of a name replaced after ``job_id``, and
`experiment_notes` names the replaced ``kubeflow`` namespace (the text the REST API sends as its
``Warning: 299`` header); a plain Job has none."""

from __future__ import annotations

import pytest

from server_ext.client.submissions import experiment_notes, submission_of
from tests.unit.test_katib_examples import EXAMPLES

pytestmark = pytest.mark.unit


def test_a_katib_example_gives_the_notes_the_cli_prints():
    said: list[str] = []
    doc = submission_of(EXAMPLES["tpe-example-run"], None, {"job_id": "tpe_2"}, notes=said).job
    assert doc["metadata"]["name"] == "tpe-2"
    assert said == ["note: the Experiment is named 'tpe-2' after JOB (its metadata.name 'tpe-example-run' is "
                    "replaced), so its jobId is tpe_2"]
    assert experiment_notes(doc, "alice") == [
        "note: the Experiment goes into project 'alice': its metadata.namespace 'kubeflow' is replaced"]

    said = []
    doc = submission_of(EXAMPLES["tpe-example-run"], None, {}, notes=said).job
    assert said == [] and doc["metadata"]["name"] == "tpe-example-run"


def test_a_job_has_no_notes():
    said: list[str] = []
    doc = submission_of({"trainingInput": {"pythonModule": "trainer.task", "packageUris": ["gs://b/t.tar.gz"],
                                           "region": "us-central1"}}, None, {"job_id": "j1"}, notes=said).job
    assert said == [] and experiment_notes(doc, "alice") == []
