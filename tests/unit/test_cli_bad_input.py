"""`kubectl ai-platform` against bad input found by an audit: each refused with exit 2 and one
gcloud-shaped ERROR line naming the flag or field, before anything is contacted or created; and
``--dry-run`` refusing what the real command refuses."""

import io
import json

import pytest
import yaml

from hub_ext.core.errors import UserInputError
from server_ext.cli.flags import parse_args
from server_ext.cli.main import main
from server_ext.jobs.model import MAX_ACCELERATORS, MAX_REPLICAS, parse_job
from server_ext.service.jobs import LOCAL_EXPERIMENT
from tests.unit.test_cli_flags import EXPERIMENT

pytestmark = pytest.mark.unit

SUBMIT = ["jobs", "submit", "training"]
CODE = ["--module-name", "trainer.task", "--packages", "gs://b/trainer-0.1.tar.gz"]
ENV = {"JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": "/nonexistent/kubectl-ai-platform.yaml"}
PREFIX = "ERROR: (kubectl ai-platform.jobs.submit.training) "


def run_cli(argv, env=ENV):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, env=env)
    return code, out.getvalue(), err.getvalue()


def refused(argv, env=ENV, prefix=PREFIX) -> str:
    """The one ERROR line of a command that must exit 2 with nothing on stdout."""
    code, out, err = run_cli(argv, env)
    assert (code, out) == (2, ""), err
    assert err.startswith(prefix) and err.count("\n") == 1, err
    return err


def test_a_config_file_that_is_not_utf8_names_config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"trainingInput:\n  scaleTier: \xff\xfe\n")
    err = refused(SUBMIT + ["j", *CODE, "--config", str(path), "--dry-run"])
    assert err == f"{PREFIX}Invalid value for [--config]: cannot read {path}: it is not UTF-8 text (byte 28)\n"


@pytest.mark.parametrize("packages, field", [
    ("ftp://b/p.tar.gz", "trainingInput.packageUris[0]"),
    ("gs://b/a.tar.gz,http://b/p.tar.gz", "trainingInput.packageUris[1]"),
    ("gs://b/", "trainingInput.packageUris[0]"),
])
def test_package_uris_are_checked_at_submit(packages, field):
    err = refused(SUBMIT + ["j", "--module-name", "m", "--packages", packages, "--dry-run"])
    assert err.startswith(f"{PREFIX}Invalid value for [--packages]: {field}: "), err


def test_package_uris_of_a_config_file_are_named_in_it(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("trainingInput:\n  pythonModule: m\n  packageUris: [gs://b/a.tgz, 'ftp://b/p.tar.gz']\n")
    err = refused(SUBMIT + ["j", "--config", str(path), "--dry-run"])
    assert "Invalid value for [trainingInput.packageUris[1] in --config]: ftp://b/p.tar.gz: unsupported scheme" in err


def test_package_uris_are_checked_by_the_job_model_for_rest_too():
    doc = {"jobId": "j", "trainingInput": {"pythonModule": "m", "packageUris": ["gs://b/a.tgz", "ftp://b/p.tgz"]}}
    with pytest.raises(UserInputError) as e:
        parse_job(doc)
    assert (e.value.field, e.value.status) == ("trainingInput.packageUris[1]", 400)


CUSTOM = ["--master-machine-type", "n1-standard-8"]


@pytest.mark.parametrize("argv, message", [
    ([*CUSTOM, "--worker-machine-type", "n1-standard-8", "--worker-count", "99999999999999999999999"],
     "argument --worker-count: Value must be less than or equal to 2147483647"),
    ([*CUSTOM, "--parameter-server-machine-type", "standard", "--parameter-server-count", "2147483648"],
     "argument --parameter-server-count: Value must be less than or equal to 2147483647"),
    ([*CUSTOM, "--master-accelerator", "type=nvidia-tesla-a100,count=99999999999"],
     f"Invalid value for [--master-accelerator]: must be at most {MAX_ACCELERATORS} per replica"),
    ([*CUSTOM, "--worker-machine-type", "n1-standard-8", "--worker-count", "1",
      "--worker-accelerator", f"type=nvidia-tesla-a100,count={MAX_ACCELERATORS + 1}"],
     f"Invalid value for [--worker-accelerator]: must be at most {MAX_ACCELERATORS} per replica"),
])
def test_counts_are_bounded_naming_the_flag(argv, message):
    assert message in refused(SUBMIT + ["j", *CODE, *argv, "--dry-run"])


@pytest.mark.parametrize("config, message", [
    ("trainingInput: {scaleTier: CUSTOM, masterType: n1-standard-8, workerType: n1-standard-8, "
     "workerCount: 99999999999999999999999}", "[trainingInput.workerCount in --config]: must be a whole number from"),
    ("trainingInput: {scaleTier: CUSTOM, masterType: n1-standard-8, workerType: n1-standard-8, "
     "workerCount: 2147483648}", f"[trainingInput.workerCount in --config]: must be at most {MAX_REPLICAS}"),
    ("trainingInput: {masterConfig: {acceleratorConfig: {type: NVIDIA_TESLA_A100, count: 99999999999}}, "
     "masterType: n1-standard-8}",
     "[trainingInput.masterConfig.acceleratorConfig.count in --config]: must be at most 64 per replica"),
    ("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    hyperparameterMetricTag: auc\n    params:\n"
     "    - {parameterName: lr, type: DOUBLE, minValue: .nan, maxValue: 1}\n",
     "[trainingInput.hyperparameters.params[0].minValue in --config]: must be a finite number"),
    ("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    hyperparameterMetricTag: auc\n    params:\n"
     "    - {parameterName: lr, type: DOUBLE, minValue: 0, maxValue: .inf}\n",
     "[trainingInput.hyperparameters.params[0].maxValue in --config]: must be a finite number"),
    ("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    hyperparameterMetricTag: auc\n    params:\n"
     "    - {parameterName: lr, type: DOUBLE, maxValue: 1}\n",
     "[trainingInput.hyperparameters.params[0].minValue in --config]: is required for a DOUBLE parameter"),
    ("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    hyperparameterMetricTag: auc\n"
     "    maxTrials: 3000000000\n    params:\n    - {parameterName: lr, type: DOUBLE, minValue: 0, maxValue: 1}\n",
     "[trainingInput.hyperparameters.maxTrials in --config]: must be a whole number from"),
])
def test_numbers_of_a_config_file_are_range_checked_naming_the_field(tmp_path, config, message):
    path = tmp_path / "config.yaml"
    path.write_text(config)
    assert message in refused(SUBMIT + ["j", *CODE, "--config", str(path), "--dry-run"])


def test_rest_json_nan_and_infinity_are_refused():
    """Python's JSON reader (the REST handler's) lets NaN and Infinity through; the model does not."""
    for bound in ("NaN", "Infinity", "-Infinity"):
        doc = json.loads('{"jobId": "j", "trainingInput": {"pythonModule": "m", "packageUris": ["gs://b/p.tgz"], '
                         '"hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "params": '
                         f'[{{"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": {bound}}}]}}}}}}')
        with pytest.raises(UserInputError) as e:
            parse_job(doc)
        assert (e.value.field, e.value.status) == ("trainingInput.hyperparameters.params[0].maxValue", 400)


def test_dry_run_resolves_the_region_as_the_real_command_does(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {europe-west4: kind-eu, us-east1: kind-us}\n")
    err = refused(SUBMIT + ["j", *CODE, "--region", "unknown-region", "--dry-run"],
                  {**ENV, "MLPLATFORM_CONFIG": str(settings)})
    assert err == (f"{PREFIX}Invalid value for [--region]: no cluster is configured for region 'unknown-region' "
                   "(regions: europe-west4, us-east1)\n")


def test_dry_run_accepts_a_configured_region(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {europe-west4: kind-eu}\n")
    code, out, err = run_cli(SUBMIT + ["j", *CODE, "--region", "europe-west4", "--dry-run"],
                             {**ENV, "MLPLATFORM_CONFIG": str(settings)})
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["TrainJob"]  # training_api auto: v2 first




def test_dry_run_refuses_a_native_experiment_on_the_local_runtime(tmp_path):
    config = tmp_path / "experiment.yaml"
    config.write_text(EXPERIMENT)
    err = refused(SUBMIT + ["mnist_lr", "--config", str(config), "--local", "--dry-run"])
    assert err == f"{PREFIX}Invalid value for [kind]: {LOCAL_EXPERIMENT}\n"
    err = refused(SUBMIT + ["mnist_lr", "--config", str(config), "--dry-run"], {**ENV, "MLPLATFORM_LOCAL": "1"})
    assert LOCAL_EXPERIMENT in err


@pytest.mark.parametrize("argv", [
    ["jobs", "list"], ["jobs", "describe", "j"], ["jobs", "get", "j"], ["jobs", "stream-logs", "j"],
    ["jobs", "cancel", "j"],
])
def test_every_jobs_command_takes_region(argv, tmp_path):
    assert parse_args([*argv, "--region", "europe-west4"]).region == "europe-west4"
    assert parse_args(argv).region is None
    command = ".".join(["kubectl ai-platform", *argv[:2]])
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {europe-west4: kind-eu}\n")
    err = refused([*argv, "--region", "nowhere"], {**ENV, "MLPLATFORM_CONFIG": str(settings)},
                  prefix=f"ERROR: ({command}) ")
    assert "Invalid value for [--region]: no cluster is configured for region 'nowhere'" in err


def test_region_picks_the_context_of_the_region_table(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {europe-west4: kind-eu}\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\n"
                          "contexts: [{name: other, context: {cluster: c, user: u}}]\ncurrent-context: other\n")
    env = {**ENV, "MLPLATFORM_CONFIG": str(settings), "KUBECONFIG": str(kubeconfig)}
    err = refused(["jobs", "describe", "j", "--region", "europe-west4"], env,
                  prefix="ERROR: (kubectl ai-platform.jobs.describe) ")
    assert err.startswith("ERROR: (kubectl ai-platform.jobs.describe) Invalid value for [--context]: ") and \
        "kind-eu" in err, err


def test_describe_format_is_checked_before_connecting():
    env = {**ENV, "KUBECONFIG": "/nonexistent/kubeconfig"}  # connecting would fail with another error
    err = refused(["jobs", "describe", "nope", "--format", "xml"], env,
                  prefix="ERROR: (kubectl ai-platform.jobs.describe) ")
    assert err == "ERROR: (kubectl ai-platform.jobs.describe) Invalid value for [--format]: must be yaml or json, " \
                  "not 'xml'\n"


def test_package_path_is_checked_in_dry_run():
    err = refused(SUBMIT + ["j", "--module-name", "m", "--package-path", "/nonexistent", "--dry-run"])
    assert err == (f"{PREFIX}Invalid value for [--package-path]: /nonexistent is not a Python package directory "
                   "(it needs an __init__.py)\n")
