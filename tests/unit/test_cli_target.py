"""Where `kubectl ai-platform` finds the jobs (`main.target_of`), the flags its suggested commands
repeat (`main.follow_up_scope`), and the directory of a ``local train`` run (`main.local_train_dir`)."""

import datetime

import pytest

from server_ext.cli.flags import parse_args
from server_ext.cli.main import follow_up_scope, local_train_dir, target_of

pytestmark = pytest.mark.unit

NO_CONFIG = {"MLPLATFORM_CONFIG": "/nonexistent/kubectl-ai-platform.yaml"}
HUB = {**NO_CONFIG, "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:8888/user/alice/", "JUPYTERHUB_API_TOKEN": "t",
       "MLPLATFORM_STATE_DIR": "/srv/state/jobs/alice"}  # a notebook server of the local runtime (the demo's)
SCRIPT = {**NO_CONFIG, "MLPLATFORM_SERVER_URL": "http://127.0.0.1:8888/", "MLPLATFORM_SERVER_TOKEN": "t"}
KUBE_POD = {**HUB, "MLPLATFORM_BACKEND": "kubernetes"}
DESCRIBE = ["jobs", "describe", "j1"]
TRAIN = ["local", "train", "--module-name", "trainer.task"]


@pytest.mark.parametrize("argv, env, target", [
    # a local-runtime notebook server: it is the local runtime, so --local goes through its API too
    (DESCRIBE, HUB, "server"),
    ([*DESCRIBE, "--local"], HUB, "server"),
    (DESCRIBE, {**HUB, "MLPLATFORM_LOCAL": "1"}, "server"),
    ([*DESCRIBE, "--local"], SCRIPT, "server"),
    # local train never shares a server's runtime
    (TRAIN, HUB, "local-train"),
    (TRAIN, NO_CONFIG, "local-train"),
    # a Kubernetes notebook pod: --local is the pod's own runtime
    ([*DESCRIBE, "--local"], KUBE_POD, "local"),
    (DESCRIBE, KUBE_POD, "server"),
    ([*DESCRIBE, "--context", "kind-dev"], KUBE_POD, "kubernetes"),
    # no notebook server
    ([*DESCRIBE, "--local"], NO_CONFIG, "local"),
    (DESCRIBE, {**NO_CONFIG, "MLPLATFORM_LOCAL": "yes"}, "local"),
    (DESCRIBE, NO_CONFIG, "kubernetes"),
    # no region table: every region is the platform's one cluster, here the server's
    ([*DESCRIBE, "--region", "us-central1"], HUB, "server"),
    ([*DESCRIBE, "--region", "us-central1"], KUBE_POD, "server"),
    ([*DESCRIBE, "--context", "kind-dev"], HUB, "kubernetes"),
])
def test_target(argv, env, target):
    assert target_of(parse_args(argv), env) == target


def test_a_region_the_region_table_maps_leaves_the_notebook_server(tmp_path):
    settings = tmp_path / "kubectl-ai-platform.yaml"
    settings.write_text("regions: {us-central1: gke-prod}\n")
    env = {**HUB, "MLPLATFORM_CONFIG": str(settings)}
    assert target_of(parse_args([*DESCRIBE, "--region", "us-central1"]), env) == "kubernetes"
    assert target_of(parse_args(DESCRIBE), env) == "server"


@pytest.mark.parametrize("argv, target, scope", [
    (DESCRIBE, "local", " --local"),
    ([*DESCRIBE, "--local", "-n", "team"], "local", " --local --project team"),
    ([*DESCRIBE, "--local"], "server", ""),  # in a server, the plain command reaches the same job
    (DESCRIBE, "kubernetes", ""),
    ([*DESCRIBE, "--context", "kind-dev", "--region", "eu"], "kubernetes", " --context kind-dev --region eu"),
    ([*DESCRIBE, "--project", "team"], "server", " --project team"),
])
def test_suggested_commands_repeat_the_flags_that_find_the_job(argv, target, scope):
    assert follow_up_scope(parse_args(argv), target) == scope


def test_each_local_train_run_gets_a_fresh_directory(tmp_path):
    env = {"MLPLATFORM_STATE_DIR": str(tmp_path)}
    now = datetime.datetime(2026, 12, 3, 15, 54, 2, tzinfo=datetime.timezone.utc)
    job_id, where = local_train_dir(env, now)
    assert (job_id, where) == ("local_train_20261203_155402", tmp_path / "local-train" / "local_train_20261203_155402")
    assert not where.exists()  # made by open_target, once the job was checked
    where.mkdir(parents=True)
    assert local_train_dir(env, now) == ("local_train_20261203_155402_2",
                                         tmp_path / "local-train" / "local_train_20261203_155402_2")
