"""What users already have, part 1: command lines in the shape of real ``gcloud ai-platform jobs
submit training`` scripts (written here; every such script passes ``--region``) run through
``kubectl ai-platform`` as they are, on a platform of one cluster (no region table), ``--dry-run``:
each is accepted with one note on stderr and prints manifests valid against the Kubeflow/Katib
CRDs, or is refused naming the flag and what to do. Also: ``--region`` with a region table, the
did-you-mean of an unknown flag and of a misspelt machine type, and stream-logs' records in
gcloud's shape (its ``LOG_FORMAT``: severity, ``%Y-%m-%d %H:%M:%S %z`` in local time, task)."""

from __future__ import annotations

import datetime
import io
import shlex

import pytest
import yaml

from server_ext.cli import output
from server_ext.cli.commands import severity_of
from server_ext.cli.main import main
from server_ext.jobs.backend import LogLine
from tests.unit.test_job_kubeflow import check_kubernetes
from tests.unit.test_katib import check_experiment

pytestmark = pytest.mark.unit

NO_TABLE = {"JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": "/nonexistent/kubectl-ai-platform.yaml"}
NOTE = ("note: --region {} is accepted: no region table is configured, so this platform's one cluster serves every "
        "region\n")

HPTUNING = """\
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-8
  hyperparameters:
    goal: MAXIMIZE
    hyperparameterMetricTag: accuracy
    maxTrials: 6
    maxParallelTrials: 2
    enableTrialEarlyStopping: true
    params:
    - {parameterName: learning-rate, type: DOUBLE, minValue: 0.0001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}
    - {parameterName: hidden-units, type: INTEGER, minValue: 32, maxValue: 256, scaleType: UNIT_LINEAR_SCALE}
"""

# (script line after "gcloud ai-platform jobs submit training", what it does on this platform)
SCRIPTS = [
    # the quickstart shape: job name with a date, bucket job dir, runtime and python versions, --stream-logs
    ("census_20261204_024840 --package-path={trainer} --module-name trainer.task --region us-central1 "
     "--python-version 3.7 --runtime-version 2.11 --job-dir gs://my-bucket/census/out --stream-logs "
     "-- --train-files gs://my-bucket/data/adult.data.csv --eval-files gs://my-bucket/data/adult.test.csv "
     "--num-epochs 3", "ok"),
    # a built package already in the bucket, a scale tier, labels
    ("flowers_train_v3 --region=europe-west4 --packages gs://ml-staging/flowers-0.2.tar.gz "
     "--module-name flowers.task --scale-tier BASIC --runtime-version 2.8 --python-version 3.7 "
     "--labels team=vision,owner=dana -- --epochs=10", "ok"),
    # custom tier with a GPU, as the GPU samples write it
    ("mnist_gpu_run --region us-east1 --scale-tier custom --master-machine-type n1-standard-8 "
     "--master-accelerator count=1,type=nvidia-tesla-a100 --packages gs://b/mnist-1.0.tar.gz "
     "--module-name mnist.task --runtime-version 2.11 --python-version 3.7 --job-dir gs://b/mnist", "ok"),
    # distributed TensorFlow: workers and a parameter server, legacy machine names
    ("wide_deep_dist --region us-central1 --scale-tier CUSTOM --master-machine-type complex_model_m "
     "--worker-machine-type standard --worker-count 2 --parameter-server-machine-type large_model "
     "--parameter-server-count 1 --runtime-version 2.11 --python-version 3.7 "
     "--packages gs://b/wd-0.1.tar.gz --module-name trainer.task", "ok"),
    # a custom container (no module, no package), the container-sample shape
    ("pytorch_container_job --region us-central1 --master-image-uri gcr.io/my-project/pytorch-trainer:v2 "
     "--scale-tier BASIC -- --epochs=5 --lr=0.01", "ok"),
    # hyperparameter tuning with a config file, as hptuning samples do
    ("census_hpt_1 --config {hptuning} --region us-central1 --runtime-version 2.11 --python-version 3.7 "
     "--packages gs://b/census-0.1.tar.gz --module-name trainer.task --job-dir gs://b/hpt", "ok"),
    # the deprecated --async a script still carries
    ("quick_async_job --async --region asia-east1 --packages gs://b/t-0.1.tar.gz --module-name trainer.task "
     "--runtime-version 2.8", "ok"),
    # PyTorch runtime of the platform, workers with MIG slices
    ("resnet_ddp_07 --region us-central1 --runtime-version pytorch-2.3 --scale-tier custom "
     "--master-machine-type n1-highmem-8 --master-accelerator type=nvidia-a100-1g.5gb,count=1 "
     "--worker-machine-type n1-highmem-8 --worker-count 2 --worker-accelerator type=nvidia-a100-1g.5gb,count=1 "
     "--packages gs://b/resnet-0.3.tar.gz --module-name resnet.train", "ok"),
    # a TF 1.x script: its runtime is not here; refused naming the flag with what is offered
    ("legacy_tf1_job --region us-central1 --runtime-version 1.15 --python-version 3.7 "
     "--packages gs://b/t-0.1.tar.gz --module-name trainer.task",
     "Invalid value for [--runtime-version]: no runtime '1.15' here (offered: "),
    # a TPU job: refused naming the flag, saying what to use instead
    ("bert_tpu_job --region us-central1 --scale-tier BASIC_TPU --runtime-version 2.11 "
     "--packages gs://b/bert-0.1.tar.gz --module-name bert.run", "TPU"),
]


def run_cli(argv, env=NO_TABLE):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, env=env)
    return code, out.getvalue(), err.getvalue()


def _region(words: list[str]) -> str:
    for i, w in enumerate(words):
        if w == "--region":
            return words[i + 1]
        if w.startswith("--region="):
            return w.split("=", 1)[1]
    raise AssertionError("every script passes --region")


@pytest.fixture
def files(tmp_path):
    trainer = tmp_path / "trainer"
    (trainer / "trainer").mkdir(parents=True)
    (trainer / "trainer" / "__init__.py").write_text("")
    (trainer / "trainer" / "task.py").write_text("print('training')\n")
    (trainer / "setup.py").write_text("from setuptools import setup, find_packages\n"
                                      "setup(name='trainer', version='0.1', packages=find_packages())\n")
    hptuning = tmp_path / "hptuning_config.yaml"
    hptuning.write_text(HPTUNING)
    return {"trainer": str(trainer / "trainer"), "hptuning": str(hptuning)}


@pytest.mark.parametrize("line, expected", SCRIPTS, ids=[s[0].split()[0] for s in SCRIPTS])
def test_gcloud_script_lines_run_as_they_are_on_a_platform_of_one_cluster(line, expected, files):
    words = shlex.split(line.format(**files))
    user_args = words.index("--") if "--" in words else len(words)
    argv = ["jobs", "submit", "training", *words[:user_args], "--dry-run", "-n", "team", *words[user_args:]]
    code, out, err = run_cli(argv)
    note = NOTE.format(_region(words))
    assert err.count(note) == 1, err  # once per command
    if expected != "ok":
        assert code == 2 and out == "", err
        (line_,) = [e for e in err.splitlines() if e.startswith("ERROR:")]
        assert line_.startswith("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for [--")
        assert expected in line_
        return
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert docs
    for doc in docs:
        if doc["kind"] == "Experiment":
            check_experiment(doc)
        elif doc["kind"] != "ConfigMap":
            check_kubernetes(doc)


def test_without_dry_run_the_region_is_accepted_before_connecting():
    """The real command gets past --region (the old refusal) to the cluster: here none is reachable."""
    env = {**NO_TABLE, "KUBECONFIG": "/nonexistent/kubeconfig"}
    code, out, err = run_cli(["jobs", "submit", "training", "j1", "--module-name", "m", "--packages", "gs://b/p.tgz",
                              "--region", "us-central1"], env)
    assert code == 2 and out == ""
    assert err.startswith(NOTE.format("us-central1")) and "[--region]" not in err and "[KUBECONFIG]" in err, err


@pytest.mark.parametrize("argv", [["jobs", "list"], ["jobs", "describe", "j"], ["jobs", "stream-logs", "j"],
                                  ["jobs", "cancel", "j"]])
def test_every_jobs_command_accepts_any_region_without_a_table(argv):
    env = {**NO_TABLE, "KUBECONFIG": "/nonexistent/kubeconfig"}
    code, out, err = run_cli([*argv, "--region", "us-west1"], env)
    assert err.startswith(NOTE.format("us-west1")) and "[--region]" not in err, err


def test_with_a_region_table_regions_are_mapped_and_an_unknown_one_refused(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {us-central1: gke-prod, europe-west4: dgx-eu}\n")
    env = {**NO_TABLE, "MLPLATFORM_CONFIG": str(settings)}
    code, out, err = run_cli(["jobs", "submit", "training", "j1", "--module-name", "m", "--packages", "gs://b/p.tgz",
                              "--region", "europe-west4", "--dry-run"], env)
    assert (code, err) == (0, "")  # mapped: no note
    code, out, err = run_cli(["jobs", "submit", "training", "j1", "--module-name", "m", "--packages", "gs://b/p.tgz",
                              "--region", "asia-east1", "--dry-run"], env)
    assert (code, out) == (2, "")
    assert err == ("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for [--region]: no cluster is "
                   "configured for region 'asia-east1' (regions: europe-west4, us-central1)\n")


# ---------------------------------------------------------------- did you mean

@pytest.mark.parametrize("argv, said", [
    (["jobs", "submit", "training", "j", "--modul-name", "t.task"], "--modul-name (did you mean '--module-name'?) t.task"),
    (["jobs", "submit", "training", "j", "--stream-log"], "--stream-log (did you mean '--stream-logs'?)"),
    (["jobs", "submit", "training", "j", "--regoin=us-central1"], "--regoin=us-central1 (did you mean '--region'?)"),
    (["jobs", "submit", "training", "j", "--master-machine", "n1-standard-4"],
     "--master-machine (did you mean '--master-machine-type'?) n1-standard-4"),
    (["jobs", "list", "--limt", "3"], "--limt (did you mean '--limit'?) 3"),
    (["jobs", "stream-logs", "j", "--task", "worker-1"], "--task (did you mean '--task-name'?) worker-1"),
    (["jobs", "describe", "j", "--summarise"], "--summarise (did you mean '--summarize'?)"),
    (["local", "train", "--module-name", "m", "--distribute"], "--distribute (did you mean '--distributed'?)"),
])
def test_an_unknown_flag_gets_a_did_you_mean_from_its_own_command(argv, said):
    code, out, err = run_cli(argv)
    assert (code, out) == (2, "")
    assert f"unrecognized arguments: {said}\n" in err and err.count("\n") == 1, err


def test_a_flag_close_to_nothing_gets_no_guess():
    code, out, err = run_cli(["jobs", "list", "--xyzzy"])
    assert err == "ERROR: (kubectl ai-platform.jobs.list) unrecognized arguments: --xyzzy\n"


@pytest.mark.parametrize("typed, meant", [("n1-standrd-8", "n1-standard-8"), ("n1-highmem-1", "n1-highmem-1"),
                                          ("n2-hihgmem-16", "n2-highmem-16"), ("complex_model_m_gpuu",
                                                                               "complex_model_m_gpu"),
                                          ("a2-highgpu-2", "a2-highgpu-2g")])
def test_a_misspelt_machine_type_gets_the_closest_name(typed, meant):
    code, out, err = run_cli(["jobs", "submit", "training", "j", "--module-name", "m", "--packages", "gs://b/p.tgz",
                              "--master-machine-type", typed, "--dry-run"])
    if typed == meant:
        assert code == 0, err
        return
    assert err == ("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for [--master-machine-type]: "
                   f"unknown machine type {typed!r}; did you mean {meant!r}?\n")


# ---------------------------------------------------------------- stream-logs records

def test_log_records_are_gclouds_shape():
    """gcloud's ``value(severity, timestamp.date("%Y-%m-%d %H:%M:%S %z", tz=LOCAL), task_name,
    trial_id, message)``: an offset (``+0000``), not ``Z``; whole seconds."""
    when = datetime.datetime(2026, 12, 4, 2, 48, 40, 123456, tzinfo=datetime.timezone.utc)
    assert output.log_record("master-replica-0", "epoch 1", when, "ERROR", tz=datetime.timezone.utc) == \
        "ERROR\t2026-12-04 02:48:40 +0000\tmaster-replica-0\t\tepoch 1"
    cet = datetime.timezone(datetime.timedelta(hours=1))
    assert output.log_record("worker-replica-1", "x", when, tz=cet) == \
        "INFO\t2026-12-04 03:48:40 +0100\tworker-replica-1\t\tx"


def test_a_line_the_trainer_wrote_to_stderr_is_error_as_cloud_logging_shows_it():
    stderr, stdout = LogLine(1, "master-replica-0", "Traceback"), LogLine(2, "master-replica-0", "loss=1")
    object.__setattr__(stderr, "stream", "stderr")
    object.__setattr__(stdout, "stream", "stdout")
    assert (severity_of(stderr), severity_of(stdout)) == ("ERROR", "INFO")
    assert severity_of(LogLine(3, "master-replica-0", "merged streams")) == "INFO"  # a runtime that cannot tell
    object.__setattr__(stdout, "severity", "WARNING")
    assert severity_of(stdout) == "WARNING"  # the runtime's own severity wins


def test_a_google_cloud_project_id_is_refused_naming_the_projects_the_user_may_use():
    """Scripts often pass ``--project my-gcp-project``: the refusal says which projects exist here."""
    import asyncio

    from hub_ext.core.errors import UserInputError
    from server_ext.service.jobs import JobService
    from tests.unit.test_job_kubeflow import PLAN_SETTINGS

    async def projects(user):
        return ["vision", "user-alice"]

    with pytest.raises(UserInputError) as e:
        asyncio.run(JobService(object(), PLAN_SETTINGS, projects).create("alice", "my-gcp-project", {}))
    assert (e.value.field, e.value.status) == ("project", 403)
    assert e.value.message == ("'alice' may not use project 'my-gcp-project' (the projects of this platform you "
                               "may use: user-alice, vision)")
