"""`kubectl ai-platform` as users run it: the installed ``kubectl-ai_platform`` console script in a
subprocess, against the real local backend (state in a temporary directory)."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.local

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE_TRAINER = ROOT / "examples" / "trainer" / "trainer"
SCRIPT = pathlib.Path(sys.executable).with_name("kubectl-ai_platform")


@pytest.fixture
def cli(tmp_path):
    """Run the plugin in `tmp_path` (which holds a ``trainer`` package) with its own state dir."""
    trainer = tmp_path / "trainer"
    trainer.mkdir()
    (trainer / "__init__.py").write_text("")
    (trainer / "task.py").write_text("import sys\nprint('hello from', sys.argv[1:], flush=True)\n")
    (trainer / "fail.py").write_text("import sys\nprint('about to fail', flush=True)\nsys.exit(3)\n")
    (trainer / "slow.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLPLATFORM_")}
    env.update(MLPLATFORM_STATE_DIR=str(tmp_path / "state"), JUPYTERHUB_USER="alice", PYTHONPATH=str(ROOT))
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "server_ext.cli.main"]

    def run(*argv: str, timeout: float = 120, **more_env: str) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *argv], cwd=tmp_path, env={**env, **more_env}, capture_output=True,
                              text=True, timeout=timeout)
    yield run
    shutil.rmtree(tmp_path / "state", ignore_errors=True)


def test_local_train_runs_in_the_foreground_and_exits_with_the_result(cli, tmp_path):
    done = cli("local", "train", "--module-name", "trainer.task", "--package-path", "trainer", "--", "--steps", "2")
    assert done.returncode == 0, done.stderr
    assert "hello from ['--steps', '2']" in done.stdout
    failed = cli("local", "train", "--module-name", "trainer.fail", "--package-path", "trainer")
    assert failed.returncode == 1
    assert "about to fail" in failed.stdout
    assert failed.stderr.splitlines()[-1].startswith("ERROR: (kubectl ai-platform.local.train) job local_train_")
    runs = sorted(p.name for p in (tmp_path / "state" / "local-train").iterdir())  # a fresh runtime per run
    assert len(runs) == 2 and all(r.startswith("local_train_") for r in runs), runs
    assert f"local_train_{failed.stderr.split('job local_train_')[1].split()[0]}" in runs
    assert not (tmp_path / "state" / "jobs.sqlite").exists()  # the shared state dir was not used
    listed = cli("jobs", "list", "--local")
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "", "Listed 0 items.\n")  # as gcloud's


def test_submit_stream_list_describe_cancel(cli):
    """``--package-path`` is built into an sdist and shipped as on Kubernetes (configmap://), then
    installed by the local runtime; ``local train`` (above) runs its directory in place instead."""
    done = cli("jobs", "submit", "training", "j1", "--local", "--package-path", str(EXAMPLE_TRAINER),
               "--module-name", "trainer.task", "--stream-logs", "--", "--epochs=2", "--sleep=0")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("Job [j1] submitted successfully.\nINFO\t")
    assert "\tmaster-replica-0\t\tInstalling mlplatform_example_trainer-0.1.0.tar.gz into " in done.stderr
    assert "\tmaster-replica-0\t\tepoch 2/2 loss=" in done.stderr and "\tmaster-replica-0\t\tdone: rmse=" in done.stderr
    assert done.stdout.startswith("endTime: '") and "jobId: j1\n" in done.stdout and done.stdout.endswith(
        "state: SUCCEEDED\n")

    failed = cli("jobs", "submit", "training", "j2", "--local", "--module-name", "trainer.fail",
                 "--packages", "trainer", "--stream-logs")  # a directory, run in place: no build
    assert failed.returncode == 1 and failed.stdout.endswith("state: FAILED\n")

    queued = cli("jobs", "submit", "training", "j3", "--local", "--module-name", "trainer.task",
                 "--packages", "trainer")
    assert queued.returncode == 0, queued.stderr
    assert queued.stdout == "jobId: j3\nstate: QUEUED\n"
    assert "  $ kubectl ai-platform jobs describe j3 --local\n" in queued.stderr  # a command that finds it
    assert "  $ kubectl ai-platform jobs stream-logs j3 --local\n" in queued.stderr
    logs = cli("jobs", "stream-logs", "j3", "--local")
    assert logs.returncode == 0 and "\tmaster-replica-0\t\thello from []" in logs.stdout

    listing = cli("jobs", "list", "--local", "--format", "value(jobId,state)", "--sort-by", "jobId")
    assert listing.stdout == "j1\tSUCCEEDED\nj2\tFAILED\nj3\tSUCCEEDED\n"
    described = cli("jobs", "describe", "j1", "--local")
    assert described.returncode == 0 and "jobId: j1\n" in described.stdout and "  - --epochs=2\n" in described.stdout
    assert "  - configmap://j1-package/mlplatform_example_trainer-0.1.0.tar.gz\n" in described.stdout
    ended = cli("jobs", "cancel", "j1", "--local")  # already ended: nothing to do, exit 0, as gcloud documents
    assert (ended.returncode, ended.stdout) == (0, "")
    assert ended.stderr == "Job [j1] has already ended (SUCCEEDED); there is nothing to cancel.\n"

    taken = cli("jobs", "submit", "training", "j1", "--local", "--module-name", "m", "--package-path", "trainer")
    assert taken.returncode == 1 and "ALREADY_EXISTS" in taken.stderr
    unbuildable = cli("jobs", "submit", "training", "j4", "--local", "--module-name", "m", "--package-path", "state")
    assert (unbuildable.returncode, unbuildable.stdout) == (2, "")
    assert unbuildable.stderr.startswith("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for "
                                         "[--package-path]: "), unbuildable.stderr
    missing = cli("jobs", "describe", "nope", "--local")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == ("ERROR: (kubectl ai-platform.jobs.describe) NOT_FOUND: Job projects/user-alice/jobs/nope"
                              " not found\n")


def test_usage_errors_help_and_bad_configs_need_no_backend(cli, tmp_path):
    bad = cli("jobs", "submit", "training", "j", "--module-name", "m", "--bogus")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == "ERROR: (kubectl ai-platform.jobs.submit.training) unrecognized arguments: --bogus\n"
    (tmp_path / "config.yaml").write_text("trainingInput:\n  masterType: n1-standard-4\n  workerCont: 2\n")
    config = cli("jobs", "submit", "training", "j", "--module-name", "m", "--package-path", "trainer",
                 "--config", "config.yaml", "--local")
    assert (config.returncode, config.stdout) == (2, "")
    assert "Invalid value for [trainingInput.workerCont in --config]: unknown field; did you mean 'workerCount'?" \
        in config.stderr
    helped = cli("jobs", "submit", "training", "--help")
    assert helped.returncode == 0 and "--master-accelerator" in helped.stdout
    assert not (tmp_path / "state").exists()  # nothing was created


def test_a_sweep_from_an_hptuning_config_streams_its_trials_and_summarizes(cli, tmp_path):
    (tmp_path / "hptuning_config.yaml").write_text(
        "trainingInput:\n  args: ['--epochs=2', '--sleep=0']\n  hyperparameters:\n    goal: MINIMIZE\n"
        "    hyperparameterMetricTag: rmse\n    maxTrials: 2\n    maxParallelTrials: 2\n    params:\n"
        "    - {parameterName: learning_rate, type: DISCRETE, discreteValues: [0.01, 0.1]}\n    algorithm: GRID_SEARCH\n")
    done = cli("jobs", "submit", "training", "sweep1", "--local", "--config", "hptuning_config.yaml",
               "--module-name", "trainer.task", "--packages", EXAMPLE_TRAINER.as_uri(), "--stream-logs")
    assert done.returncode == 0, done.stderr
    assert "trial-1" in done.stderr and "trial-2" in done.stderr and "epoch 2/2" in done.stderr
    summary = cli("jobs", "describe", "sweep1", "--local", "--summarize")
    assert summary.returncode == 0, summary.stderr
    assert "learning_rate=0.1" in summary.stdout and "learning_rate=0.01" in summary.stdout


def test_submit_mounts_the_projects_credentials_and_datasets_by_path(cli, tmp_path):
    """On the local runtime the project's files live under ``MLPLATFORM_PROJECTS_DIR``; the job
    gets their paths, never their content, and a name the project lacks is refused up front."""
    project = tmp_path / "projects" / "user-alice"
    (project / "credentials").mkdir(parents=True)
    key = project / "credentials" / "sa.json"
    key.write_text('{"private_key": "canary-value-never-shown"}')
    (project / "datasets" / "imagenet").mkdir(parents=True)
    (tmp_path / "trainer" / "env.py").write_text(
        "import os\nfor k in ('GOOGLE_APPLICATION_CREDENTIALS', 'MLPLATFORM_DATASETS'):\n"
        "    print(k, os.environ.get(k), flush=True)\n")
    args = ("--local", "--package-path", "trainer", "--module-name", "trainer.env", "--stream-logs")
    projects = str(tmp_path / "projects")
    done = cli("jobs", "submit", "training", "mounted", *args, "--credentials", "sa", "--datasets", "imagenet",
               MLPLATFORM_PROJECTS_DIR=projects)
    refused = cli("jobs", "submit", "training", "refused", *args, "--datasets", "coco", MLPLATFORM_PROJECTS_DIR=projects)
    assert done.returncode == 0, done.stderr
    assert f"GOOGLE_APPLICATION_CREDENTIALS {key}" in done.stderr
    assert f'MLPLATFORM_DATASETS {{"imagenet": "{project / "datasets" / "imagenet"}"}}' in done.stderr
    assert "canary-value-never-shown" not in done.stdout + done.stderr
    assert refused.returncode == 1 and "PERMISSION_DENIED" in refused.stderr and "no dataset 'coco'" in refused.stderr
    assert "NOT_FOUND" in cli("jobs", "describe", "refused", "--local").stderr  # nothing was created


def test_dry_run_builds_the_package_and_prints_its_configmap(cli, tmp_path):
    """``--dry-run --package-path`` builds the sdist as a submit does and shows what carries it."""
    import base64

    done = cli("jobs", "submit", "training", "j1", "--package-path", "trainer", "--module-name", "trainer.task",
               "-n", "team", "--dry-run")
    assert done.returncode == 0, done.stderr
    job, configmap = yaml.safe_load_all(done.stdout)
    assert job["kind"] == "TrainJob" and configmap["kind"] == "ConfigMap"
    assert (configmap["metadata"]["name"], configmap["metadata"]["namespace"]) == ("j1-package", "team")
    assert configmap["metadata"]["ownerReferences"] == [{"apiVersion": job["apiVersion"], "kind": "TrainJob",
                                                         "name": "j1"}]  # the uid comes with the created job
    (filename, data), = configmap["binaryData"].items()
    assert filename == "trainer-0.0.0.tar.gz" and base64.b64decode(data)[:2] == b"\x1f\x8b"
    assert f"configmap://j1-package/{filename}" in done.stdout  # the job fetches it from there
    assert done.stderr.startswith(f"note: {filename} (") and done.stderr.endswith(
        f"built from trainer, would ship as configmap://j1-package/{filename}\n")

    local = cli("jobs", "submit", "training", "j1", "--package-path", "trainer", "--module-name", "trainer.task",
                "--local", "--dry-run")
    assert local.returncode == 0, local.stderr
    assert yaml.safe_load(local.stdout)["trainingInput"]["packageUris"] == [f"configmap://j1-package/{filename}"]
    copy = tmp_path / "state" / "jobs" / "user-alice" / "j1" / "shipped" / filename
    assert "would ship as" not in local.stderr and local.stderr.endswith(
        f"built from trainer, would be kept as a copy in the job's directory, {copy} (the job's packageUris "
        f"names it configmap://j1-package/{filename}, as on Kubernetes)\n"), local.stderr
    assert not (tmp_path / "state").exists()


def test_dry_run_applies_the_package_size_rule(cli, tmp_path):
    (tmp_path / "trainer" / "weights.bin").write_bytes(os.urandom(1024 * 1024))  # incompressible: > 900 KiB
    argv = ("jobs", "submit", "training", "big", "--package-path", "trainer", "--module-name", "trainer.task",
            "--dry-run")
    refused = cli(*argv)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for "
                                     "[--package-path]: the package is "), refused.stderr
    assert refused.stderr.endswith("more than the 0.9 MB that can ship inside the cluster; set --staging-bucket\n")
    staged = cli(*argv, "--staging-bucket", "gs://my-bucket")
    assert staged.returncode == 0, staged.stderr
    assert [d["kind"] for d in yaml.safe_load_all(staged.stdout)] == ["TrainJob"]  # no ConfigMap
    assert "would be staged to gs://my-bucket/big/packages/" in staged.stderr
    assert "/trainer-0.0.0.tar.gz\n" in staged.stderr
    assert not (tmp_path / "state").exists()  # nothing was created


def test_dry_run_refuses_an_experiment_on_the_local_runtime_as_a_submit_does(cli, tmp_path):
    (tmp_path / "experiment.yaml").write_text(
        "apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nmetadata: {name: mnist-lr}\nspec: {}\n")
    argv = ("jobs", "submit", "training", "mnist_lr", "--config", "experiment.yaml", "--local")
    dry, real = cli(*argv, "--dry-run"), cli(*argv)
    assert (dry.returncode, dry.stdout) == (real.returncode, real.stdout) == (2, "")
    assert dry.stderr == real.stderr and "[kind]: a Katib Experiment needs the Kubernetes runtime" in dry.stderr


def test_a_missing_kubeconfig_shows_only_our_error(cli, tmp_path):
    done = cli("jobs", "list", "--context", "kind-dev", KUBECONFIG=str(tmp_path / "no-kubeconfig"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("ERROR: (kubectl ai-platform.jobs.list) Invalid value for [--context]: ")
    assert done.stderr.count("\n") == 1 and "Config not found" not in done.stderr, done.stderr


def test_commands_on_adopted_jobs_leave_no_coroutine_unawaited_and_cancel_settles(cli):
    """Each ``--local`` command outside a server runs the local runtime itself and adopts the jobs
    still running; one that awaits nothing of its own (describe, list) used to close the runtime
    before its supervising tasks had started ("coroutine 'LocalBackend._supervise' was never
    awaited"), and a cancel left the job CANCELLING with its process running. Warnings are errors here."""
    strict = {"PYTHONWARNINGS": "error"}
    started = cli("jobs", "submit", "training", "slow", "--local", "--module-name", "trainer.slow",
                  "--packages", "trainer", **strict)
    assert (started.returncode, started.stdout) == (0, "jobId: slow\nstate: QUEUED\n"), started.stderr
    assert "never awaited" not in started.stderr and "Exception ignored" not in started.stderr, started.stderr
    for argv in (("jobs", "describe", "slow"), ("jobs", "list"), ("jobs", "describe", "slow", "--summarize")):
        done = cli(*argv, "--local", **strict)
        assert (done.returncode, done.stderr) == (0, ""), (argv, done.stderr)
    assert "state: RUNNING\n" in cli("jobs", "describe", "slow", "--local").stdout
    cancelled = cli("jobs", "cancel", "slow", "--local", **strict)
    assert (cancelled.returncode, cancelled.stdout, cancelled.stderr) == (0, "", "")
    assert "state: CANCELLED\n" in cli("jobs", "describe", "slow", "--local").stdout  # not left CANCELLING
