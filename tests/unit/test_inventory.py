"""Device inventory (nvidia-smi -L, declared) and the allocator."""

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import ConfigError
from hub_ext.local.inventory import Device, DeviceAllocator, declared_inventory, parse_nvidia_smi

pytestmark = pytest.mark.unit

SMI = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 1g.5gb      Device  0: (UUID: MIG-11c29e81-e611-50b5-b5ef-609c0a0fe58b)
  MIG 1g.5gb      Device  1: (UUID: MIG-7e5f4c2a-1b3d-5e6f-8a9b-0c1d2e3f4a5b)
  MIG 3g.20gb     Device  2: (UUID: MIG-0a1b2c3d-4e5f-5a6b-7c8d-9e0f1a2b3c4d)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4)
"""
ACC = parse_accelerators({"1g.5gb": {"type": "mig", "profile": "1g.5gb"}, "3g.20gb": {"type": "mig", "profile": "3g.20gb"},
                          "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
                          "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"}})


def test_nvidia_smi_with_mig():
    assert parse_nvidia_smi(SMI) == [
        Device("MIG-11c29e81-e611-50b5-b5ef-609c0a0fe58b", "mig", "NVIDIA A100-SXM4-40GB", "1g.5gb"),
        Device("MIG-7e5f4c2a-1b3d-5e6f-8a9b-0c1d2e3f4a5b", "mig", "NVIDIA A100-SXM4-40GB", "1g.5gb"),
        Device("MIG-0a1b2c3d-4e5f-5a6b-7c8d-9e0f1a2b3c4d", "mig", "NVIDIA A100-SXM4-40GB", "3g.20gb"),
        Device("GPU-9e8d7c6b-5a4f-3e2d-1c0b-a9f8e7d6c5b4", "gpu", "NVIDIA A100-SXM4-40GB"),
    ]
    assert parse_nvidia_smi("") == []


def test_devices_serve_matching_accelerators():
    devices = parse_nvidia_smi(SMI)
    alloc = DeviceAllocator(devices)
    assert [alloc.total(ACC[n]) for n in ("1g.5gb", "3g.20gb", "a100", "h100")] == [2, 1, 1, 0]


def test_declared_inventory_and_errors():
    assert declared_inventory({"GPU-demo-0": {"type": "gpu"}, "MIG-demo-1": {"type": "mig", "profile": "1g.5gb"}}) == [
        Device("GPU-demo-0", "gpu", "NVIDIA A100-SXM4-40GB"), Device("MIG-demo-1", "mig", "NVIDIA A100-SXM4-40GB", "1g.5gb")]
    with pytest.raises(ConfigError) as e:
        declared_inventory({"x": {"type": "tpu"}, "y": {"type": "mig"}, "z": {"type": "gpu", "size": 1}})
    assert [str(p) for p in e.value.problems] == ["inventory['x'].type: must be 'gpu' or 'mig'",
                                                  "inventory['y'].profile: must be a MIG profile such as '1g.5gb', "
                                                  "not None", "inventory['z'].size: unknown key"]


def test_allocator_never_shares_and_survives_restart(tmp_path):
    state = tmp_path / "devices.json"
    alloc = DeviceAllocator(parse_nvidia_smi(SMI), state)
    first = alloc.allocate("alice/", ACC["1g.5gb"], 1)
    second = alloc.allocate("bob/", ACC["1g.5gb"], 1)
    assert first and second and set(first).isdisjoint(second)
    assert alloc.allocate("carol/", ACC["1g.5gb"], 1) is None
    assert alloc.allocate("alice/", ACC["1g.5gb"], 1) == first  # idempotent for the same holder
    restarted = DeviceAllocator(parse_nvidia_smi(SMI), state)
    assert restarted.held_by("alice/") == first and restarted.allocate("carol/", ACC["1g.5gb"], 1) is None
    restarted.release("bob/")
    assert restarted.allocate("carol/", ACC["1g.5gb"], 1) == second
    assert alloc.allocate("dave/", ACC["a100"], 2) is None and alloc.held_by("dave/") == []
