"""A submission is described once (issue 19, item 1): the CLI's flags, the REST body and
``client.submit``'s keyword arguments fill the same `Submission`, which gives the same ml.v1 Job;
its mistakes are named in REST terms, renamed to flags only by the CLI (and to its own arguments by
``client.submit``); ``--dry-run`` is a backend that answers manifests (`DryRun`)."""

import subprocess
import sys

import pytest

from hub_ext.core.errors import UserInputError, UserInputErrors
from server_ext.cli.flags import flagged, parse_args
from server_ext.cli.flags import submission_of as from_cli
from server_ext.client.submissions import submission_of as from_client
from server_ext.jobs.submission import Mounts, Package, Submission, from_options, from_rest, to_rest
from server_ext.jobs.tables import parse_tables
from server_ext.service.wiring import dry_run_service

pytestmark = pytest.mark.unit

ARGV = ["jobs", "submit", "training", "j1", "--module-name", "trainer.task", "--scale-tier", "basic-gpu",
        "--labels", "team=vision", "--package-path", "trainer", "--staging-bucket", "gs://stage",
        "--credentials", "gcp", "--datasets", "a,b", "--", "--epochs=3"]
REST = {"jobId": "j1", "labels": {"team": "vision"},
        "trainingInput": {"pythonModule": "trainer.task", "scaleTier": "BASIC_GPU", "args": ["--epochs=3"]},
        "package": {"path": "trainer", "stagingBucket": "gs://stage"},
        "mounts": {"credentials": ["gcp"], "datasets": ["a", "b"]}}
KWARGS = {"job_id": "j1", "module_name": "trainer.task", "scale_tier": "basic-gpu", "labels": {"team": "vision"},
          "staging_bucket": "gs://stage", "credentials": ["gcp"], "datasets": ["a", "b"], "args": ["--epochs=3"]}


def test_every_door_fills_the_same_submission_and_job():
    cli = from_cli(parse_args(ARGV)).in_project("vision")
    rest = from_rest(REST, "vision")
    client = from_client(None, "trainer", KWARGS, "vision")
    jobs = [sub.to_job().to_json() for sub in (cli, rest, client)]
    assert jobs[0] == jobs[1] == jobs[2]
    assert jobs[0]["trainingInput"]["scaleTier"] == "BASIC_GPU" and jobs[0]["trainingInput"]["args"] == ["--epochs=3"]
    for sub in (cli, rest, client):
        assert (sub.project, sub.package, sub.mounts) == ("vision", Package("trainer", "gs://stage"),
                                                          Mounts(("gcp",), ("a", "b")))
    assert from_rest(to_rest(client), "vision") == client  # the body a client sends reads back the same


def test_the_submit_form_fills_it_as_the_cli_does():
    from server_ext.widgets.form import submit_arguments

    config, kwargs = submit_arguments({"job_id": "j1", "module": "trainer.task", "package_path": "trainer",
                                       "args": "--epochs=3", "scale_tier": "BASIC_GPU", "credentials": ("gcp",),
                                       "datasets": ("a", "b"), "project": "vision"})
    project, package_path = kwargs.pop("project"), kwargs.pop("package_path")
    form = from_client(config, package_path, kwargs, project)
    cli = from_cli(parse_args(["jobs", "submit", "training", "j1", "--module-name", "trainer.task", "--scale-tier",
                               "basic-gpu", "--package-path", "trainer", "--credentials", "gcp", "--datasets", "a,b",
                               "--", "--epochs=3"])).in_project("vision")
    assert form.to_job().to_json() == cli.to_job().to_json()
    assert (form.project, form.package, form.mounts) == (cli.project, cli.package, cli.mounts)


def test_a_mistake_is_named_in_rest_terms_then_by_each_face():
    with pytest.raises(UserInputError) as e:
        from_options({"job": "j1", "package_path": "trainer"})
    assert e.value.field == "trainingInput.pythonModule"
    with pytest.raises(UserInputError) as e:
        from_cli(parse_args(["jobs", "submit", "training", "j1", "--package-path", "trainer"]))
    assert e.value.field == "--module-name"  # the CLI's flags, renamed at its edge only
    with pytest.raises(UserInputError) as e:
        from_client(None, "trainer", {"job_id": "j1"})
    assert e.value.field == "module_name"  # submit()'s own argument
    with pytest.raises(UserInputError) as e:
        from_client(None, None, {"job_id": "j1", "modul_name": "t"})
    assert (e.value.field, e.value.message) == ("modul_name", "is not an argument of submit() (did you mean "
                                                              "'module_name'?)")
    with pytest.raises(UserInputError) as e:
        from_client(None, None, {"job_id": "j1", "master_accelerator": {"type": "nvidia-tesla-t4"}})
    assert e.value.field == "master_accelerator" and "count" in e.value.message


def test_the_rest_body_names_its_platform_fields_all_at_once():
    with pytest.raises(UserInputErrors) as e:
        from_rest({"jobId": "j", "package": {"path": "bad\x00", "stagingBucket": 7}, "mounts": {"datasets": 5}})
    assert [f for f, _ in e.value.violations] == ["package.stagingBucket", "package.path", "mounts.datasets"]
    for body, field in (([], "job"), ({"package": None}, "package"), ({"mounts": ["gcp"]}, "mounts")):
        with pytest.raises(UserInputError) as e:
            from_rest(body)
        assert e.value.field == field
    assert from_rest({"jobId": "j", "mounts": None}) == Submission({"jobId": "j"})
    experiment = {"kind": "Experiment", "mounts": {"x": 1}}  # taken as it is: its fields are its own
    assert from_rest(experiment).job == experiment


def test_the_cli_renames_the_services_rest_fields_to_the_flags_given():
    args = parse_args(ARGV)
    e = UserInputErrors([UserInputError("package.path", "not a package"),
                         UserInputError("package.stagingBucket", "no such bucket"),
                         UserInputError("mounts.credentials[0]", "no such credential", 403),
                         UserInputError("task", "no such task"), UserInputError("trainingInput.masterType", "bad")])
    renamed = flagged(e, args)
    assert [f for f, _ in renamed.violations] == ["--package-path", "--staging-bucket", "--credentials", "--task-name",
                                                  "trainingInput.masterType"]  # no flag set it: the field
    assert [one.status for one in renamed.errors] == [400, 400, 403, 400, 400]


def test_the_client_does_not_import_the_cli():
    code = ("import sys, server_ext.client; "
            "sys.exit(sorted(m for m in sys.modules if m.split('.')[:2] == ['server_ext', 'cli']) != [])")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


async def test_dry_run_is_a_backend_that_answers_what_it_would_create(tmp_path):
    tables = parse_tables(None, "")
    sub = Submission({"jobId": "j1", "trainingInput": {"pythonModule": "t.task",
                                                       "packageUris": ["gs://b/t-0.1.tar.gz"]}})
    local = dry_run_service(tables, "vision", local=True, state_dir=tmp_path)
    answer = await local.create("alice", "vision", sub)
    assert answer["runtime"] == "local" and answer["package"] is None
    assert [m["jobId"] for m in answer["manifests"]] == ["j1"] and (await local.list("alice", "vision"))["jobs"] == []
    with pytest.raises(UserInputError) as e:  # the local runtime runs no Katib Experiment
        await local.create("alice", "vision", Submission({"kind": "Experiment"}))
    assert e.value.field == "kind"
    kube = dry_run_service(tables, "vision", local=False)
    answer = await kube.create("alice", "vision", sub)
    assert answer["runtime"] == "kubernetes" and answer["manifests"][0]["kind"].endswith("Job")
    assert answer["manifests"][0]["metadata"]["namespace"] == "vision"
    with pytest.raises(UserInputError) as e:  # the project is still checked
        await kube.create("alice", "other", sub)
    assert e.value.field == "project"


async def test_a_task_the_runtime_lacks_is_named_by_its_flag_not_a_traceback():
    """``jobs stream-logs J --task-name worker-3`` on a job without that task: the runtime's refusal
    (at the first line, inside the tasks' group) is one error naming ``--task-name`` (it was an
    ExceptionGroup, which the CLI's error handling did not catch: a traceback)."""
    import io

    from server_ext.cli import commands
    from server_ext.cli.flags import submission_of
    from server_ext.service.jobs import JobService
    from tests.unit.test_cli_output import FakeBackend, default_plan_settings

    class NoWorkers(FakeBackend):
        def logs(self, project, job_id, task="master-replica-0", *, follow=False, after=0):
            raise UserInputError("task", f"the job has no task {task!r}")

    async def projects(user):
        return ["team"]

    ctx = commands.Context(JobService(NoWorkers(), default_plan_settings(), projects), "alice", "team",
                           io.StringIO(), io.StringIO())
    submit = parse_args(["jobs", "submit", "training", "j1", "--module-name", "t", "--packages", "gs://b/t.tgz"])
    await commands.submit_training(ctx, submit, from_cli(submit))
    with pytest.raises(UserInputError) as e:
        await commands.stream_job_logs(ctx, parse_args(["jobs", "stream-logs", "j1", "--task-name", "worker-3"]))
    assert (e.value.field, e.value.message) == ("--task-name", "the job has no task 'worker-replica-3'")
