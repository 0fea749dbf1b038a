"""The browser tier's tests on `make demo-kube`, on one demo they share (this module's `demo`).

`python -m tests.harness.demo_kube` is started as a subprocess, as `make demo-kube` starts it
(`tests.harness.demo_kube_process.Launcher`): its own control plane, process-mode kubelet with the
declared GPU/MIG nodes, CoreDNS, the real Training Operator, Trainer v2, Kueue, Katib v0.19.0, the
platform's operator with an S3 emulator, and JupyterHub with PlatformSpawner. Starting it is most of
what such a test costs, so the tests of this module share one (the browser tier runs ``--dist
loadscope``: a module's tests run on one worker, one after another), each as a user of its own, so no
test sees another's server, projects or jobs:

- alice, the seed platform's dataset story (issue 39.8) as a newcomer follows it: the spawn form says
  where credentials and datasets come from while there are none; she adds the S3 emulator's sample
  key pair (read from the demo's banner) on the Credentials page and the sample bucket as a dataset
  on the Datasets page; the real operator's loader (a Job of the process-mode kubelet) copies it into
  the dataset's volume; the spawn form offers it; her server starts with it mounted at
  ``/datasets/sample``, where the emulator's objects are, byte for byte.
- bob, a hyperparameter sweep from JupyterLab on real Katib: from the file browser's "Submit as
  training job" on the example trainer he submits a sweep with the default algorithm and early
  stopping, as the example's own ``hptuning_config.yaml`` asks (3 trials, 2 in parallel), and the
  panel's sweep monitor shows its trials appear and finish, best first, and the job SUCCEEDED.
  Nothing in that path is played: the JupyterLab server's jobs service (in the pod) creates the
  Katib Experiment with the **notebook pod's own identity** (the kubelet writes a kubeconfig into
  the pod's home whose user is a ``tokenFile``, the pod's projected ServiceAccount token, which the
  API server authenticates as ``system:serviceaccount:user-bob:<the pod's serviceAccountName>`` and
  the project's RBAC lets create Experiments there and not in another project). Katib's skopt
  service suggests, its medianstop service gives the trials' collectors their stop rules, the trials
  run as TrainJobs of the example trainer on real Kubeflow Trainer v2 (the demo's servers have the
  default ``training_api: auto``), the metrics collector Katib's pod mutator injects into each trial
  pod reports, and ``trainingOutput`` is built from the real Experiment and Trials.
- carol, the README's walk (`tests/browser/test_readme_walk.py` says how), in a terminal of her
  server: every command exits 0, census_1 runs as a TrainJob, and her server and jobs run as her
  own uid, which can read neither another user's files nor the demo's admin kubeconfig.

When the module ends the demo gets Ctrl-C (SIGINT to the launcher's process group, as a terminal
sends it): it exits 0 within 90 s, leaving no process, no address on ``lo`` and no mount
(`tests.harness.demo_kube_process.stop_cleanly`); a failure there errors the module's last test.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import time

import pytest
import requests
import yaml

from tests.browser.test_lab_panel import PANEL
from tests.browser.test_readme_walk import job_state, login_and_start, report, walk
from tests.harness.browser import screenshot
from tests.harness.demo_kube import DEMO_UID_BASE, SAMPLE
from tests.harness.demo_kube_process import Launcher, log_in, server_pod, start_in_lab, stop_cleanly
from tests.harness.notebook_ui import copy_trainer, open_submit_form
from tests.kube.platform_env import pod_home

pytestmark = pytest.mark.browser

JOB = "kube_sweep"
SWEEP = """goal: MINIMIZE
hyperparameterMetricTag: rmse
maxTrials: 3
maxParallelTrials: 2
enableTrialEarlyStopping: true
params:
- {parameterName: learning_rate, type: DOUBLE, minValue: 0.01, maxValue: 0.2}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    launcher = Launcher(tmp_path_factory.mktemp("demo-kube") / "demo")
    try:
        yield launcher
    finally:
        try:
            if launcher.proc.poll() is None:
                stop_cleanly(launcher)
            else:
                assert launcher.proc.returncode == 0, launcher.output()[-6000:]
        except BaseException:
            print(f"--- demo-kube output ---\n{launcher.output()[-6000:]}")
            raise


def needs_katib(demo) -> None:
    if "sweeps: none" in demo.output():
        pytest.skip("no pod network/DNS here (not root, or `ip addr add` refused): the demo runs no Katib")


def banner_store(output: str) -> tuple[str, str, str]:
    """(access key, secret, bucket) as the banner shows them."""
    keys = re.search(r"access key (\S+)\s+secret (\S+)", output)
    bucket = re.search(r"the dataset s3://([^/\s]+)/sample/", output)
    assert keys and bucket, output
    return keys.group(1), keys.group(2), bucket.group(1)


def custom(api, plural: str, ns: str) -> list[dict]:
    import kubernetes

    return kubernetes.client.CustomObjectsApi(api).list_namespaced_custom_object(
        "kubeflow.org", "v1beta1", ns, plural)["items"]


def pod_identity(home: pathlib.Path) -> tuple[str, dict]:
    """Who the API server says the kubeconfig in the pod's home is (a SelfSubjectReview with its
    token file), and that kubeconfig's user entry."""
    config = yaml.safe_load((home / ".kube" / "config").read_text())
    (user,) = config["users"]
    (cluster,) = config["clusters"]
    token = pathlib.Path(user["user"]["tokenFile"]).read_text().strip()
    r = requests.post(f"{cluster['cluster']['server']}/apis/authentication.k8s.io/v1/selfsubjectreviews",
                      json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                      headers={"Authorization": f"Bearer {token}"},
                      verify=cluster["cluster"]["certificate-authority"], timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["status"]["userInfo"]["username"], user["user"]


def may(api, user: str, verb: str, ns: str) -> bool:
    import kubernetes

    review = kubernetes.client.AuthorizationV1Api(api).create_subject_access_review(
        {"spec": {"user": user, "resourceAttributes": {"group": "kubeflow.org", "resource": "experiments",
                                                        "verb": verb, "namespace": ns}}})
    return review.status.allowed


def server_environ(home: pathlib.Path) -> dict[str, str]:
    """The environment of the notebook server process running in the pod whose home is `home`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            entries = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        env = dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)
        if env.get("HOME") == str(home) and b"singleuser" in cmdline:
            return env
    raise AssertionError(f"no notebook server process with HOME={home}")


def test_demo_kube_a_dataset_from_s3_mounted_in_a_server(demo, browser_page):
    user, project = "alice", "user-alice"
    url, password = demo.login()
    key_id, secret, bucket = banner_store(demo.output())
    page = browser_page
    log_in(page, url, password, user)
    hint = page.locator(".mlplatform-no-mounts")
    assert "Nothing to mount from" in hint.inner_text()
    screenshot(page, "demo-kube-spawn-form-no-mounts")

    hint.get_by_role("link", name="Credentials").click()
    page.wait_for_url(re.compile(r"/hub/mlplatform/credentials"))
    page.select_option("#credential-project", project)
    page.fill("#credential-name", "demo-s3")
    page.select_option("#credential-type", "aws-credential")
    page.fill("#credential-aws-key-id", key_id)
    page.fill("#credential-aws-secret", secret)
    page.click("#add-credential button[type=submit]")
    page.locator('tr[data-credential="demo-s3"]').wait_for(timeout=30_000)
    assert secret not in page.content()  # shown once in the terminal, never by the hub

    page.goto(f"{url}/hub/mlplatform/datasets")
    page.select_option("#dataset-project", project)
    page.fill("#dataset-name", "sample")
    page.fill("#dataset-source", f"s3://{bucket}/sample/")
    page.select_option("#dataset-credential", "demo-s3")
    page.fill("#dataset-size", "1Gi")
    page.click("#add-dataset button[type=submit]")
    row = page.locator('tr[data-dataset="sample"]')
    row.wait_for(timeout=30_000)
    for _ in range(120):  # the operator's loader copies it; the page shows the state
        state = row.get_attribute("data-state")
        if state in ("ready", "failed"):
            break
        page.wait_for_timeout(1000)
        page.reload()
        row = page.locator('tr[data-dataset="sample"]')
        row.wait_for(timeout=30_000)
    screenshot(page, "demo-kube-datasets-page")
    assert state == "ready", row.inner_text()

    page.goto(f"{url}/hub/spawn")
    page.get_by_label("CPU only").check()
    page.check(f"#project-{project}")
    page.check(f"#credential--{project}--demo-s3")
    page.check(f"#dataset--{project}--sample")
    screenshot(page, "demo-kube-spawn-form-mounts")
    start_in_lab(page, user)

    core, pod = server_pod(demo.workdir, project)
    mounts = {m.mount_path: m.name for c in pod.spec.containers for m in c.volume_mounts or []}
    assert "/datasets/sample" in mounts, mounts
    claim = next(v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.name == mounts["/datasets/sample"])
    volume = core.read_namespaced_persistent_volume_claim(claim, project).spec.volume_name
    where = pathlib.Path(core.read_persistent_volume(volume).spec.host_path.path)  # the provisioner's volume
    for key, body in SAMPLE.items():
        assert (where / key.removeprefix("sample/")).read_bytes() == body, key


def test_demo_kube_a_sweep_from_jupyterlab_on_real_katib(demo, browser_page):
    user, project = "bob", "user-bob"
    url, password = demo.login()
    needs_katib(demo)
    page = browser_page
    log_in(page, url, password, user)
    page.get_by_label("CPU only").check()
    page.check(f"#project-{project}")
    start_in_lab(page, user)

    core, pod = server_pod(demo.workdir, project)
    api = core.api_client
    home = pod_home(demo.workdir / "kubelet", project, pod.metadata.name)
    copy_trainer(home)

    # the user's door: the server in the pod has no kubeconfig of ours, only its pod's token
    environ = server_environ(home)
    assert "KUBECONFIG" not in environ
    # the README's `cp -r $MLPLATFORM_EXAMPLES/trainer .` works in the pod
    assert (pathlib.Path(environ["MLPLATFORM_EXAMPLES"]) / "trainer" / "trainer" / "task.py").is_file()
    who, kube_user = pod_identity(home)
    assert list(kube_user) == ["tokenFile"]
    assert who == f"system:serviceaccount:{project}:{pod.spec.service_account_name}", who
    assert may(api, who, "create", project) and not may(api, who, "create", "vision")

    form = open_submit_form(page, f"{url}/user/{user}/lab/tree/trainer/trainer")
    assert form.locator(".mlp-field-package_path").input_value() == "trainer/trainer"
    form.locator(".mlp-field-job_id").fill(JOB)
    form.locator(".mlp-field-args").fill("--epochs=3 --sleep=0.2")
    form.locator(".mlp-field-hyperparameters_on").check()
    form.locator(".mlp-field-hyperparameters").fill(SWEEP)
    screenshot(page, "demo-kube-sweep-form")
    form.locator(".mlp-submit").click()

    detail = page.locator(f"{PANEL} .mlp-detail-view")
    detail.locator(".mlp-detail-title", has_text=JOB).wait_for(timeout=60_000)
    trials = page.locator(f"{PANEL} tr.mlp-trial")
    trials.first.wait_for(timeout=120_000)  # trials appear while the sweep runs
    detail.locator(".mlp-badge", has_text="SUCCEEDED").wait_for(timeout=240_000)
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length === 3", arg=f"{PANEL} tr.mlp-trial",
                           timeout=30_000)
    screenshot(page, "demo-kube-sweep-monitor")
    metric = [float(t.locator("td").nth(2).inner_text()) for t in trials.all()]
    assert metric == sorted(metric), metric  # best first (MINIMIZE)

    # what the panel showed is the real Experiment's: Katib's skopt and medianstop, its collector's observations
    (experiment,) = custom(api, "experiments", project)
    assert experiment["spec"]["algorithm"]["algorithmName"] == "bayesianoptimization"
    assert experiment["spec"]["earlyStopping"]["algorithmName"] == "medianstop"
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in experiment["status"]["conditions"])
    katib_trials = custom(api, "trials", project)
    kinds = [t["spec"]["runSpec"]["kind"] for t in katib_trials]
    # the demo's servers have the default training_api: auto and the demo runs Trainer v2: Katib's TrainJob trials
    # (the single-replica TensorFlow job of AI Platform's default framework, on the platform's runtime)
    assert kinds == ["TrainJob"] * 3, kinds
    trial_pods = [p for p in core.list_namespaced_pod(project).items
                  if (p.metadata.labels or {}).get("katib.kubeflow.org/trial")]
    assert len(trial_pods) == 3 and all(  # each ran with the collector Katib's pod mutator injected
        "metrics-logger-and-collector" in [c.name for c in p.spec.containers] for p in trial_pods), trial_pods
    observed = sorted(float(next(m["latest"] for m in t["status"]["observation"]["metrics"] if m["name"] == "rmse"))
                      for t in katib_trials)
    job = page.request.get(f"{url}/user/{user}/ml/v1/projects/{project}/jobs/{JOB}").json()
    out = job["trainingOutput"]
    assert job["state"] == "SUCCEEDED" and out["completedTrialCount"] == "3", json.dumps(job)
    assert sorted(t["finalMetric"]["objectiveValue"] for t in out["trials"]) == observed
    assert metric == [pytest.approx(v, rel=1e-3) for v in observed]



def test_the_readme_walk_in_make_demo_kube(demo, browser_page):
    user = "carol"
    url, password = demo.login()
    needs_katib(demo)
    page = browser_page
    started = time.monotonic()
    spawn = login_and_start(page, url, password, user, "CPU only", "Personal")
    print(f"\nmake demo-kube: the hub answering {demo.answering:.1f} s after the launch, "
          f"Start to JupyterLab {spawn:.1f} s")
    core, pod = server_pod(demo.workdir, f"user-{user}")
    home = pod_home(demo.workdir / "kubelet", f"user-{user}", pod.metadata.name)
    results = walk(page, f"{url}/user/{user}", home)
    screenshot(page, "readme-walk-demo-kube-terminal")
    report("make demo-kube", results, time.monotonic() - started)
    assert [(c, code) for c, code, _ in results] == [(c, 0) for c, _, _ in results]
    assert job_state(page, f"{url}/user/{user}", f"user-{user}", "census_1") == "SUCCEEDED"
    # the server ran as carol's own uid, not root: another demo user's uid cannot enter its files,
    # and carol's reads neither the demo's admin kubeconfig nor the hub's state
    own = home.parent.stat()
    assert own.st_uid >= DEMO_UID_BASE and own.st_mode & 0o777 == 0o700, (own.st_uid, oct(own.st_mode))
    # and so did the jobs and trials it submitted (the kubelet runs a pod as its securityContext says;
    # Katib's suggestion service, a ReplicaSet's pod, runs Katib's code as its image's user)
    job_pods = core.list_namespaced_pod(f"user-{user}", label_selector="mlplatform.io/job").items
    ran = {p.metadata.name: (p.spec.security_context.run_as_user, p.spec.security_context.run_as_non_root)
           for p in job_pods if p.metadata.owner_references[0].kind != "ReplicaSet"}
    assert ran and set(ran.values()) == {(own.st_uid, True)}, ran
    # census_1 (one replica) ran as a Kubeflow Trainer v2 TrainJob: the demo's servers have
    # the default training_api auto, and the demo runs Trainer (a sweep's trials too: Katib's TrainJob trials)
    census = [p for p in job_pods if p.metadata.labels["mlplatform.io/job"] == "census-1"]
    assert census and {p.metadata.labels.get("jobset.sigs.k8s.io/jobset-name") for p in census} == {"census-1"}, \
        [p.metadata.labels for p in census]
    for uid, path in ((own.st_uid + 1, home), (own.st_uid, demo.workdir / "admin.kubeconfig"),
                      (own.st_uid, demo.workdir / "hub" / "jupyterhub.sqlite")):
        tried = subprocess.run(["setpriv", f"--reuid={uid}", "--regid=100", "--clear-groups", "--", "cat"
                                if path.is_file() else "ls", str(path)], capture_output=True, text=True)
        assert tried.returncode != 0 and "Permission denied" in tried.stderr, (uid, path, tried)
