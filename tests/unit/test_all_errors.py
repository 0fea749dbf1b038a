"""Every independent mistake of one request is told at once (issue 20.6: "four mistakes took four
submits"): the job model, the planner, the REST package field, the error JSON, the notebook client
and the CLI each carry all of them, each naming its own field; a check that needs a value already
found wrong is skipped; a lone mistake is the plain `UserInputError` it always was."""


import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import UserInputError, UserInputErrors, collect, http_answer
from server_ext.cli.flags import flagged, parse_args, submission_of
from server_ext.cli.output import input_error
from server_ext.client.errors import from_response
from server_ext.errors import google_error
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job
from server_ext.jobs.submission import Mounts, Submission
from server_ext.rest.package_field import read_create_body
from server_ext.service.jobs import JobService

pytestmark = pytest.mark.unit

CODE = {"pythonModule": "trainer.task", "packageUris": ["gs://bucket/trainer-0.1.tar.gz"]}
# four mistakes a newcomer makes in one submit: each in its own field
FOUR = {"jobId": "1st_try", "labels": {"Team": "vision"},
        "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "pythonModule": "trainer-task",
                          "packageUris": CODE["packageUris"],
                          "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "0"}},
                          "scheduling": {"maxRunningTime": "0s"}}}
FOUR_FIELDS = ["jobId", "labels.Team", "trainingInput.masterConfig.acceleratorConfig.count",
               "trainingInput.scheduling.maxRunningTime", "trainingInput.pythonModule"]


def refusal(fn, *args, **kwargs) -> UserInputError:
    with pytest.raises(UserInputError) as e:
        fn(*args, **kwargs)
    return e.value


def test_a_job_with_several_mistakes_names_every_one_of_them():
    e = refusal(parse_job, FOUR)
    assert isinstance(e, UserInputErrors) and e.status == 400
    assert [field for field, _ in e.violations] == FOUR_FIELDS
    assert (e.field, e.message) == e.violations[0]  # callers that read one field still get the first
    assert all(message for _, message in e.violations)
    assert str(e).startswith("jobId: must start with a letter") and "; labels.Team: keys must start" in str(e)


@pytest.mark.parametrize("doc, fields", [
    # each role's count and type: a bad count is not also "needs a type"
    ({"jobId": "j", "trainingInput": {**CODE, "scaleTier": "CUSTOM", "workerCount": "-1",
                                      "parameterServerType": "n1-standard-4"}},
     ["trainingInput.masterType", "trainingInput.workerCount", "trainingInput.parameterServerCount"]),
    # a TPU tier is wrong; the custom-tier checks that depend on the tier are not run
    ({"jobId": "j", "trainingInput": {**CODE, "scaleTier": "BASIC_TPU", "workerCount": "-1"}},
     ["trainingInput.scaleTier"]),
    # each replica's accelerator on its own; no code at all: the module and the packages
    ({"jobId": "j", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-8",
                                      "workerType": "n1-standard-8", "workerCount": "2",
                                      "masterConfig": {"acceleratorConfig": {"type": "TPU_V2", "count": "1"}},
                                      "workerConfig": {"acceleratorConfig": {"count": "65"}}}},
     ["trainingInput.masterConfig.acceleratorConfig.type", "trainingInput.workerConfig.acceleratorConfig.type",
      "trainingInput.workerConfig.acceleratorConfig.count", "trainingInput.pythonModule",
      "trainingInput.packageUris"]),
    # output-only fields, a bad package URI and an empty sweep
    ({"jobId": "j", "state": "RUNNING", "trainingInput": {"pythonModule": "m", "packageUris": ["ftp://b/p.tar.gz"],
                                                          "hyperparameters": {}}},
     ["state", "trainingInput.packageUris[0]", "trainingInput.hyperparameters"]),
    ({"labels": {"ok": "Bad Value"}}, ["jobId", "labels.ok", "trainingInput"]),
])
def test_independent_checks_all_run_and_dependent_ones_are_skipped(doc, fields):
    assert [f for f, _ in refusal(parse_job, doc).violations] == fields


def test_a_lone_mistake_is_the_plain_error_it_was():
    e = refusal(parse_job, {"jobId": "j", "trainingInput": {**CODE, "pythonModule": "a-b"}})
    assert type(e) is UserInputError and e.violations == (("trainingInput.pythonModule", e.message),)


def test_a_wrongly_typed_value_stops_the_checks_with_its_own_path():
    e = refusal(parse_job, {"jobId": "1", "trainingInput": {**CODE, "workerCount": "many"}})
    assert type(e) is UserInputError and e.field == "trainingInput.workerCount"


def test_google_error_has_one_field_violation_per_mistake_and_the_client_reads_them_back():
    status, body = google_error(refusal(parse_job, FOUR))
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")
    (detail,) = body["error"]["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert [v["field"] for v in detail["fieldViolations"]] == FOUR_FIELDS
    assert all(set(v) == {"field", "description"} and v["description"] for v in detail["fieldViolations"])
    back = from_response(status, body, action="create job", project="alice", job_id="j")
    assert [f for f, _ in back.violations] == FOUR_FIELDS and back.field == "jobId"


def test_the_status_is_403_only_when_every_mistake_is_a_permission():
    def errors(*statuses):
        with pytest.raises(UserInputError) as e, collect() as problems:
            for i, status in enumerate(statuses):
                problems.add(f"f{i}", "no", status)
        return e.value
    assert google_error(errors(403, 403))[0] == 403
    assert google_error(errors(403, 400))[0] == 400
    assert http_answer(errors(400, 403)) == (400, "f0: no; f1: no")


def test_collect_keeps_what_a_check_raises_and_tells_it_with_a_fatal_one_last():
    def bad():
        raise UserInputError("b", "is bad")
    with pytest.raises(UserInputErrors) as e, collect() as problems:
        problems.add("a", "is wrong")
        assert problems.check(bad) is None and problems.failed("b") and not problems.failed("c")
        raise UserInputError("c", "stops here")
    assert e.value.violations == (("a", "is wrong"), ("b", "is bad"), ("c", "stops here"))
    with collect() as problems:  # nothing kept: nothing raised
        assert problems.check(lambda: 3) == 3
    with pytest.raises(KeyError), collect() as problems:  # not a user's mistake: passes through
        problems.add("a", "is wrong")
        raise KeyError("x")


CATALOG = parse_accelerators({"a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                              "1g.5gb": {"type": "mig", "profile": "1g.5gb"}})


def test_the_plan_names_the_runtime_and_each_replicas_machine_and_accelerator_together():
    settings = PlanSettings(Machines(CATALOG))  # the default runtimes: no 9.9
    job = parse_job({"jobId": "j", "trainingInput": {
        **CODE, "scaleTier": "CUSTOM", "runtimeVersion": "9.9", "masterType": "n1-standard-9000",
        "workerType": "n1-standard-8", "workerCount": "1",
        "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_H100", "count": "1"}}}})
    e = refusal(plan_job, job, settings, project="vision", owner="alice")
    assert [f for f, _ in e.violations] == ["trainingInput.runtimeVersion", "trainingInput.masterType",
                                            "trainingInput.workerConfig.acceleratorConfig.type"]


def test_the_rest_package_field_names_a_bad_bucket_and_a_bad_path_together(tmp_path):
    e = refusal(read_create_body, {"package": {"path": "../outside", "stagingBucket": 7}}, "vision", tmp_path)
    assert [f for f, _ in e.violations] == ["package.stagingBucket", "package.path"]


async def test_the_service_names_each_mistake_as_the_rest_body_does():
    """The jobs service names fields in REST terms (``mounts.credentials[0]``), for every face."""
    async def projects(user):
        return ["vision"]

    service = JobService(object(), PlanSettings(Machines(CATALOG)), projects)
    sub = Submission({"jobId": "1st", "trainingInput": CODE}, "vision", mounts=Mounts(("x",)))
    with pytest.raises(UserInputError) as e:
        await service.create("alice", "vision", sub)
    assert [(one.field, one.status) for one in e.value.errors] == [("jobId", 400), ("mounts.credentials[0]", 403)]


SUBMIT = ["jobs", "submit", "training"]


def test_the_cli_names_every_mistake_by_its_flag_first_line_as_before(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scheduling: {maxRunningTime: 0s}\n")
    args = parse_args(SUBMIT + ["1st_try", "--module-name", "trainer-task", "--packages", "gs://b/t.tar.gz",
                                "--labels", "Team=vision", "--config", str(config),
                                "--scale-tier", "custom", "--master-machine-type", "n1-standard-8",
                                "--master-accelerator", "type=tpu-v2,count=1"])
    e = refusal(submission_of, args)
    assert [f for f, _ in e.violations] == ["JOB", "--labels", "--master-accelerator",
                                            "trainingInput.scheduling.maxRunningTime in --config", "--module-name"]
    lines = input_error(e).split("\n")
    assert lines[0] == ("Invalid value for [JOB]: must start with a letter and hold only letters, digits and '_' "
                        "(at most 128 characters)")
    assert lines[2] == ("Invalid value for [--master-accelerator]: TPUs are not offered on this platform; use a GPU "
                        "or a MIG slice")
    assert len(lines) == 5 and lines[4].startswith("Invalid value for [--module-name]: must be a dotted Python")


def test_cli_flag_rules_are_told_together_and_a_lone_error_prints_as_before():
    args = parse_args(SUBMIT + ["j", "--worker-count", "2", "--parameter-server-machine-type", "standard",
                                "--module-name", "m", "--packages", "gs://b/t.tar.gz"])
    e = refusal(submission_of, args)
    assert input_error(e) == ("Invalid value for [--worker-machine-type]: must be specified with --worker-count\n"
                              "Invalid value for [--parameter-server-count]: must be specified with "
                              "--parameter-server-machine-type")
    assert input_error(UserInputError("--region", "no")) == "Invalid value for [--region]: no"
    assert input_error(UserInputError("project", "may not", 403)) == "PERMISSION_DENIED: may not"


def test_plan_errors_after_the_flags_are_each_named_by_their_flag():
    args = parse_args(SUBMIT + ["j", "--module-name", "m", "--packages", "gs://b/t.tar.gz", "--scale-tier", "custom",
                                "--master-machine-type", "n1-standard-9000", "--runtime-version", "9.9"])
    e = flagged(UserInputErrors([UserInputError("trainingInput.runtimeVersion", "no runtime"),
                                 UserInputError("trainingInput.masterType", "unknown")]), args)
    assert [f for f, _ in e.violations] == ["--runtime-version", "--master-machine-type"]
