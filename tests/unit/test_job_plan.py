"""What a training job will run: `plan_job` decides shapes, accelerators, images, framework and code
once, from AI Platform's fields and the platform catalogue."""

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Credential, Dataset
from server_ext.jobs.machines import Machine, Machines
from server_ext.jobs.model import kubernetes_name, parse_job
from server_ext.jobs.plan import PlanSettings, Runtime, Runtimes, plan_job, task_name

pytestmark = pytest.mark.unit

CATALOG = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb": {"type": "mig", "profile": "3g.20gb"},
})
# old configs' K80/P100/V100 machines run on whole A100s here
ALIASES = {"NVIDIA_TESLA_K80": "a100", "NVIDIA_TESLA_P100": "a100", "NVIDIA_TESLA_V100": "a100"}
SETTINGS = PlanSettings(Machines(CATALOG, aliases=ALIASES))
MODULE = {"pythonModule": "trainer.task", "packageUris": ["gs://bucket/trainer-0.1.tar.gz"]}


def plan(training: dict, settings: PlanSettings = SETTINGS, job_id: str = "census_v2", **kw):
    return plan_job(parse_job({"jobId": job_id, "trainingInput": training}), settings, project="vision",
                    owner="alice@example.com", **kw)


def shapes(p) -> list[tuple]:
    return [(r.role, r.count, r.cpu, r.memory_gib, r.accelerator.name if r.accelerator else None, r.accelerator_count)
            for r in p.replicas]


@pytest.mark.parametrize("training, expected", [
    ({}, [("master", 1, 4, 15, None, 0)]),
    ({"scaleTier": "BASIC"}, [("master", 1, 4, 15, None, 0)]),
    ({"scaleTier": "BASIC_GPU"}, [("master", 1, 8, 30, "a100", 1)]),
    ({"scaleTier": "STANDARD_1"}, [("master", 1, 16, 14.4, None, 0), ("worker", 4, 4, 15, None, 0),
                                   ("ps", 1, 4, 15, None, 0)]),
    ({"scaleTier": "PREMIUM_1"}, [("master", 1, 32, 28.8, None, 0), ("worker", 19, 16, 14.4, None, 0),
                                  ("ps", 11, 16, 14.4, None, 0)]),
    ({"scaleTier": "CUSTOM", "masterType": "n1-highmem-8"}, [("master", 1, 8, 52, None, 0)]),
    ({"scaleTier": "CUSTOM", "masterType": "a2-highgpu-2g"}, [("master", 1, 24, 170, "a100", 2)]),
])
def test_scale_tiers_and_machine_types(training, expected):
    assert shapes(plan({**MODULE, **training})) == expected


@pytest.mark.parametrize("machine, accelerator, count", [
    ("standard_gpu", "a100", 1), ("complex_model_m_gpu", "a100", 4), ("complex_model_l_gpu", "a100", 8),
    ("standard_p100", "a100", 1), ("complex_model_m_p100", "a100", 4),
    ("standard_v100", "a100", 1), ("large_model_v100", "a100", 1), ("complex_model_l_v100", "a100", 8),
    ("standard", None, 0), ("large_model", None, 0),
])
def test_legacy_machine_names_bring_their_gpus(machine, accelerator, count):
    (master,) = plan({**MODULE, "scaleTier": "CUSTOM", "masterType": machine}).replicas
    assert (master.accelerator.name if master.accelerator else None, master.accelerator_count) == (accelerator,
                                                                                                   count)


@pytest.mark.parametrize("training", [{"scaleTier": "BASIC_GPU"}, {"scaleTier": "CUSTOM", "masterType": "standard_v100"}])
def test_a_legacy_gpu_the_platform_lacks_runs_on_its_first_whole_gpu_or_the_operators_choice(training):
    """AI Platform's users never named the K80 of BASIC_GPU: with no alias it becomes the
    catalogue's whole GPU (the shipped defaults, no table), or the operator's `legacy_gpu`."""
    (master,) = plan({**MODULE, **training}, PlanSettings(Machines(CATALOG))).replicas
    assert (master.accelerator.name, master.accelerator_count) == ("a100", 1)
    (master,) = plan({**MODULE, **training}, PlanSettings(Machines(CATALOG, legacy_gpu="3g.20gb"))).replicas
    assert master.accelerator.name == "3g.20gb"


def test_a_legacy_gpu_with_no_whole_gpu_to_stand_in_names_the_tier_or_machine_field():
    migs = {k: v for k, v in CATALOG.items() if v.type == "mig"}
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "BASIC_GPU"}, PlanSettings(Machines(migs)))
    assert e.value.field == "trainingInput.scaleTier" and "no whole GPU" in e.value.message
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "standard_gpu"},
             PlanSettings(Machines(CATALOG, legacy_gpu="h100")))
    assert e.value.field == "trainingInput.masterType" and "legacy_gpu" in e.value.message


def test_a_named_accelerator_the_platform_lacks_is_still_refused():
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "n1-standard-8",
              "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4"}}}, PlanSettings(Machines(CATALOG)))
    assert e.value.field == "trainingInput.masterConfig.acceleratorConfig.type"
    assert "no NVIDIA_TESLA_T4 on this platform" in e.value.message


@pytest.mark.parametrize("acc, name, count", [
    ({"type": "NVIDIA_A100_1G_5GB", "count": 2}, "1g.5gb", 2),
    ({"type": "nvidia-a100-3g-20gb"}, "3g.20gb", 1),
    ({"type": "NVIDIA_TESLA_A100", "count": 4}, "a100", 4),
    ({"type": "nvidia-tesla-v100", "count": 1}, "a100", 1),  # by alias
])
def test_accelerator_config_overrides_the_machine_gpus(acc, name, count):
    p = plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "standard_v100", "workerType": "n1-standard-8",
              "workerCount": 2, "workerConfig": {"acceleratorConfig": acc}})
    master, workers = p.replicas
    assert (master.accelerator.name, master.accelerator_count) == ("a100", 1)
    assert (workers.accelerator.name, workers.accelerator_count, workers.cpu) == (name, count, 8)


@pytest.mark.parametrize("acc, field, message", [
    ({"type": "NVIDIA_A100_2G_10GB"}, "trainingInput.workerConfig.acceleratorConfig.type",
     "no NVIDIA_A100_2G_10GB on this platform (offered: "),
    ({"type": "NVIDIA_L4"}, "trainingInput.workerConfig.acceleratorConfig.type", "no NVIDIA_L4"),
])
def test_unknown_accelerators_name_the_field(acc, field, message):
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard", "workerCount": 1,
              "workerConfig": {"acceleratorConfig": acc}})
    assert e.value.field == field and message in e.value.message


def test_an_unknown_machine_type_names_the_role_field():
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "standard", "evaluatorType": "n1-standrd-4",
              "evaluatorCount": 1})
    assert e.value.field == "trainingInput.evaluatorType" and "did you mean 'n1-standard-4'" in e.value.message


@pytest.mark.parametrize("training, version, python, image, framework", [
    ({}, "2.11", "3.7", "tensorflow/tensorflow:2.11.0", "tensorflow"),
    ({"runtimeVersion": "2.8", "pythonVersion": "3.7"}, "2.8", "3.7", "tensorflow/tensorflow:2.8.0", "tensorflow"),
    ({"runtimeVersion": "pytorch-2.5"}, "pytorch-2.5", "3.11", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
     "pytorch"),
])
def test_runtime_versions_pick_the_trainer_image(training, version, python, image, framework):
    p = plan({**MODULE, **training})
    assert (p.runtime_version, p.python_version, p.replicas[0].image, p.framework) == (version, python, image,
                                                                                        framework)


@pytest.mark.parametrize("training, field, message", [
    ({"runtimeVersion": "1.15"}, "trainingInput.runtimeVersion", "no runtime '1.15' here (offered: 2.1, "),
    ({"runtimeVersion": "2.11", "pythonVersion": "3.9"}, "trainingInput.pythonVersion",
     "runtime 2.11 has Python 3.7, not '3.9'"),
    ({"runtimeVersion": "pytorch-2.5", "pythonVersion": "2.7"}, "trainingInput.pythonVersion", "has Python 3.11"),
])
def test_runtime_table_errors_name_the_field(training, field, message):
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, **training})
    assert e.value.field == field and message in e.value.message, str(e.value)


def test_an_operator_runtime_table_replaces_the_default():
    settings = PlanSettings(SETTINGS.machines, Runtimes({"py311": {"3.11": Runtime("python:3.11-slim")}}, "py311"))
    p = plan(MODULE, settings)
    assert (p.runtime_version, p.framework, p.kind, p.replicas[0].image) == ("py311", None, "Job", "python:3.11-slim")


def test_a_custom_container_runs_its_own_entry_point():
    p = plan({"scaleTier": "CUSTOM", "masterConfig": {"imageUri": "ghcr.io/example/train:1",
                                                      "containerCommand": ["python", "-m", "train"],
                                                      "containerArgs": ["--epochs", "2"]}})
    (master,) = p.replicas
    assert (master.image, master.command, master.args) == ("ghcr.io/example/train:1", ("python", "-m", "train"),
                                                           ("--epochs", "2"))
    assert (p.framework, p.runtime_version, p.python_module, p.kind) == (None, None, None, "Job")
    assert (master.cpu, master.memory_gib) == (4, 15)  # no masterType: the BASIC shape


def test_custom_containers_on_several_replicas_get_tf_config_and_workers_need_an_image():
    image = {"imageUri": "ghcr.io/example/train:1"}
    p = plan({"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "masterConfig": image,
              "workerType": "n1-standard-8", "workerCount": 2, "workerConfig": image, "args": ["--lr=0.1"]})
    assert p.kind == "TFJob" and p.framework is None and p.args == ("--lr=0.1",)
    with pytest.raises(UserInputError) as e:
        plan({"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "masterConfig": image,
              "workerType": "n1-standard-8", "workerCount": 2})
    assert e.value.field == "trainingInput.workerConfig.imageUri"


def test_a_custom_container_with_a_runtime_version_takes_its_framework():
    p = plan({"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "runtimeVersion": "pytorch-2.5",
              "masterConfig": {"imageUri": "ghcr.io/example/torch:1"}, "workerType": "n1-standard-8",
              "workerCount": 1})
    assert p.kind == "PyTorchJob" and [r.image for r in p.replicas] == [
        "ghcr.io/example/torch:1", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"]


@pytest.mark.parametrize("extra", [
    {"parameterServerType": "standard", "parameterServerCount": 1},
    {"evaluatorType": "standard", "evaluatorCount": 1},
])
def test_pytorch_has_no_parameter_servers(extra):
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "runtimeVersion": "pytorch-2.5", "scaleTier": "CUSTOM", "masterType": "standard", **extra})
    assert e.value.field == "trainingInput.parameterServerCount" and "master and workers only" in e.value.message


@pytest.mark.parametrize("training, kind", [
    ({"runtimeVersion": "pytorch-2.5"}, "PyTorchJob"),
    ({"runtimeVersion": "pytorch-2.5", "scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard",
      "workerCount": 3}, "PyTorchJob"),
    ({"runtimeVersion": "2.11"}, "TFJob"),
    ({"scaleTier": "STANDARD_1"}, "TFJob"),
])
def test_kind_follows_the_framework(training, kind):
    assert plan({**MODULE, **training}).kind == kind


def test_args_job_dir_mounts_and_names():
    cred = Credential("training-sa", "gcp-credential", "/etc/mlplatform/credentials/training-sa/key.json")
    ds = Dataset("imagenet", "/datasets/imagenet")
    p = plan({**MODULE, "args": ["--epochs=3", "--lr", "0.01"], "jobDir": "gs://bucket/out"}, job_id="My_Job",
             credentials=(cred,), datasets=(ds,))
    assert p.args == ("--epochs=3", "--lr", "0.01", "--job-dir=gs://bucket/out")
    assert p.package_uris == ("gs://bucket/trainer-0.1.tar.gz",) and p.python_module == "trainer.task"
    assert (p.name, p.project, p.owner) == (kubernetes_name("My_Job"), "vision", "alice@example.com")
    assert (p.credentials, p.datasets) == ((cred,), (ds,))


def test_task_names_of_a_plan():
    p = plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard",
              "workerCount": 2, "parameterServerType": "standard", "parameterServerCount": 1})
    assert p.task_names() == ["master-replica-0", "worker-replica-0", "worker-replica-1",
                              "ps-replica-0"]
    assert p.replica("worker").count == 2 and p.replica("evaluator") is None and p.total_replicas == 4


@pytest.mark.parametrize("text, name", [
    ("master-replica-0", "master-replica-0"), ("chief-0", "master-replica-0"), ("Worker-Replica-1", "worker-replica-1"),
    ("worker-1", "worker-replica-1"), ("ps-0", "ps-replica-0"),
    ("parameter-server-0", "ps-replica-0"), ("evaluator-replica-03", "evaluator-replica-3"),
    (" worker-0 ", "worker-replica-0"),
])
def test_task_name_spellings(text, name):
    assert task_name(text) == name


@pytest.mark.parametrize("text", ["worker", "worker-replica-x", "launcher-0", "worker-1; rm -rf /", ""])
def test_task_names_that_are_not_tasks(text):
    with pytest.raises(UserInputError) as e:
        task_name(text)
    assert e.value.field == "task" and "master-replica-0" in e.value.message


@pytest.mark.parametrize("text", [
    "worker-" + "1" * 5000,  # int() refuses more than 4,300 digits: was a ValueError, not a refusal
    "worker-1234567", "worker-\u0661",  # ARABIC-INDIC DIGIT ONE matches \\d and int() reads it
    "trial-1/trial-2", "trial-1/ trial-2/master-0", "trial-1/" * 500 + "master-0",  # was a RecursionError
    "trial-" + "1" * 10, " " * 200 + "worker-" + "0" * 200,
])
def test_task_names_out_of_bounds_are_refused(text):
    with pytest.raises(UserInputError) as e:
        task_name(text)
    assert e.value.field == "task"


def test_task_names_at_the_bounds():
    assert task_name("worker-999999") == "worker-replica-999999"
    assert task_name("trial-999999999/worker-000001") == "trial-999999999/worker-replica-1"


def test_a_task_the_plan_lacks_lists_those_it_has():
    p = plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard", "workerCount": 1})
    assert task_name("worker-0", p) == "worker-replica-0"
    with pytest.raises(UserInputError) as e:
        task_name("worker-1", p)
    assert "it has master-replica-0, worker-replica-0" in e.value.message


def test_an_operator_machine_table_can_bring_mig_slices():
    machines = Machines(CATALOG, extra={"dgx-1g": Machine(4, 16, "NVIDIA_A100_1G_5GB", 1)})
    (master,) = plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "dgx-1g"}, PlanSettings(machines)).replicas
    assert (master.accelerator.resource, master.accelerator_count) == ("nvidia.com/mig-1g.5gb", 1)


@pytest.mark.parametrize("training, field", [
    ({"masterType": "a2-highgpu-1g"}, "trainingInput.masterType"),  # names an A100: no stand-in
    ({"masterType": "dgx-slice"}, "trainingInput.masterType"),  # the operator's machine names its slice
])
def test_only_legacy_machine_names_get_a_stand_in_gpu(training, field):
    h100_only = parse_accelerators({"h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"}})
    machines = Machines(h100_only, extra={"dgx-slice": Machine(4, 16, "NVIDIA_A100_1G_10GB", 1)})
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "CUSTOM", **training}, PlanSettings(machines))
    assert e.value.field == field and "on this platform" in e.value.message
    assert plan({**MODULE, "scaleTier": "BASIC_GPU"}, PlanSettings(machines)).replicas[0].accelerator.name == "h100"


@pytest.mark.parametrize("training, limits, message", [
    ({"masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB", "count": 3}}}, {"1g.5gb": 2},
     "may use at most 2 at once of"),
    ({"masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_3G_20GB"}}}, {"1g.5gb": 2}, "may use none of"),
    ({"masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB"}}, "workerCount": 2, "workerType": "m",
      "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB"}}}, {"1g.5gb": 2}, "asks for 3"),
])
def test_a_job_alone_over_the_projects_limit_is_refused(training, limits, message):
    settings = PlanSettings(Machines(CATALOG, extra={"m": Machine(4, 16)}), limits=limits)
    with pytest.raises(UserInputError) as e:
        plan({**MODULE, "scaleTier": "CUSTOM", "masterType": "m", **training}, settings)
    assert e.value.status == 403 and message in e.value.message and "'vision'" in e.value.message
    assert e.value.field.endswith("Config.acceleratorConfig")


def test_limits_count_a_sweeps_parallel_trials_and_none_means_no_limit():
    one = {**MODULE, "scaleTier": "CUSTOM", "masterType": "m",
           "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB"}}}
    sweep = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "maxTrials": 4, "maxParallelTrials": 3,
             "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.5}]}
    machines = Machines(CATALOG, extra={"m": Machine(4, 16)})
    assert plan(one, PlanSettings(machines, limits={"1g.5gb": 2})).replicas[0].accelerator_count == 1
    with pytest.raises(UserInputError) as e:
        plan({**one, "hyperparameters": sweep}, PlanSettings(machines, limits={"1g.5gb": 2}))
    assert "asks for 3" in e.value.message
    assert plan({**one, "hyperparameters": sweep}, PlanSettings(machines)).sweep.max_parallel == 3


def test_a_grid_counts_only_the_trials_it_can_run_at_once():
    """A 2-point grid with maxParallelTrials 64 never runs more than 2 trials together."""
    grid = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "algorithm": "GRID_SEARCH", "maxTrials": 64,
            "maxParallelTrials": 64, "params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1,
                                                 "maxValue": 2}]}
    one = {**MODULE, "scaleTier": "CUSTOM", "masterType": "m", "hyperparameters": grid,
           "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_A100_1G_5GB"}}}
    machines = Machines(CATALOG, extra={"m": Machine(4, 16)})
    assert plan(one, PlanSettings(machines, limits={"1g.5gb": 2})).sweep.max_parallel == 64
    with pytest.raises(UserInputError):
        plan({**one, "hyperparameters": {**grid, "algorithm": "RANDOM_SEARCH"}}, PlanSettings(machines, limits={"1g.5gb": 2}))
