"""`mlplatform render-project`: the objects of a user's projects as YAML, from a jupyterhub_config.py
or a z2jh values file, exactly as `hub_ext.manifests.tenancy.project_objects` makes them for the hub."""

import subprocess
import sys
import textwrap

import pytest
import yaml

from hub_ext.cli.main import main
from hub_ext.core.entitlements import personal_project_name
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

CONFIG_PY = """
c = get_config()
c.JupyterHub.spawner_class = "platform"
c.PlatformConfig.accelerators = {
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
}
c.PlatformConfig.profiles = {
    "cpu": {"display_name": "CPU", "cpu": {"limit": 2}, "memory": {"limit": "4G"}, "default": True},
    "mig": {"display_name": "MIG", "accelerator": "1g.5gb"},
    "gpu": {"display_name": "GPU", "accelerator": "a100"},
}
c.PlatformConfig.everyone = {"profiles": ["cpu"], "limits": {}}
c.PlatformConfig.groups = {
    "vision": {"project": "vision", "display_name": "Vision team", "profiles": ["cpu", "mig"],
               "limits": {"1g.5gb": 2}},
    "research": {"profiles": ["cpu", "gpu"], "limits": {"a100": 1}},
    "zeta": {"project": "zeta", "profiles": ["cpu"]},
}
c.PlatformSpawner.member_identity_template = "oidc:{username}"
"""

VALUES = """
jupyterhub:
  hub:
    config:
      JupyterHub:
        spawner_class: platform
      PlatformConfig:
        accelerators:
          3g.20gb: {type: mig, profile: 3g.20gb}
        profiles:
          cpu: {display_name: CPU, default: true}
          medium: {display_name: Medium slice, accelerator: 3g.20gb}
        groups:
          nlp: {project: nlp, profiles: [cpu, medium], limits: {3g.20gb: 1}}
  singleuser: {}
"""

CORE_KINDS = {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ResourceQuota", "ConfigMap"}


def render(tmp_path, capsys, *args, text=CONFIG_PY, name="jupyterhub_config.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    code = main(["render-project", "--config", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def docs(out: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(out) if d is not None]


def test_a_team_member_gets_the_personal_project_then_the_team_project(tmp_path, capsys):
    code, out, err = render(tmp_path, capsys, "--user", "alice", "--group", "vision", "--group", "research")
    assert code == 0, err
    objects = docs(out)
    namespaces = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    assert namespaces == [personal_project_name("alice"), "vision"]  # zeta: not alice's group
    for ns in namespaces:
        mine = [o for o in objects if o["metadata"].get("namespace") == ns or o["metadata"]["name"] == ns]
        assert CORE_KINDS <= {o["kind"] for o in mine}, ns
        assert mine[0]["kind"] == "Namespace"  # each project starts with its namespace
    team_ns = next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == "vision")
    assert team_ns["metadata"]["annotations"]["mlplatform.io/owner"] == "group:vision"
    personal_ns = objects[0]
    assert personal_ns["metadata"]["annotations"]["mlplatform.io/owner"] == "user:alice"
    member = [o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "vision"
              and o["metadata"]["name"].startswith("mlplatform-member-")]
    assert [[s["name"] for s in m["subjects"]] for m in member] == [["mlplatform-member-alice", "oidc:alice"]]
    quota = next(o for o in objects if o["kind"] == "ResourceQuota" and o["metadata"]["namespace"] == "vision"
                 and o["metadata"]["name"] == "mlplatform-accelerators")
    assert quota["spec"]["hard"]["requests.nvidia.com/mig-1g.5gb"] == "2"
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"  # the team may not use the A100


def test_header_names_user_groups_config_and_projects(tmp_path, capsys):
    code, out, _ = render(tmp_path, capsys, "--user", "alice", "--group", "vision", "--group", "nobody")
    assert code == 0
    header = out.split("---", 1)[0]
    assert all(line.startswith("#") for line in header.strip().splitlines())
    assert "# user: alice\n" in header
    assert "# groups: nobody, vision\n" in header
    assert f"# config: {tmp_path / 'jupyterhub_config.py'}\n" in header
    assert f"# projects: {personal_project_name('alice')} (personal), vision (team project of group vision)" in header
    assert "no grant in this config for group(s): nobody" in header


def test_output_is_deterministic_and_each_document_says_what_it_is(tmp_path, capsys):
    first = render(tmp_path, capsys, "--user", "alice", "--group", "vision", "--group", "research")[1]
    second = render(tmp_path, capsys, "--user", "alice", "--group", "research", "--group", "vision")[1]
    assert first == second
    for chunk in first.split("---\n")[1:]:
        comment, body = chunk.split("\n", 1)
        obj = yaml.safe_load(body)
        assert comment.startswith("# project ") and comment.endswith(f"{obj['kind']} {obj['metadata']['name']}")


def test_without_a_member_template_only_the_service_account_is_bound(tmp_path, capsys):
    text = CONFIG_PY.replace('c.PlatformSpawner.member_identity_template = "oidc:{username}"', "")
    code, out, err = render(tmp_path, capsys, "--user", "bob", text=text)
    assert code == 0, err
    subjects = [s for o in docs(out) if o["kind"] == "RoleBinding" for s in o["subjects"]]
    assert {s["kind"] for s in subjects} == {"ServiceAccount"}


def test_an_admin_sees_every_team_project_within_the_teams_limits(tmp_path, capsys):
    code, out, err = render(tmp_path, capsys, "--user", "root", "--admin")
    assert code == 0, err
    objects = docs(out)
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == \
        [personal_project_name("root"), "vision", "zeta"]
    quotas = {o["metadata"]["namespace"]: o["spec"]["hard"] for o in objects
              if o["metadata"]["name"] == "mlplatform-accelerators"}
    # the admin's own project is uncapped; a team's keeps the team's quota whoever provisions it
    assert not any("nvidia.com" in k for k in quotas[personal_project_name("root")])
    _, team_out, _ = render(tmp_path, capsys, "--user", "bob", "--group", "vision")
    team = {o["metadata"]["namespace"]: o["spec"]["hard"] for o in docs(team_out)
            if o["metadata"]["name"] == "mlplatform-accelerators"}
    assert quotas["vision"] == team["vision"] and any("nvidia.com" in k for k in quotas["vision"])
    namespaces = {o["metadata"]["name"]: o["metadata"].get("annotations", {}) for o in objects if o["kind"] == "Namespace"}
    assert namespaces["vision"].get("mlplatform.io/accelerators") != "all"


def test_tenancy_settings_come_from_the_spawner_section(tmp_path, capsys):
    text = CONFIG_PY + 'c.KubeSpawner.pod_security_enforce = "baseline"\n' + \
        'c.PlatformSpawner.pod_security_enforce = "restricted"\nc.PlatformSpawner.hub_namespace = "hubs"\n'
    code, out, err = render(tmp_path, capsys, "--user", "alice", text=text)
    assert code == 0, err
    objects = docs(out)
    assert objects[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    hub_binding = next(o for o in objects if o["kind"] == "RoleBinding" and o["subjects"][0]["kind"] == "ServiceAccount"
                       and o["roleRef"]["kind"] == "ClusterRole")
    assert hub_binding["subjects"][0]["namespace"] == "hubs"


def test_z2jh_values(tmp_path, capsys):
    code, out, err = render(tmp_path, capsys, "--user", "carol", "--group", "nlp", text=VALUES, name="values.yaml")
    assert code == 0, err
    objects = docs(out)
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == [personal_project_name("carol"),
                                                                                    "nlp"]
    catalog = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["namespace"] == "nlp"]
    assert '"3g.20gb"' in catalog[0]["data"]["catalog.json"]


def test_a_config_with_problems_prints_each_with_its_field(tmp_path, capsys):
    text = CONFIG_PY.replace('"accelerator": "a100"', '"accelerator": "h100"') + \
        'c.PlatformSpawner.pod_security_enforce = "lenient"\n'
    code, out, err = render(tmp_path, capsys, "--user", "alice", text=text)
    assert code == 1 and out == ""
    assert "error: PlatformConfig.profiles['gpu'].accelerator: unknown accelerator 'h100'" in err  # as written
    text = CONFIG_PY + 'c.PlatformSpawner.pod_security_enforce = "lenient"\n'
    code, out, err = render(tmp_path, capsys, "--user", "alice", text=text)
    assert code == 1 and out == ""
    assert "error: PlatformSpawner.pod_security_enforce: must be one of" in err


Z2JH_CONFIG_PY = """
c = get_config()
c.KubeSpawner.profile_list = [
    {"display_name": "Small", "slug": "small", "default": True, "kubespawner_override": {"cpu_limit": "two"}},
    {"slug": "gpu", "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": "1"}}},
]
"""

Z2JH_VALUES = """
hub:
  config:
    PlatformSpawner: {pod_security_enforce: lenient}
singleuser:
  profileList:
    - {display_name: Small, slug: small, kubespawner_override: {mem_limit: lots}}
"""


def test_problems_are_named_where_the_file_writes_them(tmp_path, capsys):
    """As check-config names them: the KubeSpawner section a jupyterhub_config.py sets, a values
    file's singleuser.profileList and hub.config sections."""
    code, out, err = render(tmp_path, capsys, "--user", "alice", text=Z2JH_CONFIG_PY)
    assert code == 1 and out == ""
    assert "error: KubeSpawner.profile_list[0].kubespawner_override.cpu_limit: " in err
    assert "error: KubeSpawner.profile_list[1].display_name:" in err
    code, out, err = render(tmp_path, capsys, "--user", "alice", text=Z2JH_VALUES, name="values.yaml")
    assert code == 1 and out == ""
    assert "error: singleuser.profileList[0].kubespawner_override.mem_limit:" in err
    assert "error: hub.config.PlatformSpawner.pod_security_enforce: must be one of" in err


CALLABLE_PY = CONFIG_PY.replace("c.PlatformConfig.profiles = {", "_unused = {") + """
def per_user(spawner):
    return [{"display_name": "CPU", "slug": "cpu", "description": f"for {spawner.user.name}"}]


c.KubeSpawner.profile_list = per_user
"""


def test_a_callable_profile_list_renders_every_other_object_and_says_why_no_profile_is_listed(tmp_path, capsys):
    code, out, err = render(tmp_path, capsys, "--user", "alice", "--group", "vision", text=CALLABLE_PY)
    assert code == 0, err
    header = out.split("---", 1)[0]
    assert "# note: KubeSpawner.profile_list is a function of the spawner: only the hub can call it" in header
    assert "the catalogues below list no profiles" in header
    objects = docs(out)
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == [personal_project_name("alice"),
                                                                                    "vision"]
    for cm in (o for o in objects if o["kind"] == "ConfigMap"):
        assert yaml.safe_load(cm["data"]["catalog.json"])["profiles"] == []
    quota = next(o for o in objects if o["metadata"]["name"] == "mlplatform-accelerators"
                 and o["metadata"]["namespace"] == "vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/mig-1g.5gb"] == "2"  # the limits do not need the list


@pytest.mark.parametrize("text, name, words", [
    ("c = get_config()\nraise RuntimeError('boom')\n", "jupyterhub_config.py", "cannot load"),
    ("hub: [unclosed\n", "values.yaml", "cannot read"),
    ("c = get_config()\nc.PlatformConfig.profiles = {'cpu': {}}\n", "jupyterhub_config.py", "local runtime"),
])
def test_unreadable_or_local_configs_exit_2_with_a_message(tmp_path, capsys, text, name, words):
    code, out, err = render(tmp_path, capsys, "--user", "alice", text=text, name=name)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and words in err and "Traceback" not in err


def test_a_missing_file_or_empty_user_exit_2(tmp_path, capsys):
    assert main(["render-project", "--config", str(tmp_path / "none.py"), "--user", "a"]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "c.py").write_text(CONFIG_PY)
    assert main(["render-project", "--config", str(tmp_path / "c.py"), "--user", " "]) == 2
    assert "--user" in capsys.readouterr().err


def test_help_is_the_documented_usage():
    result = subprocess.run([sys.executable, "-m", "hub_ext.cli", "render-project", "--help"],
                            capture_output=True, text=True, timeout=60, check=True)
    for flag in ("--config FILE", "--user NAME", "--group G", "--admin"):
        assert flag in result.stdout
    documented = (ROOT / "docs" / "platform.md").read_text()
    assert "mlplatform render-project --config" in documented and "--group" in documented
