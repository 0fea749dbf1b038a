"""`kubectl ai-platform` arguments: gcloud's flags → the ml.v1 Job document, config-file precedence,
and every bad input refused with exit 2 naming the flag (or the config field), nothing created."""

import io

import pytest
import yaml

from server_ext.cli import flags
from server_ext.cli.flags import local_train_job, parse_args, submission_of
from server_ext.cli.main import main

pytestmark = pytest.mark.unit

SUBMIT = ["jobs", "submit", "training"]
CODE = ["--module-name", "trainer.task", "--packages", "gs://b/trainer-0.1.tar.gz"]
BASE = {"pythonModule": "trainer.task", "packageUris": ["gs://b/trainer-0.1.tar.gz"]}
ENV = {"JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": "/nonexistent/kubectl-ai-platform.yaml"}  # the Kubernetes path


def job_of(argv, config=None):
    args = parse_args(SUBMIT + argv)
    sub = submission_of(args, read=lambda path: config)
    return sub.job, sub.package.path if sub.package else None


@pytest.mark.parametrize("argv, training, extra", [
    (["j1", *CODE], {**BASE, "scaleTier": "BASIC"}, {}),
    (["j1", *CODE, "--scale-tier", "basic-gpu"], {**BASE, "scaleTier": "BASIC_GPU"}, {}),
    (["j1", *CODE, "--scale-tier", "STANDARD_1"], {**BASE, "scaleTier": "STANDARD_1"}, {}),
    (["j1", *CODE, "--master-machine-type", "n1-standard-8",
      "--master-accelerator", "type=nvidia-tesla-a100,count=2"],
     {**BASE, "scaleTier": "CUSTOM", "masterType": "n1-standard-8",
      "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100", "count": "2"}}}, {}),
    (["j1", *CODE, "--scale-tier", "custom", "--master-machine-type", "n1-highmem-8",
      "--worker-machine-type", "n1-highmem-8", "--worker-count", "3",
      "--worker-accelerator", "count=1,type=nvidia-a100-1g.5gb",
      "--parameter-server-machine-type", "standard", "--parameter-server-count", "1"],
     {**BASE, "scaleTier": "CUSTOM", "masterType": "n1-highmem-8", "workerType": "n1-highmem-8",
      "workerCount": "3", "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": "1"}},
      "parameterServerType": "standard", "parameterServerCount": "1"}, {}),
    (["j1", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4", "--master-image-uri", "img:1",
      "--worker-image-uri", "img:2", "--parameter-server-image-uri", "img:3"],
     {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"imageUri": "img:1"},
      "workerConfig": {"imageUri": "img:2"}, "parameterServerConfig": {"imageUri": "img:3"}}, {}),
    (["j1", *CODE, "--region", "europe-west4", "--job-dir", "gs://b/out", "--runtime-version", "2.11",
      "--python-version", "3.7", "--service-account", "sa@p.iam.gserviceaccount.com", "--network", "projects/1/n",
      "--enable-web-access", "--use-chief-in-tf-config", "false"],
     {**BASE, "scaleTier": "BASIC", "region": "europe-west4", "jobDir": "gs://b/out", "runtimeVersion": "2.11",
      "pythonVersion": "3.7", "serviceAccount": "sa@p.iam.gserviceaccount.com", "network": "projects/1/n",
      "enableWebAccess": True, "useChiefInTfConfig": False}, {}),
    (["j1", "--module-name", "m", "--packages", "gs://b/a.tgz,gs://b/b.whl", "--labels", "team=vision,env=",
      "--", "--epochs", "3", "--lr=0.1"],
     {"pythonModule": "m", "packageUris": ["gs://b/a.tgz", "gs://b/b.whl"], "scaleTier": "BASIC",
      "args": ["--epochs", "3", "--lr=0.1"]}, {"labels": {"team": "vision", "env": ""}}),
    (["j1", *CODE, "--kms-key", "projects/p/locations/l/keyRings/r/cryptoKeys/k"],
     {**BASE, "scaleTier": "BASIC", "encryptionConfig": {"kmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"}},
     {}),
    (["j1", *CODE, "--kms-key", "k", "--kms-keyring", "r", "--kms-location", "l", "--kms-project", "p"],
     {**BASE, "scaleTier": "BASIC", "encryptionConfig": {"kmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"}},
     {}),
])
def test_flags_become_the_job(argv, training, extra):
    assert job_of(argv) == ({"jobId": "j1", "trainingInput": training, **extra}, None)


def test_package_path_is_returned_for_the_caller_and_satisfies_package_uris():
    job, package = job_of(["j1", "--module-name", "trainer.task", "--package-path", "trainer"])
    assert package == "trainer"
    assert job == {"jobId": "j1", "trainingInput": {"pythonModule": "trainer.task", "scaleTier": "BASIC"}}
    job, _ = job_of(["j1", "--module-name", "t", "--package-path", "trainer", "--packages", "gs://b/dep.whl"])
    assert job["trainingInput"]["packageUris"] == ["gs://b/dep.whl"]


CONFIG = """\
jobId: from_config
labels: {team: nlp, owner: bob}
trainingInput:
  scaleTier: CUSTOM
  masterType: n1-standard-4
  masterConfig:
    acceleratorConfig: {type: NVIDIA_TESLA_A100, count: 1}
    imageUri: ignored:1
  workerType: n1-standard-4
  workerCount: 2
  pythonModule: config.task
  packageUris: [gs://b/config.tgz]
  args: [--from-config]
  region: us-central1
  runtimeVersion: "2.8"
"""


@pytest.mark.parametrize("argv, changes", [
    ([], {}),
    (["--module-name", "flag.task"], {"pythonModule": "flag.task"}),
    (["--packages", "gs://b/flag.tgz"], {"packageUris": ["gs://b/flag.tgz"]}),
    (["--region", "europe-west4", "--runtime-version", "2.11"], {"region": "europe-west4", "runtimeVersion": "2.11"}),
    (["--master-machine-type", "n1-highmem-8"], {"masterType": "n1-highmem-8"}),
    (["--master-accelerator", "type=nvidia-a100-3g.20gb,count=2"],
     {"masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_3G_20GB", "count": "2"}, "imageUri": "ignored:1"}}),
    (["--worker-machine-type", "n1-highmem-2", "--worker-count", "5"], {"workerType": "n1-highmem-2", "workerCount": "5"}),
    (["--", "--from-flags"], {"args": ["--from-flags"]}),
])
def test_flags_override_the_config_file(argv, changes):
    job, _ = job_of(["j2", "--config", "c.yaml", *argv], CONFIG)
    base = yaml.safe_load(CONFIG)["trainingInput"]
    expected = {**base, "workerCount": "2", "runtimeVersion": "2.8", **changes}
    expected["masterConfig"] = changes.get("masterConfig", {"acceleratorConfig": {"type": "NVIDIA_TESLA_A100",
                                                                                  "count": "1"},
                                                            "imageUri": "ignored:1"})
    assert job == {"jobId": "j2", "labels": {"team": "nlp", "owner": "bob"}, "trainingInput": expected}


def test_labels_flag_replaces_the_config_labels_and_json_configs_work():
    job, _ = job_of(["j2", "--config", "c.json", "--labels", "env=prod"],
                    '{"trainingInput": {"pythonModule": "m", "packageUris": ["gs://b/x"]}, "labels": {"a": "b"}}')
    assert job == {"jobId": "j2", "labels": {"env": "prod"},
                   "trainingInput": {"pythonModule": "m", "packageUris": ["gs://b/x"], "scaleTier": "BASIC"}}


def test_a_tier_is_inferred_only_when_none_is_given_anywhere():
    job, _ = job_of(["j", *CODE, "--worker-machine-type", "standard", "--worker-count", "1",
                     "--master-machine-type", "standard"])
    assert job["trainingInput"]["scaleTier"] == "CUSTOM"
    job, _ = job_of(["j", "--config", "c", "--master-accelerator", "type=nvidia-tesla-a100,count=1"],
                    "trainingInput: {scaleTier: basic_gpu, pythonModule: m, packageUris: [gs://b/x]}")
    assert job["trainingInput"]["scaleTier"] == "BASIC_GPU"


def test_local_train_job():
    args = parse_args(["local", "train", "--module-name", "trainer.task", "--package-path", "trainer",
                       "--job-dir", "/tmp/out", "--distributed", "--worker-count", "3", "--", "--steps", "5"])
    assert local_train_job(args, "local_train_1", "/home/alice/proj") == {
        "jobId": "local_train_1",
        "trainingInput": {"pythonModule": "trainer.task", "packageUris": ["file:///home/alice/proj/trainer"],
                          "args": ["--steps", "5"], "jobDir": "/tmp/out", "scaleTier": "CUSTOM",
                          "masterType": "standard", "workerType": "standard", "workerCount": "3",
                          "parameterServerType": "standard", "parameterServerCount": "2"}}
    plain = parse_args(["local", "train", "--module-name", "m"])
    assert local_train_job(plain, "local_train_2", "/w") == {
        "jobId": "local_train_2", "trainingInput": {"pythonModule": "m", "packageUris": ["file:///w"],
                                                    "scaleTier": "BASIC"}}


def test_platform_flags_go_anywhere_and_default_sensibly():
    args = parse_args(["-n", "team", "jobs", "list", "--context", "kind-dev"])
    assert (args.project, args.context, args.local) == ("team", "kind-dev", False)
    args = parse_args(["jobs", "describe", "j", "--project", "p2", "--local"])
    assert (args.project, args.context, args.local, args.job) == ("p2", None, True, "j")
    args = parse_args(SUBMIT + ["j", *CODE, "--credentials", "gcp-key", "--datasets", "a,b"])
    assert flags.submission_of(args).mounts.to_rest() == {"credentials": ["gcp-key"], "datasets": ["a", "b"]}


def run_cli(argv, env=ENV):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err, env=env)
    return code, out.getvalue(), err.getvalue()


BAD = [
    (["j", *CODE, "--bogus"], "unrecognized arguments: --bogus"),
    (["j", *CODE, "--scale-tier", "huge"], "argument --scale-tier: Invalid choice: 'huge'"),
    (["j", *CODE, "--master-accelerator", "type=nvidia-tesla-a100"],
     "argument --master-accelerator: Key [count] required"),
    (["j", *CODE, "--master-accelerator", "type=nvidia-tesla-a100,count=0"],
     "argument --master-accelerator: The count of the accelerator must be greater than 0."),
    (["j", *CODE, "--worker-accelerator", "type=a,count=1,size=2"], "argument --worker-accelerator: valid keys"),
    (["j", *CODE, "--worker-count", "2"], "[--worker-machine-type]: must be specified with --worker-count"),
    (["j", *CODE, "--parameter-server-machine-type", "standard"], "[--parameter-server-count]"),
    (["j", *CODE, "--worker-count", "0", "--worker-machine-type", "x"], "argument --worker-count: Value must be"),
    (["j", *CODE, "--labels", "Team=a"], "[--labels]: keys must start with a lower-case letter"),
    (["j", *CODE, "--labels", "team"], "argument --labels: Bad syntax"),
    (["1job", *CODE], "[JOB]: must start with a letter"),
    (["j", "--packages", "gs://b/x"], "[--module-name]: is required"),
    (["j", "--module-name", "m"], "[--packages]: is required with pythonModule (or use --package-path)"),
    (["j", *CODE, "--master-image-uri", "img", "--runtime-version", "2.11"],
     "[--master-image-uri]: Only one of --master-image-uri, --runtime-version can be set."),
    (["j", *CODE, "--scale-tier", "basic", "--master-machine-type", "n1-standard-4"],
     "[--master-machine-type]: needs scaleTier CUSTOM (the job has BASIC)"),
    (["j", *CODE, "--scale-tier", "custom"], "[--master-machine-type]: is required with scaleTier CUSTOM"),
    (["j", *CODE, "--scale-tier", "basic-tpu"], "[--scale-tier]: TPU tiers are not offered"),
    (["j", *CODE, "--master-accelerator", "type=tpu-v3,count=8"], "[--master-accelerator]: TPUs are not offered"),
    (["j", *CODE, "--kms-key", "k"], "[--kms-key]: Encryption key not fully specified."),
    (["j", *CODE, "--staging-bucket", "bucket"], "argument --staging-bucket: expected a bucket"),
    (["j", *CODE, "--use-chief-in-tf-config", "maybe"], "argument --use-chief-in-tf-config: Invalid flag value"),
    (["j", *CODE, "--async", "--stream-logs"], "argument --stream-logs: not allowed with argument --async"),
    (["j", *CODE, "--config", "/nonexistent/c.yaml"], "[--config]: cannot read /nonexistent/c.yaml"),
    (["j", *CODE, "--master-machine-type", "n1-standrd-8", "--dry-run"],
     "[--master-machine-type]: unknown machine type 'n1-standrd-8'"),
    (["j", *CODE, "--master-accelerator", "type=nvidia-tesla-v100,count=1", "--dry-run"],
     "[--master-accelerator]: no NVIDIA_TESLA_V100 on this platform"),
    (["j", *CODE, "--runtime-version", "1.15", "--dry-run"], "[--runtime-version]: no runtime '1.15' here"),
]


@pytest.mark.parametrize("argv, message", BAD)
def test_bad_submit_input_exits_2_naming_the_flag(argv, message):
    code, out, err = run_cli(SUBMIT + argv)
    assert (code, out) == (2, "")
    assert err.startswith("ERROR: (kubectl ai-platform.jobs.submit.training) ") and err.count("\n") == 1
    assert message in err


@pytest.mark.parametrize("config, message", [
    ("trainingInput: [1", "[--config]: is not valid YAML or JSON at line 1"),
    ("- a list", "[--config]: must be a mapping with trainingInput: at the top"),
    ("trainingInput: {masterTyp: x}", "[trainingInput.masterTyp in --config]: unknown field; did you mean 'masterType'?"),
    ("state: RUNNING\ntrainingInput: {}", "[state in --config]: is output only"),
    ("trainingInput: {workerCount: many}", "[trainingInput.workerCount in --config]: must be a whole number"),
])
def test_bad_config_files_exit_2_naming_the_field(tmp_path, config, message):
    path = tmp_path / "config.yaml"
    path.write_text(config)
    code, out, err = run_cli(SUBMIT + ["j", *CODE, "--config", str(path)])
    assert (code, out) == (2, "")
    assert message in err, err


@pytest.mark.parametrize("argv, message", [
    (["jobs"], "ERROR: (kubectl ai-platform.jobs) the following arguments are required: COMMAND"),
    (["jobs", "list", "--limit", "0"], "ERROR: (kubectl ai-platform.jobs.list) argument --limit: Value must be"),
    (["jobs", "list", "--format", "csv"], "ERROR: (kubectl ai-platform.jobs.list) Invalid value for [--format]"),
    (["jobs", "describe"], "ERROR: (kubectl ai-platform.jobs.describe) the following arguments are required: JOB"),
    (["jobs", "describe", "j", "--", "x"], "ERROR: (kubectl ai-platform.jobs.describe) unrecognized arguments: -- x"),
    (["jobs", "stream-logs", "j", "--polling-interval", "0"], "argument --polling-interval"),
    (["jobs", "cancel", "j", "k"], "ERROR: (kubectl ai-platform.jobs.cancel) unrecognized arguments: k"),
    (["local", "train"], "ERROR: (kubectl ai-platform.local.train) the following arguments are required: --module-name"),
    (["local", "train", "--module-name", "m", "--worker-count", "-1"], "argument --worker-count"),
    (["jobs", "lst"], "ERROR: (kubectl ai-platform.jobs) argument COMMAND: invalid choice: 'lst'"),
])
def test_usage_errors_exit_2(argv, message):
    code, out, err = run_cli(argv)
    assert (code, out) == (2, "")
    assert message in err, err


def test_dry_run_prints_only_yaml_documents_without_a_cluster():
    code, out, err = run_cli(SUBMIT + ["j1", *CODE,
                                       "--master-machine-type", "n1-standard-8", "--worker-machine-type",
                                       "n1-standard-8", "--worker-count", "1",
                                       "--master-accelerator", "type=nvidia-a100-1g.5gb,count=1", "-n", "team",
                                       "--dry-run", "--", "--epochs", "3"])
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [("TFJob", "j1", "team")]
    chief = docs[0]["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]
    assert chief["resources"]["limits"]["nvidia.com/mig-1g.5gb"] == "1"
    assert err == ""


def test_dry_run_on_trainer_v2_prints_the_trainjob(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    argv = SUBMIT + ["ddp", *CODE, "--runtime-version", "pytorch-2.5", "--scale-tier", "custom",
                     "--master-machine-type", "n1-standard-8", "--worker-machine-type", "n1-standard-8",
                     "--worker-count", "2", "-n", "team", "--dry-run"]
    code, out, err = run_cli(argv)  # the default, training_api auto: v2 first
    assert (code, err) == (0, "")
    (doc,) = yaml.safe_load_all(out)
    assert (doc["kind"], doc["spec"]["runtimeRef"]["name"], doc["spec"]["trainer"]["numNodes"]) == (
        "TrainJob", "mlplatform-torch", 3)
    settings.write_text("jobs: {training_api: v1}\n")
    code, out, err = run_cli(argv, {**ENV, "MLPLATFORM_CONFIG": str(settings)})
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["PyTorchJob"], err


def test_dry_run_with_local_prints_the_job():
    code, out, err = run_cli(SUBMIT + ["j1", *CODE, "--labels", "team=a", "--dry-run", "--local"])
    assert (code, err) == (0, "")
    assert out == ("jobId: j1\nlabels:\n  team: a\ntrainingInput:\n  packageUris:\n  - gs://b/trainer-0.1.tar.gz\n"
                   "  pythonModule: trainer.task\n  scaleTier: BASIC\n")


def test_a_region_the_region_table_lacks_is_refused_before_connecting(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {europe-west4: kind-eu}\n")
    code, out, err = run_cli(["jobs", "submit", "training", "j1", "--module-name", "m", "--packages", "gs://b/p.tgz",
                              "--region", "us-central1"], {**ENV, "MLPLATFORM_CONFIG": str(settings)})
    assert (code, out) == (2, "")
    assert err == ("ERROR: (kubectl ai-platform.jobs.submit.training) Invalid value for [--region]: no cluster is "
                   "configured for region 'us-central1' (regions: europe-west4)\n")


def test_help_exits_0(capsys):
    assert main(["jobs", "submit", "training", "--help"], env=ENV) == 0
    text = capsys.readouterr().out
    for flag in ("--master-accelerator", "--scale-tier", "--stream-logs", "--package-path", "--kms-key",
                 "--credentials", "--dry-run", "--project"):
        assert flag in text


HPTUNING = """\
trainingInput:
  hyperparameters:
    goal: MINIMIZE
    hyperparameterMetricTag: rmse
    maxTrials: 4
    maxParallelTrials: 2
    params:
    - parameterName: learning_rate
      type: DOUBLE
      minValue: 0.001
      maxValue: 0.5
      scaleType: UNIT_LOG_SCALE
"""

EXPERIMENT = """\
apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: mnist-lr}
spec:
  objective: {type: minimize, objectiveMetricName: loss}
  algorithm: {algorithmName: random}
  maxTrialCount: 4
  parallelTrialCount: 2
  parameters:
  - {name: lr, parameterType: double, feasibleSpace: {min: "0.01", max: "0.1"}}
  trialTemplate:
    primaryContainerName: trainer
    trialParameters: [{name: lr, reference: lr}]
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - {name: trainer, image: python:3.11-slim, command: [python, -m, trainer.task, "--lr=${trialParameters.lr}"]}
"""


def test_dry_run_of_a_sweep_prints_the_katib_experiment(tmp_path):
    config = tmp_path / "hptuning_config.yaml"
    config.write_text(HPTUNING)
    code, out, err = run_cli(SUBMIT + ["sweep1", *CODE, "--config", str(config), "--dry-run", "-n", "team"])
    assert code == 0, err
    (doc,) = yaml.safe_load_all(out)
    assert (doc["kind"], doc["metadata"]["name"], doc["spec"]["maxTrialCount"], doc["spec"]["parallelTrialCount"]) == \
        ("Experiment", "sweep1", 4, 2)
    assert (doc["spec"]["objective"]["type"], doc["spec"]["objective"]["objectiveMetricName"]) == ("minimize", "rmse")


def test_a_native_experiment_config_is_taken_as_it_is(tmp_path):
    config = tmp_path / "experiment.yaml"
    config.write_text(EXPERIMENT)
    code, out, err = run_cli(SUBMIT + ["mnist_lr", "--config", str(config), "--dry-run", "-n", "team"])
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["spec"] == yaml.safe_load(EXPERIMENT)["spec"]
    assert doc["metadata"]["namespace"] == "team" and doc["metadata"]["annotations"]["mlplatform.io/job-id"] == "mnist_lr"
    code, out, err = run_cli(SUBMIT + ["Other_Name", "--config", str(config), "--dry-run"])
    assert code == 2 and "[JOB]: names the Katib Experiment ('Other-Name'), so it must be lower-case" in err
    code, out, err = run_cli(SUBMIT + ["mnist_lr", "--config", str(config), "--scale-tier", "basic", "--dry-run"])
    assert code == 2 and "[--scale-tier]" in err and "Katib Experiment" in err
