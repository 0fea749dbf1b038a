"""`mlplatform check-config` on good and broken jupyterhub_config.py and z2jh values files."""

import textwrap

import pytest

from hub_ext.cli import main

pytestmark = pytest.mark.unit

PLATFORM_PY = """
c = get_config()
c.JupyterHub.spawner_class = "platform-local"
c.PlatformConfig.accelerators = {"1g.5gb": {"type": "mig", "profile": "1g.5gb"}}
c.LocalPlatformSpawner.profiles = {
    "cpu": {"display_name": "CPU", "cpu": {"limit": 2}, "memory": {"limit": "4G"}},
    "mig": {"display_name": "MIG", "accelerator": "1g.5gb"},
}
"""

KUBESPAWNER_PY = """
c = get_config()
c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
c.KubeSpawner.profile_list = [
    {"display_name": "Small", "default": True, "kubespawner_override": {"cpu_limit": 1, "mem_limit": "2G"}},
    {"display_name": "GPU", "kubespawner_override": {"image": "cuda:12", "extra_resource_limits": {"nvidia.com/gpu": "1"}}},
]
"""

VALUES = """
jupyterhub:
  hub:
    config:
      PlatformConfig:
        accelerators:
          3g.20gb: {type: mig, profile: 3g.20gb}
  singleuser:
    profileList:
      - display_name: Medium slice
        slug: medium
        kubespawner_override:
          extra_resource_limits: {nvidia.com/mig-3g.20gb: 1}
      - display_name: CPU
        default: true
"""


def run(tmp_path, name, text, capsys):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    code = main(["check-config", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_platform_config(tmp_path, capsys):
    code, out, err = run(tmp_path, "jupyterhub_config.py", PLATFORM_PY, capsys)
    assert code == 0, err
    assert "OK, 1 accelerator(s), 2 profile(s)" in out
    assert "cpu (default): CPU\n      cpu_limit=2.0, mem_limit=4G" in out
    assert "mig: MIG\n      nvidia.com/mig-1g.5gb=1" in out


def test_plain_kubespawner_profile_list(tmp_path, capsys):
    code, out, err = run(tmp_path, "jupyterhub_config.py", KUBESPAWNER_PY, capsys)
    assert code == 0, err
    assert "small (default): Small\n      cpu_limit=1.0, mem_limit=2G" in out
    assert "gpu: GPU\n      nvidia.com/gpu=1, image=cuda:12" in out


def test_helm_values_nested_under_a_parent_chart(tmp_path, capsys):
    code, out, err = run(tmp_path, "values.yaml", VALUES, capsys)
    assert code == 0, err
    assert "medium: Medium slice\n      nvidia.com/mig-3g.20gb=1" in out and "cpu (default): CPU" in out


def test_broken_config_lists_every_problem_with_its_path(tmp_path, capsys):
    broken = KUBESPAWNER_PY.replace('"cpu_limit"', '"cpu_limt"').replace('"1"}', '"one"}')
    code, out, err = run(tmp_path, "jupyterhub_config.py", broken, capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "error: profile_list[0].kubespawner_override.cpu_limt: is not a KubeSpawner trait",
        "error: profile_list[1].kubespawner_override.extra_resource_limits.nvidia.com/gpu: must be a positive whole "
        "number, not 'one'",
        f"{tmp_path / 'jupyterhub_config.py'}: 2 problem(s)",
    ]


def test_broken_values(tmp_path, capsys):
    code, _, err = run(tmp_path, "values.yaml", VALUES.replace("profile: 3g.20gb", "profile: 3g20gb"), capsys)
    assert code == 1
    assert "error: accelerators['3g.20gb'].profile: must be a MIG profile such as '1g.5gb' or '3g.20gb', not " \
           "'3g20gb'" in err


@pytest.mark.parametrize("name, text, words", [
    ("jupyterhub_config.py", "c = get_config()\nc.JupyterHub.spawner_class = (\n", "SyntaxError"),
    ("values.yaml", "foo: [1, 2\n", "cannot read"),
    ("values.yaml", "other: {}\n", "no z2jh 'singleuser' or 'hub' section"),
])
def test_unreadable_files_exit_2(tmp_path, capsys, name, text, words):
    code, _, err = run(tmp_path, name, text, capsys)
    assert code == 2 and words in err and "Traceback" not in err


def test_missing_file(tmp_path, capsys):
    assert main(["check-config", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_overrides_are_checked_for_the_local_runtime_too(tmp_path, capsys):
    local = PLATFORM_PY.replace('"memory": {"limit": "4G"}}', '"memory": {"limit": "4G"}, '
                                                              '"kubespawner_override": {"imagge": "x"}}')
    code, _, err = run(tmp_path, "jupyterhub_config.py", local, capsys)
    assert code == 1 and "profiles['cpu'].kubespawner_override.imagge: is not a KubeSpawner trait" in err


EVERY_SECTION_PY = """
c = get_config()
c.JupyterHub.spawner_class = "platform-local"
c.PlatformConfig.accelerators = {"1g.5gb": {"type": "mig", "profile": "1g.5gb"},
                                 "3g.20gb": {"type": "mig", "profile": "3g20gb"}}
c.LocalPlatformSpawner.profiles = {
    "cpu": {"display_name": "CPU", "cpu": {"limit": 2}},
    "mig": {"display_name": "MIG", "accelerator": "1g.5gb", "memory": {"limit": "lots"}},
    "mig-3g": {"display_name": "Medium slice", "accelerator": "3g.20gb"},
}
c.PlatformConfig.groups = {
    "vision": {"project": "vision", "profiles": ["cpu", "mig", "mig-3g"],
               "limits": {"1g.5gb": 2, "3g.20gb": 1, "a100": 1}},
}
"""


def test_every_section_is_checked_and_a_broken_entry_is_reported_once(tmp_path, capsys):
    """A profile error does not hide the groups' problems; the profile 'mig' and the accelerator
    '3g.20gb', which failed themselves, are not reported again where they are referred to."""
    code, out, err = run(tmp_path, "jupyterhub_config.py", EVERY_SECTION_PY, capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "error: accelerators['3g.20gb'].profile: must be a MIG profile such as '1g.5gb' or '3g.20gb', not '3g20gb'",
        "error: profiles['mig'].memory.limit: must be a size such as '512M', '4G' or '8Gi', not 'lots'",
        "error: groups['vision'].limits.a100: unknown accelerator (known: 1g.5gb, 3g.20gb)",
        f"{tmp_path / 'jupyterhub_config.py'}: 3 problem(s)",
    ]


@pytest.mark.parametrize("profiles, first", [
    ('["cpu"]', "error: profiles: must be a mapping of profile names to profiles"),
    ("{}", "error: profiles: no profiles are configured"),
])
def test_groups_are_checked_when_no_profile_could_be_read(tmp_path, capsys, profiles, first):
    text = EVERY_SECTION_PY.replace('"profile": "3g20gb"', '"profile": "3g.20gb"')
    start, end = text.index("c.LocalPlatformSpawner.profiles"), text.index("c.PlatformConfig.groups")
    text = text[:start] + f"c.LocalPlatformSpawner.profiles = {profiles}\n" + text[end:]
    code, _, err = run(tmp_path, "jupyterhub_config.py", text, capsys)
    assert code == 1
    assert err.splitlines()[:-1] == [first, "error: groups['vision'].limits.a100: unknown accelerator "
                                            "(known: 1g.5gb, 3g.20gb)"]
