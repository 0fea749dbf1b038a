"""The accelerator catalogue: whole-object tables and every error path with its field."""

import pytest

from hub_ext.core.catalog import Accelerator, parse_accelerators
from hub_ext.core.errors import ConfigError

pytestmark = pytest.mark.unit

NVIDIA_TOL = ((("effect", "NoSchedule"), ("key", "nvidia.com/gpu"), ("operator", "Exists")),)


@pytest.mark.parametrize("name, raw, expected", [
    ("gpu", {"type": "gpu"},
     Accelerator("gpu", "gpu", "GPU", "nvidia.com/gpu", tolerations=NVIDIA_TOL)),
    ("a100", {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB", "display_name": "A100 40GB"},
     Accelerator("a100", "gpu", "A100 40GB", "nvidia.com/gpu",
                 node_selector=(("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"),),
                 tolerations=NVIDIA_TOL, product="NVIDIA-A100-SXM4-40GB")),
    ("1g.5gb", {"type": "mig", "profile": "1g.5gb"},
     Accelerator("1g.5gb", "mig", "MIG 1g.5gb slice", "nvidia.com/mig-1g.5gb", tolerations=NVIDIA_TOL,
                 mig_profile="1g.5gb", strategy="mixed")),
    ("7g.80gb", {"type": "mig", "profile": "7g.80gb", "tolerations": []},
     Accelerator("7g.80gb", "mig", "MIG 7g.80gb slice", "nvidia.com/mig-7g.80gb", mig_profile="7g.80gb",
                 strategy="mixed")),
    ("3g-single", {"type": "mig", "profile": "3g.20gb", "strategy": "single", "product": "NVIDIA-A100-SXM4-40GB"},
     Accelerator("3g-single", "mig", "MIG 3g.20gb slice", "nvidia.com/gpu",
                 node_selector=(("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"),),
                 tolerations=NVIDIA_TOL, mig_profile="3g.20gb", strategy="single", product="NVIDIA-A100-SXM4-40GB")),
    ("mi250", {"type": "device", "resource": "amd.com/gpu", "node_selector": {"pool": "amd"},
               "tolerations": [{"key": "amd.com/gpu", "operator": "Exists"}]},
     Accelerator("mi250", "device", "amd.com/gpu", "amd.com/gpu", node_selector=(("pool", "amd"),),
                 tolerations=((("key", "amd.com/gpu"), ("operator", "Exists")),))),
])
def test_accelerators(name, raw, expected):
    assert parse_accelerators({name: raw}) == {name: expected}


def test_limits_and_plain_dict_views():
    acc = parse_accelerators({"s": {"type": "mig", "profile": "2g.10gb", "node_selector": {"zone": "a"}}})["s"]
    assert acc.limits(2) == {"nvidia.com/mig-2g.10gb": "2"}
    assert acc.node_selector_dict() == {"zone": "a"}
    assert acc.tolerations_list() == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.mark.parametrize("raw, problems", [
    ({"x": {"type": "tpu"}}, ["accelerators['x'].type: must be one of 'gpu', 'mig', 'device', not 'tpu'"]),
    ({"x": {"type": "mig", "profile": "1g5gb"}},
     ["accelerators['x'].profile: must be a MIG profile such as '1g.5gb' or '3g.20gb', not '1g5gb'"]),
    ({"x": {"type": "mig", "profile": "1g.5gb", "strategy": "single"}},
     ["accelerators['x'].product: is required with the 'single' MIG strategy (the GPU product, e.g. "
      "'NVIDIA-A100-SXM4-40GB')"]),
    ({"x": {"type": "mig", "profile": "1g.5gb", "strategy": "fancy"}},
     ["accelerators['x'].strategy: must be 'mixed' or 'single', not 'fancy'"]),
    ({"x": {"type": "device"}},
     ["accelerators['x'].resource: must be an extended resource name such as 'amd.com/gpu', not None"]),
    ({"x": {"type": "gpu", "count": 2}}, ["accelerators['x'].count: unknown key for a 'gpu' accelerator"]),
    ({"X Y": {"type": "gpu"}}, ["accelerators['X Y']: names are lower-case letters, digits, '-', '_' and '.'"]),
    ({"x": {"type": "gpu", "node_selector": {"a": 1}}},
     ["accelerators['x'].node_selector: must be a mapping of label names to string values"]),
    ({"x": {"type": "gpu", "tolerations": [{"key": "a", "operator": "Maybe"}]}},
     ["accelerators['x'].tolerations[0].operator: must be 'Equal' or 'Exists'"]),
    ({"a": {"type": "gpu"}, "b": {"type": "gpu"}},
     ["accelerators['b']: requests the same resource on the same nodes as 'a'"]),
    ({"a": {"type": "tpu"}, "b": {"type": "mig"}},
     ["accelerators['a'].type: must be one of 'gpu', 'mig', 'device', not 'tpu'",
      "accelerators['b'].profile: must be a MIG profile such as '1g.5gb' or '3g.20gb', not None"]),
])
def test_config_errors_name_every_field(raw, problems):
    with pytest.raises(ConfigError) as e:
        parse_accelerators(raw)
    assert [str(p) for p in e.value.problems] == problems


def test_not_a_mapping():
    with pytest.raises(ConfigError) as e:
        parse_accelerators(["gpu"])
    assert str(e.value.problems[0]) == "accelerators: must be a mapping of names to accelerator settings"
