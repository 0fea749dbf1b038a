"""What `kubectl ai-platform` prints (exact strings, gcloud's shapes), and the commands run against an
in-memory backend injected through `JobService`."""

import datetime
import io
import pathlib
import types

import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from server_ext.cli import commands, output
from server_ext.cli.flags import UsageError, parse_args
from server_ext.cli.main import error_message
from server_ext.errors import JobExists, JobFinished, JobNotFound
from server_ext.jobs.backend import LogLine
from server_ext.jobs.defaults import default_plan_settings
from server_ext.service.jobs import JobService

pytestmark = pytest.mark.unit
UTC = datetime.timezone.utc
JOBS = [
    {"jobId": "census_2", "state": "RUNNING", "createTime": "2026-01-31T12:05:00Z", "labels": {"team": "nlp"},
     "trainingInput": {"scaleTier": "BASIC", "pythonModule": "t.task", "packageUris": ["gs://b/t.tgz"]}},
    {"jobId": "a_much_longer_job_id", "state": "SUCCEEDED", "createTime": "2026-01-30T08:00:00Z",
     "startTime": "2026-01-30T08:01:00Z", "endTime": "2026-01-30T09:00:00Z",
     "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "region": "eu",
                       "pythonModule": "t.task", "packageUris": ["gs://b/t.tgz"], "args": ["--a", "1"]},
     "trainingOutput": {"consumedMLUnits": 1.5}},
]


def test_submitted_block_and_status_are_gclouds():
    assert output.submitted("j1", True, " --project team") == (
        "Job [j1] submitted successfully.\n"
        "Your job is still active. You may view the status of your job with the command\n\n"
        "  $ kubectl ai-platform jobs describe j1 --project team\n\n"
        "or continue streaming the logs with the command\n\n"
        "  $ kubectl ai-platform jobs stream-logs j1 --project team\n")
    assert output.submitted("j1", False) == "Job [j1] submitted successfully.\n"
    assert output.job_status({"jobId": "j1", "state": "QUEUED", "createTime": "x"}) == "jobId: j1\nstate: QUEUED\n"
    assert output.job_status(JOBS[1], UTC) == ("endTime: '2026-01-30T09:00:00'\njobId: a_much_longer_job_id\n"
                                               "startTime: '2026-01-30T08:01:00'\nstate: SUCCEEDED\n")


def test_describe_yaml_and_json():
    assert output.describe(JOBS[0]) == (
        "createTime: '2026-01-31T12:05:00Z'\njobId: census_2\nlabels:\n  team: nlp\nstate: RUNNING\n"
        "trainingInput:\n  packageUris:\n  - gs://b/t.tgz\n  pythonModule: t.task\n  scaleTier: BASIC\n")
    assert output.describe({"jobId": "j", "state": "QUEUED"}, "json") == (
        '{\n  "jobId": "j",\n  "state": "QUEUED"\n}\n')
    with pytest.raises(UserInputError) as e:
        output.describe(JOBS[0], "csv")
    assert e.value.field == "--format"


def test_summary_tables():
    assert output.summary(JOBS[1], UTC) == """\
┌────────────────────────────────────────────────────────────────────────────────────────────────────┐
│                                            Job Overview                                            │
├──────────────────────┬─────────────────────┬─────────────────────┬─────────────────────┬───────────┤
│ JOB_ID               │ CREATE_TIME         │ START_TIME          │ END_TIME            │ STATE     │
├──────────────────────┼─────────────────────┼─────────────────────┼─────────────────────┼───────────┤
│ a_much_longer_job_id │ 2026-01-30T08:00:00 │ 2026-01-30T08:01:00 │ 2026-01-30T09:00:00 │ SUCCEEDED │
└──────────────────────┴─────────────────────┴─────────────────────┴─────────────────────┴───────────┘
┌─────────────────────────────────────────────────────┐
│                Training Input Summary               │
├────────┬────────────┬───────────────┬───────────────┤
│ REGION │ SCALE_TIER │ PYTHON_MODULE │ MASTER_TYPE   │
├────────┼────────────┼───────────────┼───────────────┤
│ eu     │ CUSTOM     │ t.task        │ n1-standard-8 │
└────────┴────────────┴───────────────┴───────────────┘
┌─────────────────────────┐
│ Training Output Summary │
├─────────────────────────┤
│ ML_UNITS                │
├─────────────────────────┤
│ 1.5                     │
└─────────────────────────┘
"""


def test_list_table_is_gclouds():
    assert output.jobs_listing(JOBS, None, UTC) == (
        "JOB_ID                STATUS     CREATED\n"
        "census_2              RUNNING    2026-01-31T12:05:00\n"
        "a_much_longer_job_id  SUCCEEDED  2026-01-30T08:00:00\n")
    assert output.jobs_listing([], "table") == ""


@pytest.mark.parametrize("fmt, text", [
    ("value(jobId,state)", "census_2\tRUNNING\na_much_longer_job_id\tSUCCEEDED\n"),
    ("table(jobId, labels.team:label=TEAM, trainingInput.scaleTier)",
     "JOB_ID                TEAM  SCALE_TIER\ncensus_2              nlp   BASIC\na_much_longer_job_id        CUSTOM\n"),
    ("json", None), ("yaml", None),
])
def test_list_formats(fmt, text):
    got = output.jobs_listing(JOBS, fmt, UTC)
    if fmt == "json":
        assert got.startswith('[\n  {\n    "createTime": "2026-01-31T12:05:00Z",')
    elif fmt == "yaml":
        assert got.count("---\n") == 1 and got.startswith("createTime: '2026-01-31T12:05:00Z'\njobId: census_2\n")
    else:
        assert got == text


@pytest.mark.parametrize("fmt", ["csv", "value()", "table(jobId:width=3)"])
def test_bad_list_formats(fmt):
    with pytest.raises(UserInputError) as e:
        output.jobs_listing(JOBS, fmt)
    assert e.value.field == "--format"


def test_sort_by():
    assert [j["jobId"] for j in output.sort_jobs(JOBS, ["createTime"])] == ["a_much_longer_job_id", "census_2"]
    assert [j["jobId"] for j in output.sort_jobs(JOBS, ["~jobId"])] == ["census_2", "a_much_longer_job_id"]
    assert [j["jobId"] for j in output.sort_jobs(JOBS, ["labels.team"])] == ["a_much_longer_job_id", "census_2"]


def test_log_records_are_gclouds():
    when = datetime.datetime(2026, 1, 31, 12, 0, 5, tzinfo=UTC)
    assert output.log_record("master-replica-0", "loss=0.1", when, tz=UTC) == \
        "INFO\t2026-01-31 12:00:05 +0000\tmaster-replica-0\t\tloss=0.1"
    assert output.log_record("master-replica-0", "loss=0.1", None) == "INFO\t\tmaster-replica-0\t\tloss=0.1"
    assert output.log_record("worker-replica-1", "x", when, "ERROR", "3", tz=UTC) == \
        "ERROR\t2026-01-31 12:00:05 +0000\tworker-replica-1\t3\tx"
    assert output.split_multiline("a\nb") == ["a", "b"] and output.split_multiline("a\nb", True) == ["a\nb"]


@pytest.mark.parametrize("error, code, text", [
    (UsageError("kubectl ai-platform.jobs", "unrecognized arguments: -x"), 2, "unrecognized arguments: -x"),
    (UserInputError("--labels", "bad"), 2, "Invalid value for [--labels]: bad"),
    (UserInputError("project", "'bob' may not use project 'x'", 403), 1, "PERMISSION_DENIED: 'bob' may not use "
                                                                          "project 'x'"),
    (JobNotFound("p", "j"), 1, "NOT_FOUND: Job projects/p/jobs/j not found"),
    (JobExists("p", "j"), 1, "ALREADY_EXISTS: Job projects/p/jobs/j already exists"),
    (JobFinished("j", "SUCCEEDED"), 1, "FAILED_PRECONDITION: Job j is SUCCEEDED; only a running or queued job can "
                                       "be cancelled"),
    (UpstreamError("create the job", "quota exceeded"), 1, "UNAVAILABLE: could not create the job: quota exceeded"),
])
def test_error_translation(error, code, text):
    assert error_message(error) == (code, text)


@pytest.mark.parametrize("training, tasks", [
    ({}, ["master-replica-0"]),
    ({"scaleTier": "STANDARD_1"}, ["master-replica-0", *(f"worker-replica-{i}" for i in range(4)),
                                   "ps-replica-0"]),
    ({"scaleTier": "CUSTOM", "workerCount": "2", "evaluatorCount": "1"},
     ["master-replica-0", "worker-replica-0", "worker-replica-1", "evaluator-replica-0"]),
])
def test_task_names(training, tasks):
    assert commands.task_names({"trainingInput": training}) == tasks


class FakeBackend:
    """In-memory `JobBackend`: jobs end at once with the state `final`; each task logs two lines."""

    def __init__(self, final="SUCCEEDED"):
        self.final, self.jobs, self.plans = final, {}, []

    async def submit(self, plan):
        key = (plan.project, plan.job.job_id)
        if key in self.jobs:
            raise JobExists(*key)
        self.plans.append(plan)
        self.jobs[key] = {**plan.job.to_json(), "state": self.final, "createTime": "2026-01-31T12:00:00Z"}
        return {**self.jobs[key], "state": "QUEUED"}

    async def get(self, project, job_id):
        if (project, job_id) not in self.jobs:
            raise JobNotFound(project, job_id)
        return self.jobs[(project, job_id)]

    async def list(self, project):
        return [j for (p, _), j in self.jobs.items() if p == project]

    async def cancel(self, project, job_id):
        job = await self.get(project, job_id)
        raise JobFinished(job_id, job["state"])

    def logs(self, project, job_id, task="master-replica-0", *, follow=False, after=0):
        async def lines():
            for i, text in enumerate([f"{task} starts", "done"], 1):
                yield types.SimpleNamespace(seq=i, task=task, text=text, time="2026-01-31T12:00:01Z")
        return lines()

    async def close(self):
        pass


class ShippingService(JobService):
    """`JobService` whose ``--package-path`` build is replaced by a stand-in URI; what `create` was
    asked to build and ship is recorded (tests/local/test_cli.py builds for real)."""

    async def create(self, user, project, sub):
        package = sub.package
        self.shipped = getattr(self, "shipped", []) + [(package.path, package.staging_bucket) if package else None]
        body = sub.job
        if package is not None:
            training = body["trainingInput"]
            body = {**body, "trainingInput": {**training, "packageUris": ["gs://built/t-0.tar.gz",
                                                                          *training.get("packageUris", [])]}}
        return await super().create(user, project, body)


def context(backend):
    async def projects(user):
        return ["team"]
    service = ShippingService(backend, default_plan_settings(), projects)
    return commands.Context(service, "alice", "team", io.StringIO(), io.StringIO(), tz=UTC)


async def submit(ctx, argv):
    from server_ext.cli.flags import submission_of
    args = parse_args(["jobs", "submit", "training", *argv])
    return await commands.submit_training(ctx, args, submission_of(args))


async def test_submit_prints_gclouds_block_and_status():
    backend = FakeBackend()
    ctx = context(backend)
    assert await submit(ctx, ["j1", "--module-name", "t.task", "--package-path", "trainer",
                              "--staging-bucket", "gs://stage/"]) == 0
    assert ctx.out.getvalue() == "jobId: j1\nstate: QUEUED\n"
    assert ctx.err.getvalue() == output.submitted("j1")
    assert ctx.service.shipped == [("trainer", "gs://stage")]
    assert backend.plans[0].package_uris == ("gs://built/t-0.tar.gz",) and backend.plans[0].owner == "alice"


@pytest.mark.parametrize("final, code", [("SUCCEEDED", 0), ("FAILED", 1)])
async def test_submit_with_stream_logs_exits_with_the_jobs_result(final, code):
    ctx = context(FakeBackend(final))
    assert await submit(ctx, ["j1", "--module-name", "t", "--packages", "gs://b/t.tgz", "--stream-logs"]) == code
    assert ctx.err.getvalue() == ("Job [j1] submitted successfully.\n"
                                  "INFO\t2026-01-31 12:00:01 +0000\tmaster-replica-0\t\tmaster-replica-0 starts\n"
                                  "INFO\t2026-01-31 12:00:01 +0000\tmaster-replica-0\t\tdone\n")
    assert ctx.out.getvalue() == f"jobId: j1\nstate: {final}\n"


async def test_list_describe_logs_and_cancel():
    backend = FakeBackend()
    ctx = context(backend)
    await submit(ctx, ["j1", "--module-name", "t", "--packages", "gs://b/t.tgz"])
    ctx.out.seek(0), ctx.out.truncate()
    assert await commands.list_jobs(ctx, parse_args(["jobs", "list", "--filter", "state=SUCCEEDED"])) == 0
    assert ctx.out.getvalue() == "JOB_ID  STATUS     CREATED\nj1      SUCCEEDED  2026-01-31T12:00:00\n"
    ctx.out.seek(0), ctx.out.truncate()
    ctx.err.seek(0), ctx.err.truncate()
    assert await commands.list_jobs(ctx, parse_args(["jobs", "list", "--filter", "state=FAILED"])) == 0
    assert (ctx.out.getvalue(), ctx.err.getvalue()) == ("", "Listed 0 items.\n")
    with pytest.raises(UserInputError) as e:
        await commands.list_jobs(ctx, parse_args(["jobs", "list", "--filter", "state="]))
    assert e.value.field == "--filter"
    ctx.out.seek(0), ctx.out.truncate()
    assert await commands.stream_job_logs(ctx, parse_args(["jobs", "stream-logs", "j1", "--task-name", "chief-0"])) == 0
    assert ctx.out.getvalue().splitlines()[0] == "INFO\t2026-01-31 12:00:01 +0000\tmaster-replica-0\t\tmaster-replica-0 starts"
    ctx.err.seek(0), ctx.err.truncate()
    assert await commands.cancel_job(ctx, parse_args(["jobs", "cancel", "j1"])) == 0  # already ended: not an error
    assert ctx.err.getvalue() == "Job [j1] has already ended (SUCCEEDED); there is nothing to cancel.\n"
    with pytest.raises(JobNotFound):
        await commands.describe_job(ctx, parse_args(["jobs", "describe", "nope"]))
    ctx.out.seek(0), ctx.out.truncate()
    assert await commands.describe_job(ctx, parse_args(["jobs", "get", "j1", "--format", "json"])) == 0
    assert ctx.out.getvalue().startswith('{\n  "createTime": "2026-01-31T12:00:00Z",\n  "jobId": "j1",')


SWEEP = {"jobId": "hp", "state": "SUCCEEDED", "createTime": "2026-01-30T08:00:00Z",
         "trainingInput": {"region": "eu", "pythonModule": "t.task", "hyperparameters": {"goal": "MAXIMIZE"}},
         "trainingOutput": {"isHyperparameterTuningJob": True, "completedTrialCount": "3", "trials": [
             {"trialId": "1", "hyperparameters": {"lr": "0.1", "layers": "4"},
              "finalMetric": {"objectiveValue": 0.5, "trainingStep": "100"}},
             {"trialId": "2", "hyperparameters": {"lr": "0.01", "layers": "2"}},
             {"trialId": "10", "hyperparameters": {"lr": "0.001", "layers": "8"}, "finalMetric": {"objectiveValue": 0.25}},
             {"trialId": "3", "hyperparameters": {"lr": "0.05", "layers": "3"},
              "finalMetric": {"objectiveValue": 0.75, "trainingStep": "100"}}]}}


def _trials_table(job):
    text = output.summary(job, UTC)
    return text[text.rindex("┌", 0, text.index("Training Output Trials")):]


def test_summary_of_a_sweep_prints_its_trials_best_first():
    assert _trials_table(SWEEP) == """\
┌──────────────────────────────────────────────────┐
│              Training Output Trials              │
├───────┬─────────────────┬──────┬─────────────────┤
│ TRIAL │ OBJECTIVE_VALUE │ STEP │ HYPERPARAMETERS │
├───────┼─────────────────┼──────┼─────────────────┤
│ 3     │ 0.75            │ 100  │ layers=3        │
│       │                 │      │ lr=0.05         │
│ 1     │ 0.5             │ 100  │ layers=4        │
│       │                 │      │ lr=0.1          │
│ 10    │ 0.25            │      │ layers=8        │
│       │                 │      │ lr=0.001        │
│ 2     │                 │      │ layers=2        │
│       │                 │      │ lr=0.01         │
└───────┴─────────────────┴──────┴─────────────────┘
"""
    assert "│ COMPLETED_TRIALS │ ML_UNITS │\n├──────────────────┼──────────┤\n│ 3                │" in \
        output.summary(SWEEP, UTC)


def _output_summary(job):
    text = output.summary(job, UTC)
    start = text.rindex("┌", 0, text.index("Training Output Summary"))
    return text[start:text.index("┘", start) + 1]


def test_summary_of_a_running_sweep_says_how_many_trials_have_finished():
    """gcloud's TRIALS (completedTrialCount) read ``0`` above a table of 2 running trials."""
    running = {**SWEEP, "state": "RUNNING",
               "trainingInput": {**SWEEP["trainingInput"], "hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 4}},
               "trainingOutput": {"isHyperparameterTuningJob": True, "completedTrialCount": "0", "trials": [
                   {"trialId": "1", "state": "RUNNING", "hyperparameters": {"lr": "0.1"}},
                   {"trialId": "2", "state": "RUNNING", "hyperparameters": {"lr": "0.01"}}]}}
    assert _output_summary(running) == """\
┌─────────────────────────────┐
│   Training Output Summary   │
├──────────────────┬──────────┤
│ COMPLETED_TRIALS │ ML_UNITS │
├──────────────────┼──────────┤
│ 0 of 4           │          │
└──────────────────┴──────────┘"""
    started = {**running, "trainingOutput": {"isHyperparameterTuningJob": True}}  # no count yet: 0
    assert "│ 0 of 4           │" in _output_summary(started)
    plain = {"jobId": "j", "state": "SUCCEEDED", "trainingInput": {}, "trainingOutput": {"consumedMLUnits": 1.5}}
    assert "TRIALS" not in output.summary(plain, UTC)  # not a sweep: no trials column, as gcloud's optional one


def test_summary_of_a_minimizing_sweep_puts_the_lowest_first():
    job = {**SWEEP, "trainingInput": {**SWEEP["trainingInput"], "hyperparameters": {"goal": "MINIMIZE"}}}
    rows = [line.split("│")[1].strip() for line in _trials_table(job).splitlines() if line.startswith("│ ")]
    assert [r for r in rows if r] == ["Training Output Trials", "TRIAL", "10", "1", "3", "2"]


def test_summary_without_trials_has_no_trials_table():
    job = {**SWEEP, "trainingOutput": {"isHyperparameterTuningJob": True, "completedTrialCount": "0"}}
    assert "Training Output Trials" not in output.summary(job, UTC)


TIMES = {"createTime": "2026-12-03T15:54:02.001684Z", "startTime": "2026-12-03T15:54:04Z",
         "endTime": "2026-12-03T17:54:09+02:00"}


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_describe_prints_the_apis_times_unchanged(fmt):
    """As gcloud prints what the API returns; the tables show them in the local zone (``date(tz=LOCAL)``)."""
    import json

    import yaml

    job = {"jobId": "j1", "state": "SUCCEEDED", **TIMES}
    text = output.describe(job, fmt)
    assert (yaml.safe_load(text) if fmt == "yaml" else json.loads(text)) == job
    for value in TIMES.values():
        assert value in text
    assert output.jobs_listing([job], "table", UTC).splitlines()[1] == "j1      SUCCEEDED  2026-12-03T15:54:02"
    later = datetime.timezone(datetime.timedelta(hours=1))
    assert output.jobs_listing([job], "table", later).splitlines()[1].endswith("2026-12-03T16:54:02")
    assert output.job_status(job, UTC) == ("endTime: '2026-12-03T15:54:09'\njobId: j1\n"
                                           "startTime: '2026-12-03T15:54:04'\nstate: SUCCEEDED\n")


class UntimedBackend(FakeBackend):
    """A runtime that keeps no per-line times (the local one): its lines carry none."""

    def logs(self, project, job_id, task="master-replica-0", *, follow=False, after=0):
        async def lines():
            yield LogLine(1, task, "epoch 1/1")
        return lines()


async def test_stream_logs_prints_the_lines_own_time_or_none():
    ctx = context(UntimedBackend())
    await submit(ctx, ["j1", "--module-name", "t", "--packages", "gs://b/t.tgz"])
    ctx.out.seek(0), ctx.out.truncate()
    assert await commands.stream_job_logs(ctx, parse_args(["jobs", "stream-logs", "j1"])) == 0
    assert ctx.out.getvalue() == "INFO\t\tmaster-replica-0\t\tepoch 1/1\n"  # not the time it was read
    timed = types.SimpleNamespace(seq=1, task="master-replica-0", text="x", time="2026-01-31T12:00:01.5+01:00")
    assert commands._when(timed) == datetime.datetime(2026, 1, 31, 11, 0, 1, 500000, tzinfo=UTC)
    assert commands._when(types.SimpleNamespace(time="not a time")) is None
