"""Training progress (issue 31.4): the reports the platform reads (`server_ext.jobs.progress`), a
TrainJob's ``status.trainerStatus`` as ``trainingOutput.progress`` (`status.job_json`), the example
trainer's `ProgressReporter`, the widgets' row and the CLI's summary. The real status server, the
local runtime and the browser are in tests/kube/test_trainer_v2.py, tests/local/test_job_progress.py
and tests/browser/test_widgets_notebook7.py."""

from __future__ import annotations

import importlib.util
import io
import json
import pathlib
from contextlib import redirect_stdout

import pytest

from server_ext.cli.output import progress_cells
from server_ext.jobs import progress
from server_ext.jobs.kube.status import job_json
from server_ext.widgets.state import job_row
from tests.unit.test_job_model import PLATFORM_JOB_SCHEMA

pytestmark = pytest.mark.unit

_SPEC = importlib.util.spec_from_file_location(
    "example_trainer_task", pathlib.Path(__file__).parents[2] / "examples" / "trainer" / "trainer" / "task.py")
task = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(task)
PROGRESS_PREFIX, ProgressReporter, main = task.PROGRESS_PREFIX, task.ProgressReporter, task.main


def test_a_report_keeps_trainers_fields_and_drops_the_rest():
    got = progress.progress({"progressPercentage": 42.7, "estimatedRemainingSeconds": "63", "other": 1,
                             "metrics": [{"name": "loss", "value": "0.1"}, {"name": "acc", "value": 0.9},
                                         {"name": "", "value": "1"}, {"name": "x" * 65, "value": "1"}, "junk"]},
                            "2026-12-07T10:00:00Z")
    assert got == {"progressPercentage": 42, "estimatedRemainingSeconds": 63, "updateTime": "2026-12-07T10:00:00Z",
                   "metrics": [{"name": "loss", "value": "0.1"}, {"name": "acc", "value": "0.9"}]}


@pytest.mark.parametrize("report", [None, [], {}, {"progressPercentage": -1}, {"progressPercentage": "nan"},
                                    {"progressPercentage": True}, {"estimatedRemainingSeconds": float("inf")},
                                    {"metrics": "loss"}])
def test_what_reports_no_progress_is_none(report):
    assert progress.progress(report) is None


def test_a_percentage_past_100_is_100_and_metrics_are_capped():
    many = [{"name": f"m{i}", "value": "1"} for i in range(40)]
    got = progress.progress({"progressPercentage": 250, "metrics": many})
    assert got["progressPercentage"] == 100 and len(got["metrics"]) == progress.MAX_METRICS


def test_log_lines_the_last_progress_wins():
    lines = [("epoch 1/3 loss=1 rmse=2", "t0"),
             (PROGRESS_PREFIX + json.dumps({"progressPercentage": 33}), "t1"),
             (PROGRESS_PREFIX + "{not json", "t2"),
             ("2026 INFO " + PROGRESS_PREFIX + json.dumps({"progressPercentage": 66}), "t3"),
             ("epoch 3/3", "t4")]
    assert progress.latest(lines) == {"progressPercentage": 66, "updateTime": "t3"}
    assert progress.latest([("no progress here", None)]) is None
    assert PROGRESS_PREFIX == progress.PREFIX  # the trainer writes what the platform reads


def test_a_trainjobs_trainer_status_is_its_training_output_progress():
    obj = {"kind": "TrainJob", "metadata": {"name": "a", "creationTimestamp": "2026-12-07T10:00:00Z"},
           "status": {"trainerStatus": {"progressPercentage": 50, "estimatedRemainingSeconds": 7,
                                        "metrics": [{"name": "rmse", "value": "0.2"}],
                                        "lastUpdatedTime": "2026-12-07T10:01:00Z"}}}
    job = job_json(obj)
    assert job["trainingOutput"] == {"progress": {"progressPercentage": 50, "estimatedRemainingSeconds": 7,
                                                  "metrics": [{"name": "rmse", "value": "0.2"}],
                                                  "updateTime": "2026-12-07T10:01:00Z"}}
    job.update({"jobId": "a", "trainingInput": {"region": "local", "scaleTier": "BASIC"}})
    assert not list(PLATFORM_JOB_SCHEMA.iter_errors({k: v for k, v in job.items() if k != "trainingOutput"}))
    del obj["status"]["trainerStatus"]
    assert "trainingOutput" not in job_json(obj)


def test_the_reporter_writes_trainers_fields_on_a_log_line(tmp_path):
    clock = iter([100.0, 110.0, 130.0]).__next__
    reporter = ProgressReporter({}, total_steps=4, clock=clock)
    out = io.StringIO()
    with redirect_stdout(out):
        reporter.report(1, {"loss": 0.5, "rmse": 0.25})
        reporter.report(2, {"loss": 0.25})
    first, second = [progress.from_log_line(line) for line in out.getvalue().splitlines()]
    assert first == {"progressPercentage": 25, "estimatedRemainingSeconds": 30,
                     "metrics": [{"name": "loss", "value": "0.5"}, {"name": "rmse", "value": "0.25"}]}
    assert second["progressPercentage"] == 50 and second["estimatedRemainingSeconds"] == 30


def test_the_reporter_says_once_that_trainer_cannot_be_reached_and_training_goes_on(tmp_path, capsys):
    (tmp_path / "token").write_text("t")
    env = {"KUBEFLOW_TRAINER_SERVER_URL": "https://127.0.0.1:1/apis/x", "KUBEFLOW_TRAINER_SERVER_TOKEN":
           str(tmp_path / "token"), "CLOUD_ML_HP_METRIC_FILE": str(tmp_path / "m")}
    assert main(["--epochs=3", "--sleep=0"], env) == 0
    out = capsys.readouterr().out
    assert out.count("could not report to Kubeflow Trainer") == 1
    assert out.count(PROGRESS_PREFIX) == 3 and '"progressPercentage": 100' in out


def test_the_widgets_row_and_the_cli_summary_show_it():
    reported = {"progressPercentage": 40, "estimatedRemainingSeconds": 12, "metrics": [{"name": "loss", "value": "0.1"}]}
    assert job_row({"jobId": "a", "trainingOutput": {"progress": reported}})["progress"] == reported
    assert job_row({"jobId": "a"})["progress"] is None
    assert progress_cells(reported, ended=False) == [("PROGRESS", "40%"), ("REMAINING", "12s"), ("METRICS", "loss=0.1")]
    assert progress_cells(reported, ended=True) == [("PROGRESS", "40%"), ("METRICS", "loss=0.1")]
    assert progress_cells(None, ended=False) == []
