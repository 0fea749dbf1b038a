"""The operator's job tables (machine types, aliases, the legacy GPU, runtimes, the fetcher image)
from the notebook server's config and the kubectl plugin's settings file."""

import pytest

from hub_ext.core.errors import ConfigError, UserInputError
from hub_ext.manifests.mounts import MountSettings
from server_ext.jobs.defaults import DEFAULT_ACCELERATORS, DEFAULT_CREDENTIAL_TYPES
from server_ext.jobs.kube.kubeflow import DEFAULT_FETCHER_IMAGE
from server_ext.jobs.machines import Machine
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import DEFAULT_RUNTIMES, plan_job
from server_ext.jobs.tables import JobTables, parse_tables
from server_ext.service.config import cli_config

pytestmark = pytest.mark.unit

TABLES = {
    "machines": {"dgx-slice": {"cpu": 8, "memory_gib": 60, "accelerator": "NVIDIA_A100_1G_5GB", "count": 2}},
    "accelerator_aliases": {"NVIDIA_TESLA_V100": "h100"},
    "legacy_gpu": "h100",
    "runtimes": {"2.15": {"3.11": {"image": "registry.example.com/tf:2.15", "framework": "tensorflow"}}},
    "default_runtime_version": "2.15",
    "fetcher_image": "registry.example.com/mlplatform/trainer-tools:0.2.0",
}


def _plan(tables: JobTables, training: dict):
    job = parse_job({"jobId": "j", "trainingInput": {"pythonModule": "trainer.task",
                                                     "packageUris": ["gs://b/t.tar.gz"], **training}})
    return plan_job(job, tables.plan_settings(DEFAULT_ACCELERATORS), project="vision", owner="alice")


def test_an_operators_tables_reach_the_plan_and_the_manifests():
    tables = parse_tables(TABLES, "MLPlatformApp.job_tables")
    p = _plan(tables, {"scaleTier": "CUSTOM", "masterType": "dgx-slice"})
    (master,) = p.replicas
    assert (master.cpu, master.accelerator.name, master.accelerator_count) == (8, "1g.5gb", 2)
    assert (p.runtime_version, master.image) == ("2.15", "registry.example.com/tf:2.15")
    assert _plan(tables, {"scaleTier": "BASIC_GPU"}).replicas[0].accelerator.name == "h100"
    v100 = {"scaleTier": "CUSTOM", "masterType": "n1-standard-8",
            "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_V100"}}}
    assert _plan(tables, v100).replicas[0].accelerator.name == "h100"
    assert _plan(tables, {"runtimeVersion": "2.8"}).replicas[0].image == "tensorflow/tensorflow:2.8.0"  # extended
    assert tables.kube_settings(MountSettings(DEFAULT_CREDENTIAL_TYPES)).fetcher_image.endswith("trainer-tools:0.2.0")


def test_no_tables_are_the_built_in_ones():
    tables = parse_tables(None, "x")
    assert tables == JobTables() and tables.fetcher_image == DEFAULT_FETCHER_IMAGE
    assert tables.runtimes.table == DEFAULT_RUNTIMES


def test_jobs_run_as_the_notebooks_user_unless_told_the_images():
    mounts = MountSettings(DEFAULT_CREDENTIAL_TYPES)
    assert parse_tables(None, "x").kube_settings(mounts, (1000, 100)).run_as == (1000, 100)
    assert parse_tables(None, "x").kube_settings(mounts, None).run_as is None  # a notebook running as root
    assert parse_tables({"run_as": "image"}, "x").kube_settings(mounts, (1000, 100)).run_as is None


def test_jobs_run_on_trainer_v2_where_served_unless_told_otherwise():
    mounts = MountSettings(DEFAULT_CREDENTIAL_TYPES)
    assert parse_tables(None, "x").kube_settings(mounts).training_api == "auto"
    for api in ("v1", "v2", "auto"):
        assert parse_tables({"training_api": api}, "x").kube_settings(mounts).training_api == api


def test_replaced_runtimes_drop_the_built_in_table():
    tables = parse_tables({"replace_runtimes": True, "default_runtime_version": "2.15",
                           "runtimes": TABLES["runtimes"]}, "x")
    with pytest.raises(UserInputError) as e:
        _plan(tables, {"runtimeVersion": "2.8"})
    assert e.value.field == "trainingInput.runtimeVersion" and "offered: 2.15" in e.value.message


def test_every_problem_is_named_by_its_key():
    with pytest.raises(ConfigError) as e:
        parse_tables({"machines": {"m": {"cpu": 0, "memory_gib": 4, "gpus": 1}, "n": "big"},
                      "accelerator_aliases": {"NVIDIA_TESLA_T4": ""},
                      "runtimes": {2.10: {"3.11": {"image": "x"}}, "3": {"3.11": {"framework": "jax", "image": "y"}}},
                      "replace_runtimes": "yes", "fetcher_image": "", "run_as": "root", "training_api": "v3",
                      "colour": "blue"},
                     "MLPlatformApp.job_tables")
    fields = {p.path for p in e.value.problems}
    assert fields == {
        "MLPlatformApp.job_tables.colour", "MLPlatformApp.job_tables.machines.m.cpu",
        "MLPlatformApp.job_tables.machines.m.gpus", "MLPlatformApp.job_tables.machines.n",
        "MLPlatformApp.job_tables.accelerator_aliases.NVIDIA_TESLA_T4", "MLPlatformApp.job_tables.runtimes.2.1",
        "MLPlatformApp.job_tables.runtimes.3.3.11.framework", "MLPlatformApp.job_tables.replace_runtimes",
        "MLPlatformApp.job_tables.fetcher_image", "MLPlatformApp.job_tables.run_as",
        "MLPlatformApp.job_tables.training_api",
    }, fields
    assert any("quote the version" in p.message for p in e.value.problems)


@pytest.mark.parametrize("doc, field, message", [
    ({"default_runtime_version": 2.10}, "x.default_runtime_version", "quote the version"),
    ({"default_runtime_version": "9.9"}, "x.default_runtime_version", "not in the runtimes table"),
    ({"replace_runtimes": True}, "x.runtimes", "is required with replace_runtimes"),
])
def test_runtime_settings_that_would_mislead_are_refused(doc, field, message):
    with pytest.raises(ConfigError) as e:
        parse_tables(doc, "x")
    assert any(p.path == field and message in p.message for p in e.value.problems), e.value.problems


def test_the_plugin_settings_file_carries_job_tables(tmp_path):
    path = tmp_path / "kubectl-ai-platform.yaml"
    path.write_text("jobs:\n  legacy_gpu: h100\n  machines: {small: {cpu: 2, memory_gib: 8}}\n")
    tables = cli_config({"MLPLATFORM_CONFIG": str(path)})["jobs"]
    assert tables.legacy_gpu == "h100" and tables.machines == {"small": Machine(2.0, 8.0)}
    path.write_text("jobs:\n  machines: {small: {cpu: two}}\n")
    with pytest.raises(ConfigError) as e:
        cli_config({"MLPLATFORM_CONFIG": str(path)})
    assert {p.path for p in e.value.problems} == {f"{path}: jobs.machines.small.cpu",
                                                  f"{path}: jobs.machines.small.memory_gib"}
    assert cli_config({"MLPLATFORM_CONFIG": str(tmp_path / "absent.yaml")})["jobs"] == JobTables()
    path.write_bytes(b"jobs:\n  legacy_gpu: \xff\n")
    with pytest.raises(ConfigError) as e:
        cli_config({"MLPLATFORM_CONFIG": str(path)})
    assert "not UTF-8" in str(e.value)


def test_the_plugin_plans_with_its_settings_files_tables(tmp_path):
    """`--dry-run` (offline: the built-in catalogue) takes the machine, the legacy GPU and the
    fetcher image from `jobs:` in the plugin's settings file."""
    import io

    import yaml

    from server_ext.cli.main import main

    path = tmp_path / "kubectl-ai-platform.yaml"
    path.write_text("jobs:\n  legacy_gpu: 3g.20gb\n  fetcher_image: registry.example.com/tools:1\n"
                    "  machines: {dgx-small: {cpu: 6, memory_gib: 24}}\n  training_api: v1\n")  # a TFJob's pod
    env = {"JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": str(path)}

    def dry_run(*flags):
        out, err = io.StringIO(), io.StringIO()
        code = main(["jobs", "submit", "training", "j", "--module-name", "trainer.task", "--packages",
                     "gs://b/trainer-0.1.tar.gz", "--dry-run", *flags], out=out, err=err, env=env)
        assert code == 0, err.getvalue()
        (manifest,) = yaml.safe_load_all(out.getvalue())
        assert manifest["kind"] == "TFJob"  # the default runtime is TensorFlow's
        (chief,) = manifest["spec"]["tfReplicaSpecs"].values()
        return chief["template"]["spec"]

    pod = dry_run("--scale-tier", "basic-gpu")
    (main_container,) = pod["containers"]
    assert main_container["resources"]["limits"]["nvidia.com/mig-3g.20gb"] == "1"
    assert pod["initContainers"][0]["image"] == "registry.example.com/tools:1"
    pod = dry_run("--scale-tier", "custom", "--master-machine-type", "dgx-small")
    assert pod["containers"][0]["resources"]["limits"]["cpu"] == "6"
