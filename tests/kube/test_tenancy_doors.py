"""Issue 16's report, the cells no other test proves: each door a user has into a project, tried
with each way out of it, on the real control plane with real identities. The whole table (which
test proves which cell) is in docs/tenancy.md, "What holds, door by door".

The hub provisions (as ``system:serviceaccount:jhub:hub``) the team project ``vision`` (MIG
``1g.5gb`` only) and ``user-bob`` (one A100) for bob, and ``user-alice`` for alice; bob's own
identity ``oidc:bob`` is bound in his projects (``member_identity_template``). Then:

- the notebook server's REST API (a real ``jupyter server`` on the Kubernetes backend, talking to
  the cluster with ``vision``'s runner token, as the notebook pod does): a native Katib Experiment
  whose trial template escapes (privileged, ``hostPath /``, ``hostPID``, another ServiceAccount, a
  teammate's hub token, ``NVIDIA_VISIBLE_DEVICES``) is refused naming the field and nothing is
  made; another project, through the URL or the Experiment's ``metadata.namespace``, is refused;
- ``kubectl ai-platform`` as bob's own identity: the same trial templates refused early; a project
  he is not a member of (``--project user-alice``), and one his runner token does not reach,
  refused by RBAC with ``PERMISSION_DENIED`` and nothing made; an accelerator type his team may
  not use refused naming the field;
- native Experiments created directly with the runner token: accepted (members may create them),
  but their trials' pods never appear (admission refuses the Job controller's pods; FailedCreate
  says why; for ``hostPID`` pod validation refuses first, because Katib's pod mutator adds
  ``shareProcessNamespace`` for its collector), while a clean trial's does. Katib is real
  (`real_katib`: its webhooks admit the Experiments, goptuna's `random` suggests, its trial
  controller creates each trial's batch Job);
- the hub API and the spawn form on a real hub on Kubernetes (hub tier): a user's token reads,
  adds and deletes no one else's projects or credentials (404), a project the user is not in is
  refused (403), reserved credential names are refused (400), a teammate's credential is not the
  user's to delete (403), two usernames that share their first 58 characters get two projects, and
  crafted ``user_options`` (another project, another accelerator type, an unknown key, a hub token
  as a credential) start nothing.

Every attempt is recorded in `ATTEMPTS` as (door, attempt); the module prints the counts.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import json
import os
import sysconfig

import pytest
import requests
import yaml

from tests.cluster.identities import service_account_kubeconfig
from tests.cluster.rest import ApiError, Rest
from tests.kube.platform_env import make_spawner, make_user, platform_cluster, until
from tests.kube.test_widget_watches import KubeNotebookServer

RUNNER = "mlplatform-runner"
MEMBERS = {"member_identity_template": "oidc:{username}"}
PLUGIN = os.path.join(sysconfig.get_path("scripts"), "kubectl-ai_platform")
ATTEMPTS: list[tuple[str, str]] = []  # (door, attempt) of every escape tried, for the report
POD = "spec.trialTemplate.trialSpec.spec.template.spec"


def tried(door: str, attempt: str) -> None:
    ATTEMPTS.append((door, attempt))


@pytest.fixture(scope="module", autouse=True)
def _count(request):
    yield
    counts = collections.Counter(ATTEMPTS)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter and capture and counts:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n{__name__}: {len(ATTEMPTS)} attempts, 0 escapes")
            for (door, attempt), n in sorted(counts.items()):
                reporter.write_line(f"  {door} × {attempt}: {n}")


def container(**extra) -> dict:
    # Katib's webhook refuses a trial parameter the template does not use
    return {"name": "trainer", "image": "python:3.11-slim", "command": ["echo", "units=${trialParameters.units}"],
            **extra}


# attempt → (its class in the report's table, the trial pod spec's change, the field named)
TEMPLATE_ESCAPES = {
    "privileged": ("privileged pod", {"containers": [container(securityContext={"privileged": True})]},
                   f"{POD}.containers[0].securityContext.privileged"),
    "hostPath /": ("privileged pod", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
                   f"{POD}.volumes[0].hostPath"),
    "hostPID": ("privileged pod", {"hostPID": True}, f"{POD}.hostPID"),
    "other ServiceAccount": ("privileged pod", {"serviceAccountName": "default"}, f"{POD}.serviceAccountName"),
    "a teammate's hub token": ("other member's credential",
                               {"volumes": [{"name": "t", "secret": {"secretName": "jupyter-alice-hub-token"}}]},
                               f"{POD}.volumes[0].secret.secretName"),
    "mlplatform- Secret": ("reserved name", {"containers": [container(env=[{"name": "K", "valueFrom": {
        "secretKeyRef": {"name": "mlplatform-operator-tls", "key": "k"}}}])]},
                           f"{POD}.containers[0].env[0].valueFrom.secretKeyRef.name"),
    "NVIDIA_VISIBLE_DEVICES": ("other accelerator type",
                               {"containers": [container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]},
                               f"{POD}.containers[0].env[0].name"),
}


def experiment(name: str, pod: dict | None = None) -> dict:
    """A native Katib Experiment of one batch Job trial whose pod spec is the clean one changed by `pod`."""
    spec = {"restartPolicy": "Never", "serviceAccountName": RUNNER, "containers": [container()], **(pod or {})}
    return {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "metadata": {"name": name},
            "spec": {"objective": {"type": "minimize", "objectiveMetricName": "loss"},
                     "algorithm": {"algorithmName": "random"}, "parallelTrialCount": 1, "maxTrialCount": 1,
                     "parameters": [{"name": "units", "parameterType": "int",
                                     "feasibleSpace": {"min": "16", "max": "32"}}],
                     "trialTemplate": {"primaryContainerName": "trainer", "retain": True,  # keep its Job
                                       "trialParameters": [{"name": "units", "reference": "units"}],
                                       "trialSpec": {"apiVersion": "batch/v1", "kind": "Job",
                                                     "spec": {"backoffLimit": 0, "template": {"spec": spec}}}}}}


def escaping(name: str, attempt: str) -> dict:
    return experiment(name, copy.deepcopy(TEMPLATE_ESCAPES[attempt][1]))


@pytest.fixture
async def projects(kube_cluster, tmp_path, monkeypatch):
    """vision and user-bob (bob a member of both, by his own identity too) and user-alice."""
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch):
        await make_spawner(make_user("bob", ["vision", "research"], uid=2), **MEMBERS).provision()
        await make_spawner(make_user("alice", [], uid=1), **MEMBERS).provision()
        yield kube_cluster


@pytest.fixture
async def projects_with_pods(kube_cluster, tmp_path, monkeypatch, real_katib):
    """`projects` with a process kubelet (Katib's suggestion pods really serve) and real Katib."""
    async with platform_cluster(kube_cluster, tmp_path, monkeypatch, mode="process"):
        await make_spawner(make_user("bob", ["vision", "research"], uid=2), **MEMBERS).provision()
        await make_spawner(make_user("alice", [], uid=1), **MEMBERS).provision()
        yield kube_cluster


def runner_kubeconfig(cluster, tmp_path, ns: str = "vision"):
    return service_account_kubeconfig(cluster, tmp_path / f"runner-{ns}.kubeconfig", ns, RUNNER)


async def member_kubeconfig(cluster, tmp_path, user: str):
    """`user`'s own identity ``oidc:<user>``; once the authorizer has their binding in vision."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": f"oidc:{user}", "groups": ["system:authenticated"], "resourceAttributes": {
            "namespace": "vision", "verb": "create", "group": "kubeflow.org", "resource": "experiments"}}}

    async def bound():
        return cluster.create("authorization.k8s.io", "v1", "subjectaccessreviews", None, review)["status"].get("allowed")
    await until(bound, f"{user}'s binding in vision is seen by the authorizer")
    return cluster.write_kubeconfig(tmp_path / f"{user}.kubeconfig", "vision", user=f"oidc:{user}", groups=())


def made(cluster, ns: str) -> dict[str, list[str]]:
    """Names of the Experiments and batch Jobs in `ns`."""
    return {"experiments": [o["metadata"]["name"] for o in cluster.items("kubeflow.org", "v1beta1", "experiments", ns)],
            "jobs": [o["metadata"]["name"] for o in cluster.items("batch", "v1", "jobs", ns)]}


NOTHING = {"experiments": [], "jobs": []}


@pytest.mark.kube
async def test_the_rest_api_refuses_escaping_trial_templates_and_other_projects(projects, tmp_path):
    server = KubeNotebookServer(tmp_path / "server", str(runner_kubeconfig(projects, tmp_path)), "vision")
    await asyncio.to_thread(server.start)
    try:
        def call(method: str, project: str, doc: dict | None = None, path: str = "jobs") -> requests.Response:
            return server.api(method, f"ml/v1/projects/{project}/{path}",
                              **({"data": json.dumps(doc)} if doc is not None else {}))

        for i, (attempt, (kind, _, field)) in enumerate(TEMPLATE_ESCAPES.items()):
            answer = await asyncio.to_thread(call, "POST", "vision", escaping(f"escape-{i}", attempt))
            tried("native Experiment via REST", kind)
            assert answer.status_code == 400, (attempt, answer.text)
            error = answer.json()["error"]
            assert error["details"][0]["fieldViolations"][0]["field"] == field, (attempt, error)
        assert made(projects, "vision") == NOTHING  # refused before anything was created

        for method, doc, path in (("POST", experiment("elsewhere"), "jobs"), ("GET", None, "jobs"),
                                  ("GET", None, "jobs/elsewhere"), ("POST", None, "jobs/elsewhere:cancel")):
            answer = await asyncio.to_thread(call, method, "user-bob", doc, path)
            tried("REST", "other project")
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "project"
        doc = experiment("moved")
        doc["metadata"]["namespace"] = "user-bob"  # the URL's project is vision; the object says otherwise
        answer = await asyncio.to_thread(call, "POST", "vision", doc)
        tried("native Experiment via REST", "other project")
        assert answer.status_code == 400 and "metadata.namespace" in answer.text, answer.text
        assert made(projects, "user-bob") == made(projects, "vision") == NOTHING

        assert (await asyncio.to_thread(call, "POST", "vision", experiment("clean"))).status_code == 200
        assert made(projects, "vision")["experiments"] == ["clean"]  # the door works: the refusals were ours
    finally:
        await asyncio.to_thread(server.stop)


async def cli(kubeconfig, *argv: str) -> tuple[int, str, str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "JUPYTERHUB_USER": "bob", "MLPLATFORM_CONFIG": os.devnull,
           "PYTHONWARNINGS": "ignore"}
    for name in ("MLPLATFORM_LOCAL", "MLPLATFORM_SERVER_URL", "JUPYTERHUB_SERVICE_URL", "JUPYTER_SERVER_URL",
                 "MLPLATFORM_PROJECT"):
        env.pop(name, None)
    proc = await asyncio.create_subprocess_exec(PLUGIN, *argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode, out.decode(), err.decode()


SUBMIT = ("jobs", "submit", "training")
# RBAC's refusal, as the CLI passes it on (see test_the_cli_calls_an_rbac_refusal_permission_denied)
REFUSED = ('PERMISSION_DENIED: your Kubernetes identity may not use the project \'{ns}\' (Kubernetes answered 403 '
           'Forbidden: configmaps "mlplatform-catalog" is forbidden: User "{who}" cannot get resource "configmaps"')
CODE = ("--module-name", "trainer.task", "--packages", "gs://bucket/trainer.tar.gz", "--runtime-version",
        "pytorch-2.3", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4")


@pytest.mark.kube
async def test_kubectl_ai_platform_refuses_escaping_templates_other_projects_and_types(projects, tmp_path):
    bob = await member_kubeconfig(projects, tmp_path, "bob")
    for i, attempt in enumerate(("privileged", "hostPath /", "a teammate's hub token", "mlplatform- Secret")):
        config = tmp_path / f"experiment-{i}.yaml"
        config.write_text(yaml.safe_dump(escaping(f"escape-{i}", attempt)))
        code, out, err = await cli(bob, *SUBMIT, f"escape_{i}", "--config", str(config), "--project", "vision")
        tried("native Experiment via CLI", TEMPLATE_ESCAPES[attempt][0])
        assert (code, out) == (2, "") and f"Invalid value for [{TEMPLATE_ESCAPES[attempt][2]}]" in err, err

    # a project bob is not a member of: his own identity has no binding there (RBAC, 403)
    for argv in ((*SUBMIT, "stray", *CODE), ("jobs", "list"), ("jobs", "describe", "stray"),
                 ("jobs", "cancel", "stray")):
        code, out, err = await cli(bob, *argv, "--project", "user-alice")
        tried("CLI", "other project")
        assert (code, out) == (1, "") and REFUSED.format(who="oidc:bob", ns="user-alice") in err, (argv, err)
    # vision's runner token (a vision notebook's terminal) reaches no other project either
    code, out, err = await cli(runner_kubeconfig(projects, tmp_path), *SUBMIT, "stray", *CODE, "--project", "user-bob")
    tried("CLI", "other project")
    assert (code, out) == (1, "") and REFUSED.format(who=f"system:serviceaccount:vision:{RUNNER}", ns="user-bob") in err, err
    assert made(projects, "user-alice") == made(projects, "user-bob") == NOTHING

    # vision may use MIG 1g.5gb slices only (its published limits): not an A100, not a 3g.20gb slice
    for gpu in ("nvidia-tesla-a100", "nvidia-a100-3g-20gb"):
        code, out, err = await cli(bob, *SUBMIT, "big_gpu", *CODE, "--master-accelerator", f"type={gpu},count=1",
                                   "--project", "vision")
        tried("CLI", "other accelerator type")
        assert (code, out) == (1, "") and "PERMISSION_DENIED: project 'vision' may use none of" in err, err
    assert made(projects, "vision") == NOTHING
    code, out, err = await cli(bob, *SUBMIT, "slice", *CODE, "--master-accelerator",
                               "type=nvidia-a100-1g-5gb,count=1", "--project", "vision")
    assert code == 0, err  # the control: what the project may use is made


@pytest.mark.kube
async def test_the_cli_calls_an_rbac_refusal_permission_denied(kube_cluster, kube_target, tmp_path):
    ns = kube_target.namespace
    stranger = kube_cluster.write_kubeconfig(tmp_path / "carol.kubeconfig", ns, user="oidc:carol", groups=())
    code, out, err = await cli(stranger, "jobs", "list", "--project", ns)
    tried("CLI", "other project")
    assert (code, out) == (1, "") and REFUSED.format(who="oidc:carol", ns=ns) in err, err  # what holds
    assert "PERMISSION_DENIED" in err and "no published catalogue" not in err, err


async def failed_creates(cluster, ns: str, name: str) -> list[str]:
    return [e.get("message") or "" for e in cluster.items("", "v1", "events", ns)
            if e.get("reason") == "FailedCreate" and e["involvedObject"]["name"] == name]


@pytest.mark.kube
async def test_experiments_made_with_the_runner_token_get_no_escaping_trial_pod(projects_with_pods, tmp_path):
    """Past the platform's code: the project's token creates the Experiments itself; real Katib
    makes their trial Jobs (as its own ServiceAccount, not with our rights)."""
    projects = projects_with_pods
    cases = {"clean": ("control", {}, ""),
             **{a: (kind, pod, "") for a, (kind, pod, _) in TEMPLATE_ESCAPES.items()},
             "whole GPU": ("other accelerator type", {
                 "containers": [container(resources={"limits": {"nvidia.com/gpu": "1"}})],
                 "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, "")}
    words = {"privileged": "privileged", "hostPath /": "hostPath",
             # Katib's pod mutator adds shareProcessNamespace (its collector): validation refuses it first
             "hostPID": "ShareProcessNamespace and HostPID cannot both be enabled",
             "other ServiceAccount": "ServiceAccount mlplatform-runner",
             "a teammate's hub token": "platform-reserved Secret", "mlplatform- Secret": "platform-reserved Secret",
             "NVIDIA_VISIBLE_DEVICES": "NVIDIA_VISIBLE_DEVICES",
             "whole GPU": "may not use this accelerator"}
    runner = Rest(runner_kubeconfig(projects, tmp_path))
    names = {}
    try:
        for i, (attempt, (kind, pod, _)) in enumerate(cases.items()):
            names[attempt] = f"direct-{i}"
            await runner.post("/apis/kubeflow.org/v1beta1/namespaces/vision/experiments",
                              experiment(names[attempt], copy.deepcopy(pod)))  # RBAC lets members create them
            if attempt != "clean":
                tried("plain Kubernetes (native Experiment)", kind)

        def trial_of(experiment_name: str) -> str | None:
            found = projects.items("kubeflow.org", "v1beta1", "trials", "vision",
                                   labelSelector=f"katib.kubeflow.org/experiment={experiment_name}")
            return found[0]["metadata"]["name"] if found else None

        async def every_trial_job_made():
            return all(trial_of(n) and projects.get("batch", "v1", "jobs", "vision", trial_of(n)) for n in names.values())
        await until(every_trial_job_made, "Katib made each Experiment's trial Job", timeout=60)
        trials = {a: trial_of(n) for a, n in names.items()}

        async def all_refused():
            return all([await failed_creates(projects, "vision", t) for a, t in trials.items() if a != "clean"])
        await until(all_refused, "the Job controller's pods refused", timeout=60)
        for attempt, trial in trials.items():
            if attempt != "clean":
                messages = await failed_creates(projects, "vision", trial)
                assert all(words[attempt] in m for m in messages), (attempt, messages)

        def pod_jobs() -> set[str]:
            return {p["metadata"]["labels"].get("batch.kubernetes.io/job-name")
                    for p in projects.items("", "v1", "pods", "vision")}
        async def clean_pod():
            return trials["clean"] in pod_jobs()
        await until(clean_pod, "the clean trial's pod")
        assert pod_jobs() & {t for a, t in trials.items() if a != "clean"} == set()
    finally:
        await runner.close()
        # the Experiments and their pods (Katib's suggestion Deployments) go while Katib and the kubelet
        # run: else the ReplicaSets remake the pods the stopping kubelet deletes, bound to a node about
        # to go, and the project's deletion waits ~40 s for the pod garbage collector
        for name in names.values():
            projects.delete("kubeflow.org", "v1beta1", "experiments", "vision", name)

        async def gone():
            return not projects.items("kubeflow.org", "v1beta1", "experiments", "vision") and \
                not projects.items("", "v1", "pods", "vision")
        await until(gone, "the Experiments and their pods deleted", timeout=30)


STATUS = "/apis/kubeflow.org/v1beta1/namespaces/vision/{}/{}/status"


def long_experiment(name: str, **annotations: str) -> dict:
    """A native Experiment whose one trial at a time runs until stopped (three at most)."""
    doc = experiment(name, {"containers": [container(command=["sh", "-c", "sleep 600 # ${trialParameters.units}"])]})
    doc["spec"].update(maxTrialCount=3, parallelTrialCount=1)
    if annotations:
        doc["metadata"]["annotations"] = annotations
    return doc


def ended_as_cancelled(obj: dict, end: str = "Failed", why: str = "ExperimentCancelled", **extra) -> dict:
    """The status patch a cancel writes (server_ext.runtimes.kube.sweeps), on `obj`'s conditions, plus `extra`."""
    when = "2026-12-05T00:00:00Z"
    conditions = [{**c, "status": "False"} if c["type"] == "Running" else c for c in obj["status"]["conditions"]]
    conditions.append({"type": end, "status": "True", "reason": why, "message": "cancelled",
                       "lastUpdateTime": when, "lastTransitionTime": when})
    return {"status": {"conditions": conditions, "completionTime": when, **extra}}


async def forged(rest: Rest, plural: str, name: str, body: dict, words: str) -> None:
    tried("plain Kubernetes (sweep status)", "forged sweep result or restart")
    with pytest.raises(ApiError) as e:
        await rest.patch(STATUS.format(plural, name), body)
    assert e.value.status == 403 and words in str(e.value), str(e.value)


@pytest.mark.kube
async def test_members_end_a_sweep_only_by_cancelling_it(projects_with_pods, tmp_path):
    """Katib has no stop for an Experiment, so the platform's cancel ends it, and its running Trials,
    through their status, which members may therefore patch (the project Role); the
    ValidatingAdmissionPolicy mlplatform-sweep-cancel holds them to exactly that. Through the REST
    door (the runner token, as the notebook's server acts) a running native sweep is cancelled:
    CANCELLED, its trial Killed and its job gone, the suggestion gone, and real Katib neither makes
    another trial nor takes the Experiment up again. Directly with the runner token and with bob's
    own identity: a result (Succeeded, a best trial, trial counts, a trial's observation) or a
    restart (the Failed condition removed) cannot be forged, on the cancelled sweep or on a running
    one marked for cancel; the cancel's own patches are admitted."""
    projects = projects_with_pods
    server = KubeNotebookServer(tmp_path / "server", str(runner_kubeconfig(projects, tmp_path)), "vision")
    runner = Rest(runner_kubeconfig(projects, tmp_path))
    bob = Rest(await member_kubeconfig(projects, tmp_path, "bob"))
    await asyncio.to_thread(server.start)

    def trials(name: str) -> list[dict]:
        return projects.items("kubeflow.org", "v1beta1", "trials", "vision",
                              labelSelector=f"katib.kubeflow.org/experiment={name}")

    async def running(name: str):
        obj = projects.get("kubeflow.org", "v1beta1", "experiments", "vision", name) or {}
        conds = {c["type"] for c in (obj.get("status") or {}).get("conditions") or [] if c["status"] == "True"}
        found = [t for t in trials(name) if any(c["type"] == "Running" and c["status"] == "True"
                                                for c in (t.get("status") or {}).get("conditions") or [])]
        return (obj, found[0]) if "Running" in conds and found else None
    best = {"currentOptimalTrial": {"bestTrialName": "forged", "observation": {"metrics": [
        {"name": "loss", "latest": "0.0", "min": "0.0", "max": "0.0"}]}}}
    try:
        answer = await asyncio.to_thread(server.api, "POST", "ml/v1/projects/vision/jobs",
                                         data=json.dumps(long_experiment("to-cancel")))
        assert answer.status_code == 200, answer.text
        obj, trial = await until(lambda: running("to-cancel"), "Katib runs the sweep's first trial", timeout=90)
        # before any cancel: no change at all, not even the cancel's (the Experiment is not marked)
        await forged(runner, "experiments", "to-cancel", ended_as_cancelled(obj), "only to cancel it")
        await forged(runner, "trials", trial["metadata"]["name"], ended_as_cancelled(
            trial, "Succeeded", "TrialSucceeded"), "may only end it as cancelled")
        await forged(bob, "trials", trial["metadata"]["name"], ended_as_cancelled(
            trial, "Killed", "TrialCancelled", observation={"metrics": [{"name": "loss", "latest": "0.0"}]}),
            "may only end it as cancelled")

        answer = await asyncio.to_thread(server.api, "POST", "ml/v1/projects/vision/jobs/to_cancel:cancel")
        assert answer.status_code == 200, answer.text

        async def stopped():
            return not projects.items("batch", "v1", "jobs", "vision") and \
                not projects.items("apps", "v1", "deployments", "vision")
        await until(stopped, "the running trial's job and the suggestion service gone", timeout=60)
        ended = projects.get("kubeflow.org", "v1beta1", "experiments", "vision", "to-cancel")
        restart = {"status": {"conditions": [c for c in ended["status"]["conditions"] if c["type"] != "Failed"]}}
        killed = trials("to-cancel")[0]
        for rest in (runner, bob):
            await forged(rest, "experiments", "to-cancel", restart, "only to cancel it")
            await forged(rest, "experiments", "to-cancel", {"status": best}, "only to cancel it")
            await forged(rest, "trials", killed["metadata"]["name"], {"status": {"conditions": [
                c for c in killed["status"]["conditions"] if c["type"] != "Killed"]}}, "only to cancel it")
        await asyncio.sleep(3)  # Katib had every chance to make a trial or restart the Experiment
        assert [t["metadata"]["name"] for t in trials("to-cancel")] == [trial["metadata"]["name"]]
        answer = await asyncio.to_thread(server.api, "GET", "ml/v1/projects/vision/jobs/to_cancel")
        assert answer.json()["state"] == "CANCELLED" and \
            [t["state"] for t in answer.json()["trainingOutput"]["trials"]] == ["CANCELLED"], answer.text

        # a running Experiment marked for cancel: only the cancel's own change passes
        await runner.post("/apis/kubeflow.org/v1beta1/namespaces/vision/experiments",
                          long_experiment("marked", **{"mlplatform.io/cancel-requested": "2026-12-05T00:00:00Z"}))
        obj, trial = await until(lambda: running("marked"), "Katib runs the marked Experiment's trial", timeout=90)
        await forged(bob, "experiments", "marked", ended_as_cancelled(obj, "Succeeded", "ExperimentMaxTrialsReached"),
                     "may only end it as cancelled")
        await forged(runner, "experiments", "marked", ended_as_cancelled(obj, **best), "may only end it as cancelled")
        await forged(runner, "experiments", "marked", ended_as_cancelled(obj, trialsSucceeded=3),
                     "may only end it as cancelled")
        done = await bob.patch(STATUS.format("experiments", "marked"), ended_as_cancelled(obj))
        assert {c["type"] for c in done["status"]["conditions"] if c["status"] == "True"} >= {"Failed"}
        done = await runner.patch(STATUS.format("trials", trial["metadata"]["name"]),
                                  ended_as_cancelled(trial, "Killed", "TrialCancelled"))
        assert {c["type"] for c in done["status"]["conditions"] if c["status"] == "True"} >= {"Killed"}
    finally:
        await asyncio.to_thread(server.stop)
        await runner.close()
        await bob.close()
        for name in ("to-cancel", "marked"):
            projects.delete("kubeflow.org", "v1beta1", "experiments", "vision", name)

        async def gone():
            return not projects.items("kubeflow.org", "v1beta1", "experiments", "vision") and \
                not projects.items("", "v1", "pods", "vision")
        await until(gone, "the Experiments and their pods deleted", timeout=30)


# ---- the hub API and the spawn form, on a real hub on Kubernetes ---------------------------------------
LONG = "a" * 58


@pytest.mark.hub
def test_the_hub_api_and_spawn_form_keep_each_user_to_their_own(kube_cluster, hub_factory, tmp_path):
    from hub_ext.local.demo import DemoSecrets
    from hub_ext.manifests.tenancy import OWNER_ANNOTATION
    from tests.cluster.identities import hub_kubeconfig
    from tests.hub.test_kube_platform import call, token_for
    from tests.kube.platform_env import GCP_KEY, delete_projects, kube_hub_config

    hub = hub_factory(kube_hub_config(tmp_path / "state", DemoSecrets.generate(), **MEMBERS),
                      env={"KUBECONFIG": str(hub_kubeconfig(kube_cluster, tmp_path / "hub.kubeconfig"))})
    try:
        tokens = {u: token_for(hub, u) for u in ("alice", "bob", "carol", f"{LONG}-one", f"{LONG}-two")}
        assert hub.api("POST", "/groups/vision/users", json={"users": ["carol"]}).status_code == 200
        base = "/mlplatform/users"
        cred = {"name": "training-sa", "type": "gcp-credential", "key_json": GCP_KEY}
        r = call(hub, "POST", f"{base}/alice/projects/vision/credentials", tokens["alice"], json=cred)
        assert r.status_code == 201, r.text
        secret = ("", "v1", "secrets", "vision", "training-sa")

        # bob's token: nothing of alice's, read or written (404, as JupyterHub answers for others)
        for method, path, body in (("GET", "alice/projects", None), ("GET", "alice/credentials", None),
                                   ("GET", "alice/datasets", None), ("GET", "alice/catalog", None),
                                   ("POST", "alice/projects/vision/credentials", {**cred, "name": "mine"}),
                                   ("DELETE", "alice/projects/vision/credentials/training-sa", None)):
            r = call(hub, method, f"{base}/{path}", tokens["bob"], **({"json": body} if body else {}))
            tried("hub API", "other member's credential" if "credentials" in path else "other project")
            assert r.status_code == 404, (method, path, r.text)
        # bob for himself, in alice's team project: not his (403 naming the project)
        for method, path, body in (("POST", "bob/projects/vision/credentials", {**cred, "name": "mine"}),
                                   ("DELETE", "bob/projects/vision/credentials/training-sa", None),
                                   ("POST", "bob/projects/user-alice/credentials", {**cred, "name": "mine"})):
            r = call(hub, method, f"{base}/{path}", tokens["bob"], **({"json": body} if body else {}))
            tried("hub API", "other project")
            assert r.status_code == 403 and r.json()["message"].startswith("project:"), (path, r.text)
        # carol, alice's teammate, may mount the team's credential (test_project_ownership) but not delete alice's
        r = call(hub, "DELETE", f"{base}/carol/projects/vision/credentials/training-sa", tokens["carol"])
        tried("hub API", "other member's credential")
        assert r.status_code == 403 and "only its creator alice" in r.json()["message"], r.text
        assert kube_cluster.get(*secret) is not None
        for name in ("jupyter-bob-hub-token", "mlplatform-catalog", "x-hub-token"):
            r = call(hub, "POST", f"{base}/alice/projects/vision/credentials", tokens["alice"], json={**cred, "name": name})
            tried("hub API", "reserved name")
            assert r.status_code == 400 and r.json()["message"].startswith("name:"), (name, r.text)
            assert kube_cluster.get("", "v1", "secrets", "vision", name) is None

        # two usernames that share their first 58 characters: two projects, each its owner's
        found = {}
        for user in (f"{LONG}-one", f"{LONG}-two"):
            (found[user],) = [p["name"] for p in call(hub, "GET", f"{base}/{user}/projects", tokens[user]).json()["projects"]]
            r = call(hub, "POST", f"{base}/{user}/projects/{found[user]}/credentials", tokens[user], json=cred)
            tried("hub API", "colliding names")
            assert r.status_code == 201, r.text
            owner = kube_cluster.get("", "v1", "namespaces", None, found[user])["metadata"]["annotations"]
            assert owner[OWNER_ANNOTATION] == f"user:{user}"
        assert found[f"{LONG}-one"] != found[f"{LONG}-two"]
        r = call(hub, "GET", f"{base}/{LONG}-one/credentials", tokens[f"{LONG}-two"])
        tried("hub API", "colliding names")
        assert r.status_code == 404

        # the spawn form's user_options, as JupyterHub passes them: nothing starts
        for options, status, field, attempt in (
                ({"project": "user-bob", "profile": "cpu"}, 403, "project", "other project"),
                ({"project": "vision", "profile": "gpu"}, 403, "profile", "other accelerator type"),
                ({"project": "vision", "profile": "mig-3g"}, 403, "profile", "other accelerator type"),
                ({"profile": "cpu", "privileged": True}, 400, "privileged", "privileged pod"),
                ({"profile": "cpu", "extra_pod_config": {"hostPID": True}}, 400, "extra_pod_config", "privileged pod"),
                ({"project": "vision", "profile": "cpu", "credentials": ["jupyter-bob-hub-token"]}, 403,
                 "credentials[0]", "reserved name")):
            r = hub.api("POST", "/users/alice/server", json=options)
            tried("spawn form", attempt)
            assert r.status_code == status and field in r.json()["message"], (options, r.text)
        assert hub.api("GET", "/users/alice").json()["servers"] == {}
        for ns in ("vision", "user-bob"):
            assert kube_cluster.items("", "v1", "pods", ns) == []

        # carol leaves the team: after a reconcile round no door of hers reaches vision
        r = call(hub, "POST", f"{base}/carol/projects/vision/credentials", tokens["carol"], json={**cred, "name": "c-sa"})
        assert r.status_code == 201, r.text  # her spawner provisioned vision for her: her binding is there
        carol = asyncio.run(member_kubeconfig(kube_cluster, tmp_path, "carol"))
        code, _, err = asyncio.run(cli(carol, "jobs", "list", "--project", "vision"))
        assert code == 0, err  # the control: her own identity works while she is a member
        assert hub.api("DELETE", "/groups/vision/users", json={"users": ["carol"]}).status_code == 200
        assert hub.api("POST", "/mlplatform/reconcile").json()["removed_bindings"] == ["vision/mlplatform-member-carol"]
        for method, path, body in (("POST", "carol/projects/vision/credentials", {**cred, "name": "c-sa2"}),
                                   ("DELETE", "carol/projects/vision/credentials/c-sa", None)):
            r = call(hub, method, f"{base}/{path}", tokens["carol"], **({"json": body} if body else {}))
            tried("hub API", "removed member")
            assert r.status_code == 403 and r.json()["message"].startswith("project:"), r.text
        assert "vision" not in call(hub, "GET", f"{base}/carol/projects", tokens["carol"]).text
        r = hub.api("POST", "/users/carol/server", json={"project": "vision", "profile": "cpu"})
        tried("spawn form", "removed member")
        assert r.status_code == 403 and "project" in r.json()["message"], r.text
        for argv in (("jobs", "list"), (*SUBMIT, "after_leaving", *CODE)):
            code, out, err = asyncio.run(cli(carol, *argv, "--project", "vision"))
            tried("CLI", "removed member")
            assert (code, out) == (1, "") and REFUSED.format(who="oidc:carol", ns="vision") in err, err
        assert made(kube_cluster, "vision") == NOTHING
    finally:
        hub.stop()
        delete_projects(kube_cluster)
