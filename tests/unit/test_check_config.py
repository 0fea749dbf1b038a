"""`mlplatform check-config` on good and broken jupyterhub_config.py and z2jh values files."""

import pathlib
import textwrap

import pytest

from hub_ext.cli.main import main

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
    broken = KUBESPAWNER_PY.replace('"mem_limit": "2G"', '"mem_limit": "2 GB"').replace('"1"}', '"one"}')
    code, out, err = run(tmp_path, "jupyterhub_config.py", broken, capsys)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("error: KubeSpawner.profile_list[0].kubespawner_override.mem_limit: 2 GB ")
    assert lines[1:] == [
        "error: KubeSpawner.profile_list[1].kubespawner_override.extra_resource_limits.nvidia.com/gpu: must be a positive whole "
        "number, not 'one'",
        f"{tmp_path / 'jupyterhub_config.py'}: 2 problem(s)",
    ]


def test_an_override_key_kubespawner_ignores_is_a_warning(tmp_path, capsys):
    """KubeSpawner sets a key that is no trait as a plain attribute, to no effect: warned, not refused."""
    typo = KUBESPAWNER_PY.replace('"cpu_limit"', '"cpu_limt"')
    code, out, err = run(tmp_path, "jupyterhub_config.py", typo, capsys)
    assert code == 0 and ": OK," in out
    assert ("warning: KubeSpawner.profile_list[0].kubespawner_override.cpu_limt: is not a KubeSpawner trait, so it "
            "has no effect; did you mean 'cpu_limit'?") in err.splitlines()


def test_broken_values(tmp_path, capsys):
    code, _, err = run(tmp_path, "values.yaml", VALUES.replace("profile: 3g.20gb", "profile: 3g20gb"), capsys)
    assert code == 1
    assert "error: jupyterhub.hub.config.PlatformConfig.accelerators['3g.20gb'].profile: must be a MIG profile such as '1g.5gb' or '3g.20gb', not " \
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
    assert code == 1 and "LocalPlatformSpawner.profiles['cpu'].kubespawner_override.imagge: is not a KubeSpawner " \
                         "trait; did you mean 'image'?" in err


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
        "error: PlatformConfig.accelerators['3g.20gb'].profile: must be a MIG profile such as '1g.5gb' or '3g.20gb', "
        "not '3g20gb'",
        "error: LocalPlatformSpawner.profiles['mig'].memory.limit: must be a size such as '512M', '4G' or '8Gi', "
        "not 'lots'",
        "error: PlatformConfig.groups['vision'].limits.a100: unknown accelerator (known: 1g.5gb, 3g.20gb)",
        f"{tmp_path / 'jupyterhub_config.py'}: 3 problem(s)",
    ]


@pytest.mark.parametrize("profiles, first", [
    ('["cpu"]', "error: LocalPlatformSpawner.profiles: must be a mapping of profile names to profiles"),
    ("{}", "error: LocalPlatformSpawner.profiles: no profiles are configured"),
])
def test_groups_are_checked_when_no_profile_could_be_read(tmp_path, capsys, profiles, first):
    text = EVERY_SECTION_PY.replace('"profile": "3g20gb"', '"profile": "3g.20gb"')
    start, end = text.index("c.LocalPlatformSpawner.profiles"), text.index("c.PlatformConfig.groups")
    text = text[:start] + f"c.LocalPlatformSpawner.profiles = {profiles}\n" + text[end:]
    code, _, err = run(tmp_path, "jupyterhub_config.py", text, capsys)
    assert code == 1
    assert err.splitlines()[:-1] == [first, "error: PlatformConfig.groups['vision'].limits.a100: unknown accelerator "
                                            "(known: 1g.5gb, 3g.20gb)"]


# ---- issue 20: profiles on KubeSpawner without spawner_class, Helm's -f merge, paths as written ----
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("section", ["KubeSpawner", "PlatformSpawner"])
def test_profiles_on_the_kubernetes_spawner_without_spawner_class(tmp_path, capsys, section):
    text = KUBESPAWNER_PY.replace('c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"\n', "")
    text = text.replace("c.KubeSpawner.profile_list", f"c.{section}.profile_list")
    assert "spawner_class" not in text
    code, out, err = run(tmp_path, "jupyterhub_config.py", text, capsys)
    assert code == 0, err
    assert "OK, 0 accelerator(s), 2 profile(s)" in out and "gpu: GPU\n      nvidia.com/gpu=1" in out


def test_the_login_overlays_check_after_the_values_they_overlay(capsys):
    values = ROOT / "helm-values" / "values.yaml"
    for overlay in sorted((ROOT / "helm-values").glob("login-*.yaml")):
        assert main(["check-config", str(overlay)]) == 1
        err = capsys.readouterr().err
        assert f"singleuser.profileList: no profiles are configured ({overlay.name} holds none; if it is an " \
               f"overlay, give the base values file first, as to helm -f: mlplatform check-config values.yaml " \
               f"{overlay.name})" in err
        assert main(["check-config", str(values), str(overlay)]) == 0, capsys.readouterr().err
        assert "OK, 3 accelerator(s), 4 profile(s)" in capsys.readouterr().out


def test_values_files_merge_as_helm_merges_them(tmp_path, capsys):
    """Maps merged key by key, lists replaced, later files win, null removes a key."""
    (tmp_path / "a.yaml").write_text(textwrap.dedent(VALUES))
    (tmp_path / "b.yaml").write_text(textwrap.dedent("""
        jupyterhub:
          hub:
            config:
              PlatformConfig:
                accelerators:
                  1g.5gb: {type: mig, profile: 1g.5gb}
          singleuser:
            profileList:
              - display_name: Small slice
                kubespawner_override:
                  extra_resource_limits: {nvidia.com/mig-1g.5gb: 1}
        """))
    (tmp_path / "c.yaml").write_text("jupyterhub:\n  hub:\n    config:\n      PlatformConfig:\n"
                                     "        accelerators:\n          3g.20gb: null\n")
    assert main(["check-config", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]) == 0
    out = capsys.readouterr().out
    assert "OK, 2 accelerator(s), 1 profile(s)" in out and "small-slice (default): Small slice" in out
    assert main(["check-config", *(str(tmp_path / n) for n in ("a.yaml", "b.yaml", "c.yaml"))]) == 0
    assert "OK, 1 accelerator(s), 1 profile(s)" in capsys.readouterr().out


def test_a_multi_document_file_says_what_it_is(capsys):
    assert main(["check-config", str(ROOT / "helm-values" / "hub-rbac.yaml")]) == 2
    err = capsys.readouterr().err
    assert "hub-rbac.yaml holds 3 YAML documents: a values file is one document (is this a Kubernetes manifest? " \
           "it holds ClusterRole, ClusterRoleBinding: apply it with kubectl, do not pass it to helm -f)" in err
    assert "Traceback" not in err


def test_a_py_file_is_not_merged_with_values(tmp_path, capsys):
    (tmp_path / "jupyterhub_config.py").write_text(PLATFORM_PY)
    (tmp_path / "v.yaml").write_text(VALUES)
    assert main(["check-config", str(tmp_path / "jupyterhub_config.py"), str(tmp_path / "v.yaml")]) == 2
    assert "a jupyterhub_config.py is checked alone" in capsys.readouterr().err


def test_an_unknown_top_level_key_is_reported_where_it_is_written(tmp_path, capsys):
    """traitlets reports ``c.PlatformConfig.acelerators`` only when a server starts, as a key of
    the spawner class; check-config names it where it is, with the key meant."""
    text = PLATFORM_PY.replace("c.PlatformConfig.accelerators", "c.PlatformConfig.acelerators")
    text += "c.LocalPlatformSpawner.profils = {}\n"
    code, _, err = run(tmp_path, "jupyterhub_config.py", text, capsys)
    assert code == 1
    assert err.splitlines()[:2] == [
        "warning: PlatformConfig.acelerators: not a setting of the platform's spawner, ignored; did you mean "
        "'accelerators'?",
        "warning: LocalPlatformSpawner.profils: not a setting of the platform's spawner, ignored; did you mean "
        "'profiles'?",
    ]
    code, _, err = run(tmp_path, "values.yaml", VALUES.replace("accelerators:", "acelerators:"), capsys)
    assert "warning: jupyterhub.hub.config.PlatformConfig.acelerators: not a setting of the platform's spawner, " \
           "ignored; did you mean 'accelerators'?" in err
    assert "error: jupyterhub.singleuser.profileList[0].kubespawner_override.extra_resource_limits" not in err


def test_a_callable_profile_list_is_reported_as_checked_per_spawn(tmp_path, capsys):
    text = KUBESPAWNER_PY.replace("c.KubeSpawner.profile_list = [", "def profiles(spawner):\n    return [")
    code, out, err = run(tmp_path, "jupyterhub_config.py", text + "c.KubeSpawner.profile_list = profiles\n", capsys)
    assert code == 0, err
    assert "KubeSpawner.profile_list is a function of the spawner: its profiles are checked each time it is " \
           "called" in out


def test_the_hub_logs_the_same_warnings_at_start_under_the_configs_paths(caplog):
    from traitlets.config import Config

    from hub_ext.setup import configure

    c = Config()
    c.PlatformConfig.acelerators = {}
    c.LocalPlatformSpawner.profile_list = [{"display_name": "CPU", "descripton": "x"}]
    with caplog.at_level("WARNING", logger="mlplatform"):
        configure(c)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("mlplatform")]
    assert lines == [
        "c.PlatformConfig.acelerators: not a setting of the platform's spawner, ignored; did you mean 'accelerators'?",
        "c.LocalPlatformSpawner.profile_list[0].descripton: unknown key, ignored by KubeSpawner; did you mean "
        "'description'?",
    ]
    c.LocalPlatformSpawner.profile_list = [{"display_name": "CPU", "kubespawner_override": {"cpu_limit": "2"}}]
    with pytest.raises(Exception) as e:
        configure(c)
    assert "LocalPlatformSpawner.profile_list[0].kubespawner_override.cpu_limit: The 'cpu_limit' trait expected " \
           "a float, not the str '2'." in str(e.value)
