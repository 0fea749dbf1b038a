"""A project's queues under Kueue (`hub_ext.manifests.queues`) and how they replace the accelerator
quota (`hub_ext.manifests.tenancy`). Pure; the real Kueue admits by them in tests/kube/test_kueue_*."""

import dataclasses

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.entitlements import Project
from hub_ext.core.errors import ConfigError
from hub_ext.manifests.queues import (QueueSettings, cluster_queue, local_queues, project_cohort, queue_objects,
                                     resource_flavors, servers_queue)
from hub_ext.manifests.tenancy import TenancySettings, project_objects

pytestmark = pytest.mark.unit

ACCS = parse_accelerators({
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB"},
    "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb-single": {"type": "mig", "profile": "3g.20gb", "strategy": "single", "product": "NVIDIA-A100-SXM4-40GB"},
})
TEAM = Project("vision", "Vision", False, frozenset({"cpu"}), {"a100": 1, "h100": 1, "1g.5gb": 2})
ADMIN = Project("user-root", "Personal", True, frozenset({"cpu"}), None)
LABELS = {"app.kubernetes.io/managed-by": "jupyterhub-mlplatform", "mlplatform.io/project": "vision"}


def test_a_flavor_per_accelerator_type_even_on_one_resource_name():
    flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in resource_flavors(ACCS)}
    assert flavors["mlp-a100"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    assert flavors["mlp-h100"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    # the single strategy's slice is nvidia.com/gpu too, on its own nodes: a third flavor of that resource
    assert flavors["mlp-3g.20gb-single"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-3g.20gb"}
    assert all(f["apiVersion"] == "kueue.x-k8s.io/v1beta2" for f in resource_flavors(ACCS))


def _quotas(cq: dict) -> dict:
    return {tuple(g["coveredResources"]): g["flavors"] for g in cq["spec"]["resourceGroups"]}


def test_the_servers_queue_holds_the_limits_per_entitled_flavor_and_never_borrows():
    cq = servers_queue(TEAM, ACCS, LABELS)
    assert cq["metadata"]["name"] == "mlp-vision-servers"
    assert _quotas(cq)[("nvidia.com/gpu",)] == [
        {"name": "mlp-a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1", "borrowingLimit": "0"}]},
        {"name": "mlp-h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1", "borrowingLimit": "0"}]}]
    assert _quotas(cq)[("nvidia.com/mig-1g.5gb",)] == [{"name": "mlp-1g.5gb", "resources": [
        {"name": "nvidia.com/mig-1g.5gb", "nominalQuota": "2", "borrowingLimit": "0"}]}]
    assert "mlp-3g.20gb-single" not in str(cq)  # not entitled: never admitted
    # only the project's own namespace may queue to it; a server preempts nothing
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "vision"}}
    assert cq["spec"]["cohortName"] == "mlp-vision"
    assert cq["spec"]["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                                        "borrowWithinCohort": {"policy": "Never"}}


def test_the_jobs_queue_owns_nothing_and_runs_on_what_is_lent():
    cq = cluster_queue(TEAM, ACCS, LABELS)
    assert cq["metadata"]["name"] == "mlp-vision" and cq["spec"]["cohortName"] == "mlp-vision"
    assert {(f["name"], r["nominalQuota"], r.get("borrowingLimit")) for g in cq["spec"]["resourceGroups"]
            for f in g["flavors"] for r in f["resources"]} == {
        ("mlp-a100", "0", None), ("mlp-h100", "0", None), ("mlp-1g.5gb", "0", None)}
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"


def test_the_projects_cohort_borrows_from_the_shared_one_up_to_the_limit():
    cohort = project_cohort(TEAM, ACCS, QueueSettings(), LABELS)
    assert cohort["kind"] == "Cohort" and cohort["metadata"]["name"] == "mlp-vision"
    assert cohort["spec"]["parentName"] == "mlplatform" and "resourceGroups" not in cohort["spec"]
    limited = project_cohort(TEAM, ACCS, QueueSettings(cohort="lab", borrowing_limit=0), LABELS)
    assert limited["spec"]["parentName"] == "lab"
    assert {(f["name"], r["nominalQuota"], r["borrowingLimit"]) for g in limited["spec"]["resourceGroups"]
            for f in g["flavors"] for r in f["resources"]} == {
        ("mlp-a100", "0", "0"), ("mlp-h100", "0", "0"), ("mlp-1g.5gb", "0", "0")}


def test_an_unlimited_project_has_one_queue_in_no_cohort():
    kinds = [(o["kind"], o["metadata"]["name"]) for o in queue_objects(ADMIN, ACCS, QueueSettings(), LABELS)]
    assert ("ClusterQueue", "mlp-user-root") in kinds and not [k for k, _ in kinds if k == "Cohort"]
    admin = cluster_queue(ADMIN, ACCS, LABELS)
    assert "cohortName" not in admin["spec"]  # nothing caps it: it neither lends nor borrows
    assert len([f for g in admin["spec"]["resourceGroups"] for f in g["flavors"]]) == len(ACCS)
    assert {q["metadata"]["name"]: q["spec"]["clusterQueue"] for q in local_queues(ADMIN, LABELS)} == {
        "default": "mlp-user-root", "servers": "mlp-user-root"}


def test_under_kueue_the_quota_counts_no_accelerator_and_the_queues_are_made():
    settings = dataclasses.replace(TenancySettings(), kueue=True)
    objs = project_objects(TEAM, ACCS, (), [("alice", "")], settings)
    quota = next(o for o in objs if o["metadata"]["name"] == "mlplatform-accelerators")
    assert quota["spec"]["hard"] == {}
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds[-5:] == [("Cohort", "mlp-vision"), ("ClusterQueue", "mlp-vision-servers"),
                          ("ClusterQueue", "mlp-vision"), ("LocalQueue", "default"), ("LocalQueue", "servers")]
    assert ("ResourceFlavor", "mlp-a100") in kinds
    assert {q["metadata"]["name"]: q["spec"]["clusterQueue"] for q in local_queues(TEAM, LABELS)} == {
        "default": "mlp-vision", "servers": "mlp-vision-servers"}
    # without Kueue: no queue objects, the quota counts accelerators as before
    plain = project_objects(TEAM, ACCS, (), [("alice", "")])
    assert not [o for o in plain if o["apiVersion"].startswith("kueue.x-k8s.io")]


def test_queueing_settings_are_checked():
    with pytest.raises(ConfigError) as e:
        TenancySettings.from_config({"queueing": "sometimes", "queue_borrowing_limit": -1})
    assert [p.path for p in e.value.problems] == ["queueing", "queue_borrowing_limit"]
    settings = TenancySettings.from_config({"queueing": "kueue", "queue_borrowing_limit": 2, "kueue": True})
    assert settings.kueue is False  # found by the hub, never configured
    assert dataclasses.replace(settings, kueue=True).queues == QueueSettings(borrowing_limit=2)


def _workload(name, created, reserved=None, message="", priority=0, owner=("Pod", "jupyter-x")):
    conditions = [{"type": "QuotaReserved", "status": "True" if reserved else "False", "message": message}]
    return {"metadata": {"name": name, "creationTimestamp": created,
                         "ownerReferences": [{"kind": owner[0], "name": owner[1]}]},
            "spec": {"priority": priority}, "status": {"conditions": conditions}}


def test_a_queued_workload_is_told_its_place_and_why_in_words():
    from hub_ext.manifests.queue_text import ahead, owned_by, queue_sentence
    running = _workload("job-a", "2026-12-06T10:00:00Z", reserved=True, owner=("PyTorchJob", "a"))
    first = _workload("job-b", "2026-12-06T10:01:00Z", owner=("PyTorchJob", "b"))
    urgent = _workload("job-c", "2026-12-06T10:05:00Z", priority=100, owner=("PyTorchJob", "c"))
    mine = _workload("pod-x", "2026-12-06T10:02:00Z", owner=("Pod", "jupyter-x"), message=(
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "mlp-a100, 1 more needed"))
    later = _workload("job-d", "2026-12-06T10:03:00Z", owner=("PyTorchJob", "d"))
    workloads = [running, first, urgent, mine, later]
    assert owned_by(workloads, "Pod", "jupyter-x") is mine and owned_by(workloads, "Pod", "other") is None
    assert ahead(mine, workloads) == 2  # the older one and the higher priority; not the admitted or the later
    assert queue_sentence(mine, workloads, "vision", "a free A100", {"mlp-a100": "A100"}) == (
        "queued: 2 workloads ahead of you in the project 'vision' for a free A100; "
        "the project's quota of A100 is in use (1 more needed)")
    assert queue_sentence(first, workloads, "vision", "a free A100", {}).startswith(
        "queued: 1 workload ahead of you")  # the urgent one
    assert queue_sentence(running, workloads, "vision", "1 A100", {}) == "admitted by the project's queue with 1 A100"
    # the servers' queue and the jobs' are two lines: a server waits behind servers only
    for wl in workloads:
        wl["spec"]["queueName"] = "default"
    mine["spec"]["queueName"] = "servers"
    server = _workload("pod-y", "2026-12-06T10:01:30Z", owner=("Pod", "jupyter-y"))
    server["spec"]["queueName"] = "servers"
    assert ahead(mine, [*workloads, server]) == 1 and ahead(first, [*workloads, server]) == 1
    from hub_ext.manifests.queue_text import reason_words
    assert reason_words("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
                        "mlp-a100, previously considered podsets requests (0) + current podset request (3) > maximum "
                        "capacity (1)", {"mlp-a100": "A100"}) == "it asks more A100 than the project may ever hold at once"
    odd = _workload("pod-y", "2026-12-06T10:02:00Z", message="something new")
    assert queue_sentence(odd, [odd], "vision", "1 A100", {}).endswith("first in line in the project 'vision' "
                                                                       "for 1 A100; Kueue says: something new")


def test_a_workload_evicted_to_make_room_says_it_was_preempted_and_why():
    from hub_ext.manifests.queue_text import queue_sentence
    message = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor " \
              "mlp-a100, 1 more needed"
    words = {}
    for reason in ("InCohortReclamation", "InClusterQueue", "InCohortFairSharing", "SomethingNew"):
        wl = _workload("job-x", "2026-12-06T10:00:00Z", message=message, owner=("Job", "x"))
        wl["status"]["conditions"].append({"type": "Preempted", "status": "True", "reason": reason})
        words[reason] = queue_sentence(wl, [wl], "vision", "1 A100", {"mlp-a100": "A100"})
    assert words["InCohortReclamation"] == (
        "preempted: another project took back the accelerators it had lent; queued: first in line in the project "
        "'vision' for 1 A100; the project's quota of A100 is in use (1 more needed)")
    assert words["InClusterQueue"].startswith("preempted: a workload of the project with a higher priority")
    assert words["InCohortFairSharing"].startswith("preempted: the cohort's fair sharing")
    assert words["SomethingNew"].startswith("preempted: Kueue says SomethingNew; queued:")
    # just evicted, before Kueue tried it again: its eviction message, without its UIDs
    wl = _workload("job-x", "2026-12-06T10:00:00Z", owner=("Job", "x"), message=(
        "Preempted to accommodate a workload (UID: 1a93, JobUID: fce2) due to reclamation within the cohort; "
        "preemptor path: /c/mlp-lend; preemptee path: /c/mlp-borrow"))
    wl["status"]["conditions"].append({"type": "Preempted", "status": "True", "reason": "InCohortReclamation"})
    assert queue_sentence(wl, [wl], "vision", "1 A100", {}) == (
        "preempted: another project took back the accelerators it had lent; queued: first in line in the project "
        "'vision' for 1 A100; Kueue looks for room for it again")
    wl["status"]["conditions"][0]["message"] = "Workload no longer fits after processing another workload"
    assert queue_sentence(wl, [wl], "vision", "1 A100", {}).endswith(
        "; another workload took the room first; Kueue tries again")
    admitted = _workload("job-x", "2026-12-06T10:00:00Z", reserved=True, owner=("Job", "x"))
    admitted["status"]["conditions"].append({"type": "Preempted", "status": "False", "reason": "InCohortReclamation"})
    assert queue_sentence(admitted, [admitted], "vision", "1 A100", {}) == "admitted by the project's queue with 1 A100"


def test_a_job_kueue_holds_says_where_it_stands():
    from server_ext.jobs.kube.queued import queue_messages
    held = _workload("pytorchjob-train-1", "2026-12-06T10:01:00Z", owner=("PyTorchJob", "train-1"), message=(
        "couldn't assign flavors to pod set master: insufficient unused quota for nvidia.com/gpu in flavor "
        "mlp-a100, 2 more needed"))
    admitted = _workload("pytorchjob-train-0", "2026-12-06T10:00:00Z", reserved=True, owner=("PyTorchJob", "train-0"))
    jobs = [{"kind": "PyTorchJob", "metadata": {"name": n}} for n in ("train-0", "train-1", "train-2")]
    assert queue_messages(jobs, [held, admitted], "vision") == {
        "train-1": "queued: first in line in the project 'vision' for the job's accelerators; "
                   "the project's quota of a100 is in use (2 more needed)"}
    assert queue_messages(jobs, [], "vision") == {}


def test_the_shipped_kueue_configuration_queues_every_project_workload():
    import pathlib

    import yaml

    from hub_ext.core.credentials import MANAGED_BY
    values = yaml.safe_load((pathlib.Path(__file__).parents[2] / "helm-values" / "kueue.yaml").read_text())
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["managedJobsNamespaceSelector"] == {"matchLabels": dict(MANAGED_BY)}  # the hub's project label
    assert config["manageJobsWithoutQueueName"] is True  # no bypass by leaving the queue name off
    assert {"pod", "batch/job", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob"} <= set(config["integrations"]["frameworks"])
    # Kueue counts accelerators only: CPU and memory stay with the project's ResourceQuota
    assert {"cpu", "memory"} <= set(config["resources"]["excludeResourcePrefixes"])


def test_the_form_counts_the_waiting_workloads_that_ask_for_an_accelerator():
    from hub_ext.manifests.queue_text import waiting_for

    def asking(name, resource, selector=None, reserved=None, init=False):
        wl = _workload(name, "2026-12-06T10:00:00Z", reserved=reserved)
        container = {"name": "c", "resources": {"limits": {resource: "1"}}}
        spec = {"initContainers" if init else "containers": [container]}
        if selector:
            spec["nodeSelector"] = selector
        wl["spec"]["podSets"] = [{"name": "main", "count": 1, "template": {"spec": spec}}]
        return wl

    a100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    workloads = [asking("any-gpu", "nvidia.com/gpu"),  # no selector: it could take an A100
                 asking("on-a100", "nvidia.com/gpu", a100),
                 asking("on-h100", "nvidia.com/gpu", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
                 asking("admitted", "nvidia.com/gpu", a100, reserved=True),
                 asking("slice", "nvidia.com/mig-1g.5gb"),
                 asking("init-only", "nvidia.com/gpu", {"kubernetes.io/hostname": "dgx-1"}, init=True)]
    assert waiting_for(workloads, "nvidia.com/gpu", a100) == 3  # any-gpu, on-a100, init-only
    assert waiting_for(workloads, "nvidia.com/mig-1g.5gb", {}) == 1
    assert waiting_for([], "nvidia.com/gpu", a100) == 0
