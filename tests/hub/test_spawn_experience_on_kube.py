"""A refused API spawn leaves no new named server behind on the Kubernetes runtime too (issue
20.6): a real JupyterHub with PlatformSpawner on the real control plane, the hub acting as the
ServiceAccount of `helm-values/hub-rbac.yaml`."""

import pytest

from hub_ext.local.demo import DemoSecrets
from tests.cluster.identities import hub_kubeconfig
from tests.hub.test_spawn_experience import gone_soon, server_rows
from tests.kube.platform_env import delete_projects, kube_hub_config

pytestmark = pytest.mark.hub


def test_a_refused_api_spawn_leaves_no_new_named_server(kube_cluster, hub_factory, tmp_path):
    hub = hub_factory(kube_hub_config(tmp_path / "state", DemoSecrets.generate()),
                      env={"KUBECONFIG": str(hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig"))})
    try:
        hub.api("POST", "/users/alice")
        assert hub.api("PUT", "/users/alice/servers/kept").status_code == 201
        for name, options, status in [("bad", {"profile": "nope"}, 400),
                                      ("theirs", {"project": "research", "profile": "cpu"}, 403),
                                      ("kept", {"profile": "nope"}, 400)]:
            r = hub.api("POST", f"/users/alice/servers/{name}", json=options)
            assert r.status_code == status, r.text
        assert gone_soon(hub, "alice", "bad") and gone_soon(hub, "alice", "theirs"), server_rows(hub, "alice")
        assert server_rows(hub, "alice") - {""} == {"kept"}
    finally:
        hub.stop()
        delete_projects(kube_cluster)
