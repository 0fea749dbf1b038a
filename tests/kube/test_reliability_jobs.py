"""Job submissions survive a hostile Kubernetes API, on the real control plane.

34 submit attempts (30 job ids: PyTorchJobs, TFJobs and single-replica batch/v1 Jobs, some shipping
their package in a ConfigMap; 4 ids submitted twice at once, 2 of them as another kind) go through
`KubeBackend.submit` in three concurrent waves while the fault proxy fails about one request in ten
(409, 429, 503, 500, slow 500s and hangs the client times out, on job creates, package ConfigMap
creates, the clean-up DELETEs, a list and watch resumes) and, mid-wave, cuts every watch cleanly,
expires every watch (410 Gone on resume) and drops every watch abruptly. The faults are count-limited
and named per wave; the kinds' order, which job ids ship a package and which are submitted twice come
from `random.Random(SEED)`. Which of the concurrent requests draws a fault varies from run to run and
does not matter to what is checked:

- 0 lost: every submit that reported success exists on the server exactly once (its kind, not being
  deleted, its package ConfigMap owned by it), and is read back by `get` at once; every submit that
  reported failure left nothing behind (no job object of any kind, no package ConfigMap);
- 0 duplicated: no two objects (of any kinds) carry one jobId, no two submits of one jobId succeeded,
  and a create is never sent twice except after a 429/503 (the server did nothing): the POSTs the
  proxy saw equal the creates the backend asked for plus the 429/503s injected on them;
- every failure is explained by an injected fault: 500s and timeouts map 1:1 to submit failures;
- every watch resumes: the backend's five watch caches (three job kinds, Katib Experiments and
  Trials) converge to the server's lists (names and resourceVersions), a cut or dropped watch
  resumes without a re-list, the one expiry costs exactly one re-list per watch, and afterwards
  changes still arrive by watch.

The figures are printed (``-s``) for the record.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import io
import random
import re
import tarfile
import time
from dataclasses import dataclass

import kubernetes_asyncio
import pytest

from hub_ext.core.errors import UpstreamError, UserInputError
from hub_ext.kube.client import Kube
from hub_ext.operator.rules.gates import GATED_LABEL
from server_ext.errors import JobExists
from server_ext.jobs.kube import katib_services
from server_ext.jobs.model import JOB_ID_ANNOTATION, kubernetes_name
from server_ext.jobs.plan import with_package
from server_ext.runtimes.kube.backend import KubeBackend
from server_ext.runtimes.kube.project_caches import SELECTOR
from server_ext.runtimes.kube.sweeps import EXPERIMENT_LABEL
from tests.kube.job_env import SETTINGS, plan, pytorch_doc, single_doc, tf_doc

pytestmark = pytest.mark.kube

SEED = 14
TIMEOUT = 2.0  # the backend's request timeout: a hung request fails after it
DOCS = {"PyTorchJob": pytorch_doc, "TFJob": tf_doc, "Job": single_doc}
# (group, version, plural, label selector) of each cache a project of the backend keeps
CACHES = {"PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs", SELECTOR),
          "TFJob": ("kubeflow.org", "v1", "tfjobs", SELECTOR),
          "Job": ("batch", "v1", "jobs", SELECTOR),
          "Experiment": ("kubeflow.org", "v1beta1", "experiments", SELECTOR),
          "Trial": ("kubeflow.org", "v1beta1", "trials", EXPERIMENT_LABEL),
          # the pods of Katib's services (`server_ext.jobs.kube.katib_services`: a sweep whose service
          # cannot start says why)
          "ServicePod": ("", "v1", "pods", katib_services.SERVICE_LABEL),
          # what a held job waits for (`server_ext.jobs.kube.waiting`): its held pods, the dataset PVCs
          "HeldPod": ("", "v1", "pods", f"{GATED_LABEL}=true"),
          "Dataset": ("", "v1", "persistentvolumeclaims", SETTINGS.mounts.dataset_label)}
JOB_PLURALS = ("pytorchjobs", "tfjobs", "jobs")
GROUP_VERSION = {"pytorchjobs": ("kubeflow.org", "v1"), "tfjobs": ("kubeflow.org", "v1"), "jobs": ("batch", "v1")}


class CountingKube(Kube):
    """`Kube` that counts the creates its callers ask for (before any retry), per path."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.creates: collections.Counter = collections.Counter()

    async def request(self, method, path, *args, **kwargs):
        if method == "POST":
            self.creates[path] += 1
        return await super().request(method, path, *args, **kwargs)


@dataclass
class Attempt:
    job_id: str
    kind: str
    wave: int
    packaged: bool = False
    outcome: str = ""  # "ok", or why it failed ("job 500", "configmap timeout", "JobExists", …)
    read_back: bool = False  # `get` right after a successful submit found it


@pytest.fixture
async def backend(kube_cluster, kube_target):
    api = await kubernetes_asyncio.config.new_client_from_config(config_file=kube_target.kubeconfig)
    kube = CountingKube(api, timeout=TIMEOUT)
    await kube.request("POST", f"/api/v1/namespaces/{kube_target.namespace}/serviceaccounts",
                       {"metadata": {"name": SETTINGS.service_account}})
    b = KubeBackend(kube, SETTINGS, poll_interval=0.1)
    yield b
    await b.close()
    await api.close()


def attempts_of(rng: random.Random) -> list[Attempt]:
    """30 job ids in three waves of 10 (kinds shuffled; 3 packaged per wave), and 4 second submits of
    an id in its wave, launched beside the first: 2 of the same kind, 2 as another kind."""
    kinds = ["PyTorchJob"] * 10 + ["TFJob"] * 10 + ["Job"] * 10
    rng.shuffle(kinds)
    firsts = [Attempt(f"storm_{i:02d}", kind, i // 10) for i, kind in enumerate(kinds)]
    for wave in range(3):
        shippable = [a for a in firsts if a.wave == wave and a.kind != "TFJob"]  # TF docs run images
        for a in rng.sample(shippable, 3):
            a.packaged = True
    out = list(firsts)
    for n, original in enumerate(rng.sample(firsts, 4)):
        kind = original.kind if n < 2 else rng.choice([k for k in DOCS if k != original.kind])
        out.insert(out.index(original) + 1, Attempt(original.job_id, kind, original.wave))
    return out


def sdist(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"print('trained')\n"
        info = tarfile.TarInfo("storm_pkg-0.1/trainer/task.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "storm_pkg-0.1.tar.gz"
    path.write_bytes(buf.getvalue())
    return path, hashlib.sha256(buf.getvalue()).hexdigest(), len(buf.getvalue())


def cause(e: Exception) -> str:
    if isinstance(e, JobExists):
        return "JobExists"
    if isinstance(e, UpstreamError):
        where = "configmap" if "ConfigMap" in e.action else "job"
        if "did not answer in time" in e.reason:
            return f"{where} timeout"
        code = re.search(r"answered (\d+)", e.reason)
        return f"{where} {code.group(1) if code else e.reason}"
    assert isinstance(e, UserInputError)
    return f"refused {e.status}: {e.message}"


async def submit(backend: KubeBackend, ns: str, a: Attempt, package) -> None:
    p = plan(DOCS[a.kind](a.job_id), ns)
    if a.packaged:
        p = with_package(p, *package)
    try:
        await backend.submit(p)
    except (JobExists, UpstreamError, UserInputError) as e:
        a.outcome = cause(e)
        return
    a.outcome = "ok"
    a.read_back = (await backend.get(ns, a.job_id))["jobId"] == a.job_id


def server_view(kube_cluster, ns: str) -> dict[str, dict[str, str]]:
    """kind → {name: resourceVersion} as the server lists it (read directly, not through the proxy)."""
    return {kind: {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                   for o in kube_cluster.items(g, v, plural, ns, labelSelector=selector)}
            for kind, (g, v, plural, selector) in CACHES.items()}


def cache_view(backend: KubeBackend, ns: str) -> dict[str, dict[str, str]]:
    """The same, as the backend's watch caches hold it."""
    p = backend._projects[ns]  # the caches themselves: what every read of the backend is served from
    caches = {**p.caches, "Experiment": p.sweeps.experiments, "Trial": p.sweeps.trials,
              "ServicePod": p.sweeps.services, "HeldPod": p.held,
              "Dataset": p.datasets}
    return {kind: {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in cache.items()}
            for kind, cache in caches.items()}


def paths(ns: str) -> dict[str, tuple[str, str]]:
    """kind → (path, label selector) of the backend's cache of that kind in `ns`."""
    return {kind: (f"/apis/{g}/{v}/namespaces/{ns}/{plural}" if g else f"/api/{v}/namespaces/{ns}/{plural}", selector)
            for kind, (g, v, plural, selector) in CACHES.items()}


def lists_since(kube_cluster, ns: str, since: int) -> dict[str, int]:
    """How many LIST requests (no watch) each cache's path and selector got through the proxy."""
    where = {v: k for k, v in paths(ns).items()}
    out = dict.fromkeys(CACHES, 0)
    for r in kube_cluster.requests()[since:]:
        kind = where.get((r.path, r.query.get("labelSelector", "")))
        if kind and r.method == "GET" and r.query.get("watch", "").lower() not in ("true", "1"):
            out[kind] += 1
    return out


async def all_watching(kube_cluster, ns: str, timeout: float = 10) -> None:
    """Until each of the caches has its watch open through the proxy."""
    want = set(paths(ns).values())
    for _ in range(int(timeout / 0.05)):
        if want <= {(r.path, r.query.get("labelSelector", "")) for r in kube_cluster.proxy.open_watches()}:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not every cache is watching again")


async def wave(tasks: list, disrupt) -> None:
    """Run the submits; `disrupt()` once the first has finished (the rest are in flight)."""
    pending = [asyncio.ensure_future(t) for t in tasks]
    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    disrupt()
    await asyncio.gather(*pending)


async def until(check, timeout: float = 10) -> bool:
    for _ in range(int(timeout / 0.05)):
        if check():
            return True
        await asyncio.sleep(0.05)
    return bool(check())


def account(kube_cluster, ns: str, by_id: dict[str, list[Attempt]]) -> tuple[list, list, list]:
    """(lost, duplicated, left behind), from what the server holds (read directly): a success must
    be there exactly once, of its kind, not being deleted, its package ConfigMap owned by it, and
    have been read back at once; a job id whose every submit failed must have left nothing."""
    objects = collections.defaultdict(list)  # jobId → [(plural, name, uid, being deleted)]
    for plural in JOB_PLURALS:
        for o in kube_cluster.items(*GROUP_VERSION[plural], plural, ns):
            meta = o["metadata"]
            objects[(meta.get("annotations") or {}).get(JOB_ID_ANNOTATION)].append(
                (plural, meta["name"], meta["uid"], "deletionTimestamp" in meta))
    cms = {c["metadata"]["name"]: c for c in kube_cluster.items("", "v1", "configmaps", ns)}
    lost, duplicated, leftovers = [], [], []
    for stray in set(objects) - set(by_id):
        leftovers.append((stray, "no submit made it", objects[stray]))
    for job_id, tries in by_id.items():
        wins = [a for a in tries if a.outcome == "ok"]
        found, name = objects.get(job_id, []), kubernetes_name(job_id)
        package = cms.get(f"{name}-package")
        if len(wins) > 1 or len(found) > 1:
            duplicated.append((job_id, "succeeded as", [a.kind for a in wins], "on the server", found))
            continue
        if not wins:
            if found or package:
                leftovers.append((job_id, [a.outcome for a in tries], found, package is not None))
            continue
        win = wins[0]
        if [(f[0], f[1], f[3]) for f in found] != [(CACHES[win.kind][2], name, False)] or not win.read_back:
            lost.append((job_id, win.kind, "on the server", found, "read back", win.read_back))
        elif win.packaged:
            owners = [r["uid"] for r in ((package or {}).get("metadata") or {}).get("ownerReferences") or []]
            if owners != [found[0][2]]:
                lost.append((job_id, "package ConfigMap owned by", owners))
    return lost, duplicated, leftovers


async def test_submissions_survive_faults_cut_watches_and_410(backend, kube_cluster, kube_target, tmp_path):
    start = time.monotonic()
    ns = kube_target.namespace
    rng = random.Random(SEED)
    attempts = attempts_of(rng)
    package = sdist(tmp_path)
    creates = rf"/namespaces/{ns}/(pytorchjobs|tfjobs|jobs)(\?|$)"
    configmaps = rf"/namespaces/{ns}/configmaps(\?|$)"
    deletes = rf"/namespaces/{ns}/(pytorchjobs|tfjobs|jobs)/"
    faults = collections.Counter()  # (what, status) → how many injected

    def inject(method, regex, status, count=1, delay=0.0, what=None):
        kube_cluster.inject_fault(method, regex, status, count, delay)
        faults[(what or method, "hang" if status is None else status)] += count

    # the first list of the PyTorchJobs fails once (a GET is retried)
    inject("GET", rf"/namespaces/{ns}/pytorchjobs\?(?!.*watch=)", 500, what="list")
    assert await backend.list(ns) == []
    loaded = len(kube_cluster.requests())
    assert lists_since(kube_cluster, ns, 0) == {**dict.fromkeys(CACHES, 1), "PyTorchJob": 2}
    await all_watching(kube_cluster, ns)

    def run(n: int):
        return [submit(backend, ns, a, package) for a in attempts if a.wave == n]

    cut = {}

    # wave 0: a retried 429, a 500 on a create, a 500 on a package ConfigMap; mid-wave every watch is
    # cut cleanly, and two of their resumes answer 500 (resumed again after the cache's pause)
    inject("POST", creates, 429, what="create")
    inject("POST", creates, 500, what="create")
    inject("POST", configmaps, 500, what="configmap")

    def cut_clean():
        inject("GET", rf"/namespaces/{ns}/.*[?&]watch=true", 500, count=2, what="watch")
        cut["clean"] = kube_cluster.cut_watches()
    await wave(run(0), cut_clean)
    await all_watching(kube_cluster, ns)

    # wave 1: a create hangs (timed out, never sent again), a slow retried 503, a package ConfigMap
    # hangs and the DELETE of its job answers 500 first (retried); mid-wave every watch expires
    inject("POST", creates, None, what="create")
    inject("POST", creates, 503, delay=0.5, what="create")
    inject("POST", configmaps, None, what="configmap")
    inject("DELETE", deletes, 500, what="delete")
    await wave(run(1), lambda: cut.setdefault("expired", kube_cluster.expire_watches()))
    await all_watching(kube_cluster, ns)

    # wave 2: a 409 on a create, a slow 500 on a create, a 500 on a package ConfigMap whose job's
    # DELETE hangs once (retried); mid-wave every watch's connection drops abruptly
    inject("POST", creates, 409, what="create")
    inject("POST", creates, 500, delay=1.0, what="create")
    inject("POST", configmaps, 500, what="configmap")
    inject("DELETE", deletes, None, what="delete")
    await wave(run(2), lambda: cut.setdefault("dropped", kube_cluster.proxy.cut_watches(abrupt=True)))
    storm = kube_cluster.requests()[loaded:]
    kube_cluster.clear_faults()

    # ---- every watch resumes: the caches converge to the server's lists ----------------------------
    await all_watching(kube_cluster, ns)
    converged = await until(lambda: cache_view(backend, ns) == server_view(kube_cluster, ns))
    relists = lists_since(kube_cluster, ns, loaded)

    # ---- nothing lost, nothing duplicated, nothing left behind --------------------------------------------
    ids = sorted({a.job_id for a in attempts})
    by_id = {i: [a for a in attempts if a.job_id == i] for i in ids}
    lost, duplicated, leftovers = account(kube_cluster, ns, by_id)
    succeeded = sorted(i for i, t in by_id.items() if any(a.outcome == "ok" for a in t))
    listed = sorted(j["jobId"] for j in await backend.list(ns))

    # ---- a create is sent again only after a 429/503; every failure is an injected fault's -------------
    posts = collections.Counter(r.path for r in storm if r.method == "POST")
    job_posts = sum(n for path, n in posts.items() if re.search(creates, path))
    asked = sum(n for path, n in backend.kube.creates.items() if re.search(creates, path))
    cm_posts = sum(n for path, n in posts.items() if re.search(configmaps, path))
    cm_asked = sum(n for path, n in backend.kube.creates.items() if re.search(configmaps, path))
    outcomes = collections.Counter(a.outcome for a in attempts)
    failed = {k: n for k, n in outcomes.items() if k != "ok"}
    removals = sum(1 for r in storm if r.method == "DELETE" and re.search(deletes, r.path))

    # ---- afterwards, changes still arrive by watch (no re-list) -----------------------------------------
    probes = {}
    for kind, plural in zip(("PyTorchJob", "TFJob", "Job"), JOB_PLURALS):
        name = sorted(cache_view(backend, ns)[kind])[0]
        patched = kube_cluster.patch(*GROUP_VERSION[plural], plural, ns, name,
                                     {"metadata": {"annotations": {"mlplatform.test/probe": "after-the-storm"}}})
        probes[(kind, name)] = patched["metadata"]["resourceVersion"]
    probed = await until(lambda: all(cache_view(backend, ns)[k].get(n) == rv for (k, n), rv in probes.items()))

    injected = sum(faults.values())
    total = len(storm) + loaded
    print(f"\nreliability (seed {SEED}): {len(attempts)} submits of {len(ids)} job ids "
          f"({dict(collections.Counter(a.kind for a in attempts))}; {sum(a.packaged for a in attempts)} with a "
          f"package ConfigMap; 4 ids submitted twice at once, 2 of them as another kind)")
    print(f"  faults injected: {injected} of {total} requests ({100 * injected / total:.0f}%): "
          f"{dict(sorted((f'{w} {s}', n) for (w, s), n in faults.items()))}; watches cut {cut.get('clean')}, "
          f"expired (410) {cut.get('expired')}, dropped {cut.get('dropped')}")
    print(f"  succeeded {outcomes['ok']}, failed {sum(failed.values())}: {dict(sorted(failed.items()))}")
    print(f"  job creates sent {job_posts} for {asked} asked; package ConfigMap creates sent {cm_posts} for "
          f"{cm_asked} asked; DELETEs of half-made jobs sent {removals}")
    print(f"  lost {len(lost)}, duplicated {len(duplicated)}, left behind by failed submits {len(leftovers)}"
          + "".join(f"\n    {x}" for x in lost + duplicated + leftovers))
    print(f"  re-lists after the first lists: {relists}; caches equal the server's lists: {converged}; "
          f"later changes arrive by watch: {probed}; {time.monotonic() - start:.1f} s")

    assert (lost, duplicated, leftovers) == ([], [], [])
    assert listed == succeeded  # each job once, as the server has it
    assert converged and probed
    assert cut == dict.fromkeys(("clean", "expired", "dropped"), len(CACHES))
    assert relists == dict.fromkeys(CACHES, 1)  # the expiry's, one per watch; none for the cuts and drops
    assert lists_since(kube_cluster, ns, loaded) == relists
    assert job_posts == asked + faults[("create", 429)] + faults[("create", 503)]  # never after a timeout
    assert cm_posts == cm_asked
    half_made = failed.get("configmap 500", 0) + failed.get("configmap timeout", 0)
    assert removals == half_made + faults[("delete", 500)] + faults[("delete", "hang")]  # each retried once
    assert {k: failed.get(k, 0) for k in ("job 500", "job timeout", "configmap 500", "configmap timeout")} == {
        "job 500": faults[("create", 500)], "job timeout": faults[("create", "hang")],
        "configmap 500": faults[("configmap", 500)], "configmap timeout": faults[("configmap", "hang")]}
    assert set(failed) <= {"job 500", "job timeout", "configmap 500", "configmap timeout", "JobExists"}
    unexplained = [i for i, t in by_id.items() if all(a.outcome == "JobExists" for a in t)]
    assert len(unexplained) <= faults[("create", 409)]  # a JobExists with no job: only the injected 409
