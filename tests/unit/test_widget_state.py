"""The widgets' pure models (`server_ext.widgets.state`): rows from job JSON, ages, minimal diffs,
the log ring buffer, sweep trials; and the form's pure parts."""

import json

import pytest

from server_ext.client.errors import from_response
from server_ext.errors import JobExists, UpstreamError, UserInputError
from server_ext.widgets import state
from server_ext.widgets.form import error_places, field_of, submit_arguments

pytestmark = pytest.mark.unit

T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def job(job_id="j", st="RUNNING", **extra):
    base = {"jobId": job_id, "state": st, "labels": {"team": "vision"}, "createTime": "2026-01-01T00:00:00Z",
            "startTime": "2026-01-01T00:00:05.5Z",
            "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "pythonModule": "trainer.task",
                              "args": ["--epochs=3"],
                              "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": "2"}}}}
    return {**base, **extra}


def test_row_of_a_job():
    assert state.job_row(job()) == {
        "jobId": "j", "state": "RUNNING", "kind": "job", "labels": {"team": "vision"}, "createTime": T0,
        "startTime": T0 + 5.5, "endTime": None, "accelerator": "NVIDIA_A100_1G_5GB x2", "machine": "n1-standard-4",
        "trials": None, "error": "", "waiting": "", "progress": None}
    waiting = "waiting for the dataset 'frames' to finish loading (42%)"
    assert state.job_row(job(st="PREPARING", statusMessage=waiting))["waiting"] == waiting


@pytest.mark.parametrize("training, acc, machine", [
    ({}, "", "BASIC"),
    ({"scaleTier": "BASIC_GPU"}, "", "BASIC_GPU"),
    ({"scaleTier": "CUSTOM", "masterType": "a2-highgpu-1g"}, "", "a2-highgpu-1g"),
    ({"scaleTier": "CUSTOM", "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100"}}},
     "NVIDIA_TESLA_A100 x1", "CUSTOM"),
])
def test_accelerator_and_machine(training, acc, machine):
    row = state.job_row({"jobId": "x", "trainingInput": training})
    assert (row["accelerator"], row["machine"]) == (acc, machine)


def test_sweep_row_and_error_cut():
    sweep = job("s", "FAILED", errorMessage="x" * 1000, endTime="2026-01-01T00:01:00Z",
                trainingInput={"hyperparameters": {"maxTrials": 8, "goal": "MINIMIZE"}},
                trainingOutput={"completedTrialCount": "3"})
    row = state.job_row(sweep)
    assert (row["kind"], row["trials"], len(row["error"]), row["endTime"]) == ("sweep", "3/8", 300, T0 + 60)
    assert state.job_row(job("s", trainingInput={"hyperparameters": {}}))["trials"] == "0/1"  # maxTrials' default
    assert state.is_sweep(sweep) and not state.is_sweep(job("j"))


@pytest.mark.parametrize("text, expected", [
    ("2026-01-01T00:00:00Z", T0), ("2026-01-01T00:00:00.250Z", T0 + 0.25), ("2026-01-01T01:00:00+01:00", T0),
    ("2026-01-01T00:00:00", T0), ("", None), (None, None), ("yesterday", None), (5, None)])
def test_epoch(text, expected):
    assert state.epoch(text) == expected


def test_age_and_duration_are_computed_not_stored():
    row = state.job_row(job())
    assert state.age(row, T0 + 65) == 65 and state.duration(row, T0 + 65) == 59.5
    ended = {**row, "endTime": T0 + 20}
    assert state.duration(ended, T0 + 1000) == 14.5
    assert state.duration({**row, "startTime": None}, T0) is None and state.age({"createTime": None}, T0) is None
    assert state.job_row(job()) == state.job_row(job())  # nothing in a row depends on the clock


def test_diff_is_minimal_and_exact():
    old = state.rows([job("a"), job("b"), job("c")])
    new = state.rows([job("a"), job("b", "SUCCEEDED", endTime="2026-01-01T00:02:00Z"), job("d", "QUEUED")])
    delta = state.diff(old, new)
    assert delta == {"added": {"d": new["d"]}, "changed": {"b": {"state": "SUCCEEDED", "endTime": T0 + 120}},
                     "removed": ["c"]}
    assert state.apply(old, delta) == new
    assert state.diff(new, new) is None
    assert state.apply(new, None) == new


def test_diff_sends_vanished_fields_as_none_and_whole_labels():
    old = {"a": {"jobId": "a", "labels": {"x": "1", "y": "2"}, "extra": 1}}
    new = {"a": {"jobId": "a", "labels": {"x": "1"}}}
    delta = state.diff(old, new)
    assert delta == {"added": {}, "changed": {"a": {"labels": {"x": "1"}, "extra": None}}, "removed": []}
    assert state.apply(old, delta) == {"a": {"jobId": "a", "labels": {"x": "1"}, "extra": None}}


def test_ten_unchanged_running_jobs_make_no_delta():
    jobs = [job(f"j{i}") for i in range(10)]
    assert state.diff(state.rows(jobs), state.rows(json.loads(json.dumps(jobs)))) is None


@pytest.mark.parametrize("states, label, expected", [
    ((), "", ["c", "b", "a"]), (("RUNNING",), "", ["c", "a"]), ((), "team", ["b", "a"]),
    ((), "team=nlp", ["b"]), (("FAILED",), "team=vision", []), ((), "missing", [])])
def test_visible_rows(states, label, expected):
    rows = state.rows([job("a"), job("b", "FAILED", labels={"team": "nlp"}, createTime="2026-01-02T00:00:00Z"),
                       job("c", labels={}, createTime="2026-01-03T00:00:00Z")])
    assert [r["jobId"] for r in state.visible(rows, states, label)] == expected


def test_timeline():
    seen = T0 + 1000
    queued = job(st="QUEUED", startTime=None)
    line = state.timeline([], queued, seen)
    assert line == [{"state": "QUEUED", "time": T0}]
    line = state.timeline(line, job(st="PREPARING", startTime=None), seen)
    line = state.timeline(line, job(), seen + 1)
    assert line == [{"state": "QUEUED", "time": T0}, {"state": "PREPARING", "time": seen},
                    {"state": "RUNNING", "time": T0 + 5.5}]
    assert state.timeline(line, job(), seen + 2) == line
    first_seen_done = state.timeline([], job(st="SUCCEEDED", endTime="2026-01-01T00:01:00Z"), seen)
    assert first_seen_done == [{"state": "QUEUED", "time": T0}, {"state": "RUNNING", "time": T0 + 5.5},
                               {"state": "SUCCEEDED", "time": T0 + 60}]
    cancelling = state.timeline(line, job(st="CANCELLING"), seen + 3)
    assert cancelling[-1] == {"state": "CANCELLING", "time": seen + 3}


def test_detail_and_tasks():
    d = state.detail(job(trainingInput={"pythonModule": "m", "args": ["a"], "workerCount": "2",
                                        "parameterServerCount": "1"}))
    assert (d["module"], d["args"]) == ("m", ["a"])
    assert d["tasks"] == ["master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0"]
    sweep = {"jobId": "s", "trainingInput": {"hyperparameters": {}},
             "trainingOutput": {"trials": [{"trialId": "1"}, {"trialId": "2"}]}}
    assert state.tasks(sweep) == ["trial-1", "trial-2"]


# ------------------------------------------------------------------------------------ log buffer

def test_log_buffer_cap_and_watermark():
    buf = state.LogBuffer(cap=5)
    first = buf.take("t")
    assert first == {"type": "log_reset", "task": "t", "seq": 1, "lines": [], "total": 0, "truncated": 0}
    assert buf.take("t") is None
    for i in range(1, 4):
        buf.add(i, f"line {i}")
    assert buf.take("t") == {"type": "log_append", "task": "t", "seq": 1, "lines": ["line 1", "line 2", "line 3"],
                             "total": 3}
    assert buf.sent == 3 and buf.take("t") is None
    buf.add(3, "again")  # already held: ignored
    for i in range(4, 13):
        buf.add(i, f"line {i}")
    assert len(buf) == 5 and buf.first == 8 and buf.lines()[0] == (8, "line 8")
    # 9 lines pending but only 5 held: the view is replaced by the tail
    assert buf.take("t") == {"type": "log_reset", "task": "t", "seq": 8,
                             "lines": [f"line {i}" for i in range(8, 13)], "total": 12, "truncated": 0}
    buf.add(13, "line 13")
    assert buf.take("t")["type"] == "log_append"
    buf.view_lost()
    assert buf.take("t")["lines"] == [f"line {i}" for i in range(9, 14)]


def test_log_buffer_keeps_the_last_10000_lines():
    buf = state.LogBuffer()
    for i in range(1, 25_001):
        buf.add(i, str(i))
    assert len(buf) == 10_000 and buf.first == 15_001 and buf.last == 25_000


def test_log_buffer_byte_limit_and_gap_and_long_lines():
    buf = state.LogBuffer(cap=100)
    for i in range(1, 51):
        buf.add(i, "x" * 96)
    msg = buf.take("t", max_bytes=1000)
    assert msg["type"] == "log_reset" and len(msg["lines"]) == 10 and msg["seq"] == 41 and msg["truncated"] == 40
    buf.add(60, "after a gap")
    assert buf.lines() == [(60, "after a gap")]
    assert buf.take("t") == {"type": "log_reset", "task": "t", "seq": 60, "lines": ["after a gap"], "total": 60,
                             "truncated": 0}
    buf.add(61, "y" * 10_000)
    assert len(buf.lines()[-1][1]) < 4100


# ---------------------------------------------------------------------------------------- sweeps

def sweep(goal="MAXIMIZE"):
    trials = [{"trialId": "1", "state": "SUCCEEDED", "finalMetric": {"trainingStep": "10", "objectiveValue": 0.7},
               "hyperparameters": {"lr": "0.1"}},
              {"trialId": "2", "state": "SUCCEEDED", "finalMetric": {"trainingStep": "10", "objectiveValue": 0.9}},
              {"trialId": "3", "state": "RUNNING"},
              {"trialId": "4", "state": "SUCCEEDED", "finalMetric": {"objectiveValue": 0.9},
               "isTrialStoppedEarly": True},
              {"trialId": "10", "state": "FAILED", "finalMetric": {"objectiveValue": 0.1}}]
    return {"jobId": "s", "trainingInput": {"hyperparameters": {"goal": goal, "hyperparameterMetricTag": "acc"}},
            "trainingOutput": {"trials": trials}}


@pytest.mark.parametrize("goal, order, best", [
    ("MAXIMIZE", ["2", "4", "1", "10", "3"], "2"),
    ("MINIMIZE", ["10", "1", "2", "4", "3"], "10")])
def test_trials_sorted_with_best_flagged(goal, order, best):
    rows = state.trial_rows(sweep(goal))
    assert [r["trialId"] for r in state.sorted_trials(rows, goal)] == order
    assert [k for k, r in rows.items() if r["best"]] == [best] and state.best_trial(rows, goal) == best
    assert rows["1"] == {"trialId": "1", "state": "SUCCEEDED", "hyperparameters": {"lr": "0.1"}, "objective": 0.7,
                         "step": 10, "startTime": None, "endTime": None, "stoppedEarly": False, "best": best == "1"}
    assert rows["4"]["stoppedEarly"] and rows["3"]["objective"] is None
    assert state.goal(sweep(goal)) == goal and state.metric_tag(sweep()) == "acc"


def test_no_best_without_objectives():
    rows = state.trial_rows({"trainingOutput": {"trials": [{"trialId": "1", "state": "RUNNING"}]}})
    assert not rows["1"]["best"] and state.best_trial(rows, "MAXIMIZE") == ""


def test_series():
    metrics = [{"trainingStep": "1", "objectiveValue": 0.5}, {"objectiveValue": "0.6"},
               {"trainingStep": "3", "objectiveValue": None}, {"trainingStep": "4", "objectiveValue": 0.8}]
    assert state.series(metrics) == [[1, 0.5], [2, 0.6], [4, 0.8]]


# ------------------------------------------------------------------------------------------ form

def test_form_values_to_submit_arguments():
    config, kwargs = submit_arguments({
        "job_id": " my_job ", "module": "trainer.task", "package_path": "trainer", "args": "--epochs=3 --name 'a b'",
        "scale_tier": "BASIC", "machine_type": "", "accelerator": "NVIDIA_A100_1G_5GB", "accelerator_count": 2,
        "project": "alice", "credentials": ("gcp",), "datasets": (), "hyperparameters_on": True,
        "hyperparameters": "goal: MAXIMIZE\nmaxTrials: 2\n"})
    assert config == {"trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "pythonModule": "trainer.task",
        "args": ["--epochs=3", "--name", "a b"],
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": "2"}},
        "hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 2}}}
    assert kwargs == {"job_id": "my_job", "package_path": "trainer", "credentials": ["gcp"], "project": "alice"}
    with pytest.raises(UserInputError) as e:
        submit_arguments({"args": "'unclosed"})
    assert e.value.field == "trainingInput.args"


@pytest.mark.parametrize("error_field, form_field", [
    ("trainingInput.pythonModule", "module"), ("module_name", "module"), ("--package-path", "package_path"), ("jobId", "job_id"),
    ("trainingInput.masterConfig.acceleratorConfig.type", "accelerator"), ("mounts.credentials[0]", "credentials"),
    ("trainingInput.hyperparameters.params[1].minValue", "hyperparameters"),
    ("trainingInput.hyperparameters.params[0].minValue in config", "hyperparameters"), ("region", "")])
def test_error_fields_map_to_form_fields(error_field, form_field):
    assert field_of(error_field) == form_field


def several(*pairs):
    body = {"error": {"code": 400, "message": "invalid", "status": "INVALID_ARGUMENT", "details": [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": f, "description": d} for f, d in pairs]}]}}
    return from_response(400, body, action="create job", project="alice", job_id="j")


@pytest.mark.parametrize("error, inline, above", [
    (several(("trainingInput.pythonModule", "is required"), ("jobId", "is taken"),
             ("trainingInput.hyperparameters.params[1].minValue", "must be below maxValue"),
             ("trainingInput.hyperparameters.maxTrials", "must be at least 1"), ("region", "unknown")),
     {"module": ["is required"], "job_id": ["is taken"],
      "hyperparameters": ["params[1].minValue: must be below maxValue", "maxTrials: must be at least 1"]},
     ["region: unknown"]),
    (UserInputError("module_name", "is required"), {"module": ["is required"]}, []),
    (UserInputError("trainingInput.hyperparameters.goal in config", "must be MAXIMIZE or MINIMIZE"),
     {"hyperparameters": ["goal: must be MAXIMIZE or MINIMIZE"]}, []),
    (UserInputError("token", "refused"), {}, ["token: refused"]),
    (JobExists("alice", "j"), {}, ["Job projects/alice/jobs/j already exists"]),
    (UpstreamError("create job", "timeout"), {}, ["could not create job: timeout"]),
])
def test_every_error_is_placed_next_to_its_field(error, inline, above):
    assert error_places(error) == (inline, above)


def test_the_form_shows_each_violation_next_to_its_field():
    from server_ext.client.notebook import Client
    from server_ext.widgets.form import SubmitForm

    form = SubmitForm(Client("http://127.0.0.1:9/", "t", project="alice"), info={})  # nothing is sent
    form.show_error(several(("trainingInput.pythonModule", "is required"), ("jobId", "is <taken>"),
                            ("region", "unknown")))
    shown = {name: label.value for name, label in form.errors.items() if label.value}
    assert set(shown) == {"module", "job_id"}
    assert "is required" in shown["module"] and "is &lt;taken&gt;" in shown["job_id"]
    assert "region: unknown" in form.message.value
    form.show_error(UserInputError("module_name", "is required"))  # the next error replaces them all
    assert [name for name, label in form.errors.items() if label.value] == ["module"] and form.message.value == ""
    form.close()


def test_the_forms_accelerator_count_goes_as_far_as_the_model_allows():
    from types import SimpleNamespace

    from server_ext.jobs.model import MAX_ACCELERATORS
    from server_ext.widgets.form import SubmitForm

    form = SubmitForm(SimpleNamespace(project="alice"), info={})
    try:
        count = form.fields["accelerator_count"]
        assert (count.min, count.max, MAX_ACCELERATORS) == (1, 64, 64)
        count.value = 64
        assert count.value == 64
    finally:
        form.close()
