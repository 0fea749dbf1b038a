"""`make demo-kube` as a user runs it, and a hyperparameter sweep through the hub and Chromium on the
Kubernetes runtime with real Katib (issue 15 items 3 and 5).

`python -m tests.harness.demo_kube` is started as a subprocess, as `make demo-kube` starts it: its
own control plane, process-mode kubelet with the declared GPU/MIG nodes, CoreDNS, the real Training
Operator and real Katib v0.19.0, and JupyterHub with PlatformSpawner. The test reads the login from
what it prints, and in Chromium alice logs in, spawns a CPU server in her personal project (a pod
the process-mode kubelet runs) and lands in JupyterLab. From the file browser's "Submit as training
job" on the example trainer she submits a sweep with the default algorithm and early stopping, as
the example's own ``hptuning_config.yaml`` asks (3 trials, 2 in parallel), and
the panel's sweep monitor shows it: its trials appear and finish, best first, and the job SUCCEEDED.

Nothing in that path is played: the JupyterLab server's jobs service (in the pod) creates the Katib
Experiment with the **notebook pod's own identity** — no kubeconfig of the hub's, no admin: the
kubelet writes a kubeconfig into the pod's home whose user is a ``tokenFile``, the pod's projected
ServiceAccount token, and the API server authenticates it as the project's ServiceAccount
(``system:serviceaccount:user-alice:<the pod's serviceAccountName>``), which the project's RBAC lets
create Experiments there and not in another project. Katib's skopt service
(``bayesianoptimization``) suggests, its medianstop service beside it (as the account Katib makes,
under the platform's project policies) gives the trials' collectors their stop rules,
the trials run as TrainJobs of the example trainer on real Kubeflow Trainer v2 (the demo's servers
have the default ``training_api: auto``; the package shipped in a ConfigMap, fetched by the runtime's init container),
the metrics collector Katib's pod mutator injects into each trial pod reports, and ``trainingOutput`` (best first
in the panel) is built from the real Experiment and Trials.

Then Ctrl-C (SIGINT to the launcher's process group, as a terminal sends it): it exits 0, leaving no
process, no address on ``lo`` and no mount.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import secrets
import signal
import subprocess
import sys
import time

import pytest
import requests
import yaml

from hub_ext.local.demo import free_port
from tests.browser.test_lab_panel import PANEL
from tests.conftest import ROOT
from tests.harness.browser import screenshot
from tests.harness.hub import related_processes
from tests.harness.notebook_ui import copy_trainer
from tests.kube.platform_env import pod_home

pytestmark = pytest.mark.browser

USER, PROJECT, JOB = "alice", "user-alice", "kube_sweep"
SWEEP = """goal: MINIMIZE
hyperparameterMetricTag: rmse
maxTrials: 3
maxParallelTrials: 2
enableTrialEarlyStopping: true
params:
- {parameterName: learning_rate, type: DOUBLE, minValue: 0.01, maxValue: 0.2}
"""
MARKER = "MLPLATFORM_DEMO_KUBE_TEST"


class Launcher:
    """`python -m tests.harness.demo_kube` as a user starts it, its output in a file."""

    def __init__(self, workdir: pathlib.Path):
        self.workdir, self.port = workdir, free_port()
        self.log = workdir.parent / "demo-kube.out"
        self.marker = f"{MARKER}={secrets.token_hex(8)}"
        env = {**os.environ, MARKER: self.marker.split("=", 1)[1]}
        self.started = time.monotonic()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.harness.demo_kube", "--port", str(self.port),
                                          "--workdir", str(workdir)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def login(self, timeout: float = 240) -> tuple[str, str]:
        """(URL, password) from the banner."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"URL:\s+(\S+)/hub/login\n.*?Password:\s+(\S+)", self.output(), re.S)
            if found:
                return found.group(1), found.group(2)
            assert self.proc.poll() is None, f"demo-kube exited ({self.proc.returncode}):\n{self.output()}"
            time.sleep(0.5)
        raise TimeoutError(f"demo-kube printed no login in {timeout} s:\n{self.output()}")

    def processes(self):
        return related_processes(self.proc.pid, self.proc.pid, self.marker.encode())

    def stop(self, timeout: float = 120) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)  # Ctrl-C in its terminal (SIGTERM: the same handler)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise


@pytest.fixture
def demo(tmp_path):
    launcher = Launcher(tmp_path / "demo")
    try:
        yield launcher
    finally:
        if launcher.proc.poll() is None:  # the test failed before its own stop
            try:
                launcher.stop()
            finally:
                print(f"--- demo-kube output ---\n{launcher.output()[-6000:]}")


def admin_api(workdir: pathlib.Path):
    import kubernetes

    return kubernetes.config.new_client_from_config(config_file=str(workdir / "admin.kubeconfig"))


def log_in(page, url: str, password: str, user: str = USER) -> None:
    """Log in on the hub's login page; the spawn form comes."""
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(r"/hub/spawn"), timeout=60_000)


def start_in_lab(page, user: str = USER) -> None:
    """Press the spawn form's Start and wait for JupyterLab."""
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(rf"/user/{user}/"), timeout=120_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)


def server_pod(workdir: pathlib.Path, project: str):
    """(a CoreV1Api as the demo's admin, the one notebook server pod in `project`)."""
    import kubernetes

    core = kubernetes.client.CoreV1Api(admin_api(workdir))
    (pod,) = [p for p in core.list_namespaced_pod(project).items
              if (p.metadata.labels or {}).get("component") == "singleuser-server"]
    return core, pod


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


def test_demo_kube_a_sweep_from_jupyterlab_on_real_katib(demo, browser_page, tmp_path):
    url, password = demo.login()
    if "sweeps: none" in demo.output():
        pytest.skip("no pod network/DNS here (not root, or `ip addr add` refused): the demo runs no Katib")
    page = browser_page
    log_in(page, url, password)
    page.get_by_label("CPU only").check()
    page.check(f"#project-{PROJECT}")
    start_in_lab(page)

    core, pod = server_pod(demo.workdir, PROJECT)
    api = core.api_client
    home = pod_home(demo.workdir / "kubelet", PROJECT, pod.metadata.name)
    copy_trainer(home)

    # the user's door: the server in the pod has no kubeconfig of ours, only its pod's token
    environ = server_environ(home)
    assert "KUBECONFIG" not in environ
    # the README's `cp -r $MLPLATFORM_EXAMPLES/trainer .` works in the pod
    assert (pathlib.Path(environ["MLPLATFORM_EXAMPLES"]) / "trainer" / "trainer" / "task.py").is_file()
    who, kube_user = pod_identity(home)
    assert list(kube_user) == ["tokenFile"]
    assert who == f"system:serviceaccount:{PROJECT}:{pod.spec.service_account_name}", who
    assert may(api, who, "create", PROJECT) and not may(api, who, "create", "vision")

    page.goto(f"{url}/user/{USER}/lab/tree/trainer/trainer")
    item = page.locator('.jp-DirListing-item[title*="task.py"], .jp-DirListing-item:has-text("task.py")').first
    item.wait_for(timeout=120_000)
    item.click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text="Submit as training job").click()
    form = page.locator(".mlp-submit-form")
    form.wait_for()
    form.locator(".mlp-field-accelerator option").first.wait_for(state="attached")  # the server's choices came
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
    (experiment,) = custom(api, "experiments", PROJECT)
    assert experiment["spec"]["algorithm"]["algorithmName"] == "bayesianoptimization"
    assert experiment["spec"]["earlyStopping"]["algorithmName"] == "medianstop"
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in experiment["status"]["conditions"])
    katib_trials = custom(api, "trials", PROJECT)
    kinds = [t["spec"]["runSpec"]["kind"] for t in katib_trials]
    # the demo's servers have the default training_api: auto and the demo runs Trainer v2: Katib's TrainJob trials
    # (the single-replica TensorFlow job of AI Platform's default framework, on the platform's runtime)
    assert kinds == ["TrainJob"] * 3, kinds
    trial_pods = [p for p in core.list_namespaced_pod(PROJECT).items
                  if (p.metadata.labels or {}).get("katib.kubeflow.org/trial")]
    assert len(trial_pods) == 3 and all(  # each ran with the collector Katib's pod mutator injected
        "metrics-logger-and-collector" in [c.name for c in p.spec.containers] for p in trial_pods), trial_pods
    observed = sorted(float(next(m["latest"] for m in t["status"]["observation"]["metrics"] if m["name"] == "rmse"))
                      for t in katib_trials)
    job = page.request.get(f"{url}/user/{USER}/ml/v1/projects/{PROJECT}/jobs/{JOB}").json()
    out = job["trainingOutput"]
    assert job["state"] == "SUCCEEDED" and out["completedTrialCount"] == "3", json.dumps(job)
    assert sorted(t["finalMetric"]["objectiveValue"] for t in out["trials"]) == observed
    assert metric == [pytest.approx(v, rel=1e-3) for v in observed]

    # Ctrl-C: everything goes
    processes = demo.processes()
    corefile = (demo.workdir / "cluster" / "network" / "Corefile").read_text()
    pod_address = re.search(r"bind (\S+)", corefile).group(1)
    started = time.monotonic()
    assert demo.stop() == 0, demo.output()
    stopped_in = time.monotonic() - started
    time.sleep(1)
    left = [p for p in processes if p.alive()] + [p for p in demo.processes() if p.alive()]
    assert not left, "\n".join(f"{p.pid}: {p.cmdline}" for p in left)
    lo = subprocess.run(["ip", "addr", "show", "lo"], capture_output=True, text=True).stdout
    assert f"inet {pod_address}/" not in lo
    assert str(demo.workdir) not in pathlib.Path("/proc/self/mountinfo").read_text()
    assert "demo-kube: stopped" in demo.output() and stopped_in < 90, (stopped_in, demo.output()[-2000:])
