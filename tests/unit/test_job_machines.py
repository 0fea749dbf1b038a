"""Machine types, accelerators and scale tiers of AI Platform mapped to the platform catalogue."""

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import UserInputError
from server_ext.jobs.machines import TIERS, Machine, Machines

pytestmark = pytest.mark.unit

CATALOG = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb": {"type": "mig", "profile": "3g.20gb"},
})
M = Machines(CATALOG)


@pytest.mark.parametrize("name, machine", [
    ("n1-standard-8", Machine(8, 30.0)), ("n1-highmem-16", Machine(16, 104.0)), ("n1-highcpu-32", Machine(32, 28.8)),
    ("n2-standard-4", Machine(4, 16)), ("e2-highmem-2", Machine(2, 16)),
    ("a2-highgpu-2g", Machine(24, 170, "NVIDIA_TESLA_A100", 2)),
    ("standard", Machine(4, 15)), ("complex_model_m_p100", Machine(16, 60, "NVIDIA_TESLA_P100", 4)),
    ("standard_gpu", Machine(8, 30, "NVIDIA_TESLA_K80", 1)),
])
def test_machine_types(name, machine):
    assert M.machine(name, "trainingInput.masterType") == machine


def test_an_operator_table_adds_machines_and_unknown_ones_are_refused():
    m = Machines(CATALOG, extra={"dgx-slice": Machine(4, 16, "NVIDIA_A100_1G_5GB", 1)})
    assert m.machine("dgx-slice", "x").accelerator == "NVIDIA_A100_1G_5GB"
    with pytest.raises(UserInputError) as e:
        m.machine("n1-standrd-8", "trainingInput.workerType")
    assert e.value.field == "trainingInput.workerType" and "unknown machine type" in e.value.message


@pytest.mark.parametrize("google, name", [
    ("NVIDIA_TESLA_A100", "a100"), ("NVIDIA_A100_1G_5GB", "1g.5gb"), ("NVIDIA_A100_3G_20GB", "3g.20gb"),
])
def test_accelerators_map_to_the_catalogue(google, name):
    assert M.accelerator(google, "x").name == name


@pytest.mark.parametrize("google, message", [
    ("TPU_V3", "TPUs are not offered"),
    ("NVIDIA_TESLA_V100", "no NVIDIA_TESLA_V100 on this platform (offered: NVIDIA_A100_1G_5GB, NVIDIA_A100_3G_20GB, "
                          "NVIDIA_TESLA_A100)"),
])
def test_accelerators_the_platform_lacks(google, message):
    with pytest.raises(UserInputError) as e:
        M.accelerator(google, "trainingInput.masterConfig.acceleratorConfig.type")
    assert message in e.value.message


def test_aliases_and_tiers():
    m = Machines(CATALOG, aliases={"NVIDIA_TESLA_V100": "a100"})  # old configs' V100s run on A100s here
    assert m.accelerator("NVIDIA_TESLA_V100", "x").name == "a100"
    assert "NVIDIA_TESLA_V100" in m.names()
    assert TIERS["STANDARD_1"]["parameterServerCount"] == "1" and TIERS["BASIC_GPU"]["masterType"] == "standard_gpu"


@pytest.mark.parametrize("name, cpus", [("n1-standard-1", 1), ("n1-highmem-96", 96), ("n2d-standard-224", 224),
                                        ("e2-highcpu-32", 32), ("c2-standard-60", 60), ("n1-standard-08", 8)])
def test_machine_types_at_their_bounds(name, cpus):
    assert M.machine(name, "trainingInput.masterType").cpu == cpus


@pytest.mark.parametrize("name, message", [
    ("n1-standard-0", "n1 machines have 1 to 96 vCPUs"), ("n1-standard-97", "n1 machines have 1 to 96 vCPUs"),
    ("n1-standard-99999999999999999999999", "n1 machines have 1 to 96 vCPUs"),
    ("n1-standard-" + "9" * 5000, "n1 machines have 1 to 96 vCPUs"), ("e2-standard-64", "e2 machines have 1 to 32"),
    ("n2-highmem-129", "n2 machines have 1 to 128"), ("c2-standard-0000", "c2 machines have 1 to 60"),
])
def test_machine_types_beyond_compute_engines_shapes(name, message):
    with pytest.raises(UserInputError) as e:
        M.machine(name, "trainingInput.workerType")
    assert e.value.field == "trainingInput.workerType" and message in e.value.message


CATALOG_H100 = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"},
    "v100": {"type": "gpu", "product": "Tesla-V100-SXM2-16GB"},
    "a6000": {"type": "gpu", "product": "NVIDIA-RTX-A6000"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
})


@pytest.mark.parametrize("google, name", [
    ("NVIDIA_TESLA_A100", "a100"), ("NVIDIA_A100", "a100"), ("NVIDIA_A100_40GB", "a100"), ("NVIDIA_H100_80GB", "h100"),
    ("NVIDIA_TESLA_V100", "v100"), ("NVIDIA_A100_1G_5GB", "1g.5gb"),
    ("NVIDIA_RTX_A6000", "a6000"), ("NVIDIA_A6000", "a6000"),  # a series word before the model is optional
])
def test_accelerators_match_the_products_model_by_whole_tokens(google, name):
    assert Machines(CATALOG_H100).accelerator(google, "x").name == name


@pytest.mark.parametrize("google", ["1", "A", "0", "_", "NVIDIA_TESLA_A1", "NVIDIA", "NVIDIA_TESLA", "SXM4",
                                    "NVIDIA_40GB", "NVIDIA_A100_80GB", "NVIDIA_H10", "100", "NVIDIA_A100X"])
def test_accelerators_that_are_only_part_of_a_products_name_are_refused(google):
    with pytest.raises(UserInputError) as e:
        Machines(CATALOG_H100).accelerator(google, "trainingInput.masterConfig.acceleratorConfig.type")
    assert e.value.field == "trainingInput.masterConfig.acceleratorConfig.type"
    assert f"no {google} on this platform" in e.value.message
