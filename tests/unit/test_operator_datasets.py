"""The dataset loader's pure parts: a dataset PVC read (`hub_ext.operator.rules.datasets`), its loader Job
(whole manifest), the conditions and messages the controller writes, the loader's own decisions
(`server_ext.datasets.load_plan`: keys to paths, what to copy again) and `kube_mounts.dataset_state`."""

from __future__ import annotations

import pytest

from hub_ext.core.errors import UserInputError
from hub_ext.core.mounts import Credential
from hub_ext.manifests.mounts import MountSettings, dataset_from_pvc, dataset_state
from hub_ext.operator.rules import datasets as ds
from hub_ext.operator.rules.settings import OperatorSettings
from server_ext.datasets.load_plan import LoadError, Obj, check_paths, plan, relative_path

pytestmark = pytest.mark.unit

MOUNTS = MountSettings({"gcp-credential": "gcp-credential", "aws-credential": "example.com/aws"},
                       credentials_root="/etc/creds")
SETTINGS = OperatorSettings(namespace="mlplatform-system", identity="op-0", mounts=MOUNTS,
                            loader_image="registry.example/trainer-tools:1.2", loader_python=("/venv/bin/python",),
                            s3_endpoint="http://minio.storage:9000")
UID = "0b7d0f0e-1111-2222-3333-444455556666"


def pvc(annotations: dict | None = None, name: str = "coco", status: dict | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": "vision", "uid": UID, "labels": {"mlplatform.io/dataset": "true"},
                         "annotations": {"mlplatform.io/source": "s3://vision-data/coco", **(annotations or {})}},
            "status": status or {}}


def spec(**annotations) -> ds.DatasetSpec:
    return ds.read_dataset(pvc(annotations), MOUNTS)


# -- reading a dataset PVC ------------------------------------------------------------------------

@pytest.mark.parametrize("uri, parsed", [
    ("s3://vision-data/coco", ("s3", "vision-data", "coco/")),
    ("s3://vision-data/coco/", ("s3", "vision-data", "coco/")),
    ("gs://my_bucket.example.com/a/b", ("gs", "my_bucket.example.com", "a/b/")),
    ("gs://bkt", ("gs", "bkt", "")),
    ("s3://bkt/", ("s3", "bkt", "")),
])
def test_sources_name_a_folder(uri, parsed):
    src = ds.parse_source(uri)
    assert (src.scheme, src.bucket, src.prefix) == parsed and src.uri == uri


@pytest.mark.parametrize("uri, text", [
    ("", "must be s3://<bucket>/<prefix> or gs://<bucket>/<prefix>"),
    ("http://bkt/x", "must be s3://"),
    ("s3:/bkt/x", "must be s3://"),
    ("S3://bkt/x", "must be s3://"),
    ("s3://Bucket/x", "'Bucket' is not a bucket name"),
    ("s3://b/x", "'b' is not a bucket name"),
    ("s3:///x", "'' is not a bucket name"),
    ("gs://bkt/a\nb", "without control characters"),
    ("gs://bkt/" + "x" * 1100, "at most 1024 characters"),
])
def test_bad_sources_say_what_is_wrong(uri, text):
    with pytest.raises(ValueError, match=text.replace("(", r"\(").replace("?", r"\?")):
        ds.parse_source(uri)


def test_a_pvc_without_a_source_is_an_admins_dataset():
    assert ds.read_dataset({"metadata": {"name": "x", "namespace": "v", "uid": UID}}, MOUNTS) is None


@pytest.mark.parametrize("annotations, name, field, text", [
    ({"mlplatform.io/source": "ftp://x/y"}, "coco", "mlplatform.io/source", "must be s3://"),
    ({"mlplatform.io/credential": "Not_A_Name"}, "coco", "mlplatform.io/credential", "lower-case letters"),
    ({"mlplatform.io/refresh": "r" * 254}, "coco", "mlplatform.io/refresh", "at most 253"),
    ({}, "d" * 64, "metadata.name", "at most 63 characters"),
])
def test_a_bad_annotation_is_refused_naming_it(annotations, name, field, text):
    with pytest.raises(UserInputError) as e:
        ds.read_dataset(pvc(annotations, name), MOUNTS)
    assert e.value.field == field and text in e.value.message
    assert str(e.value).startswith(f"{field}: ")  # the condition's message names it first


def test_a_load_is_the_source_credential_refresh_and_the_claim():
    first = spec()
    assert first == ds.DatasetSpec("vision", "coco", UID, ds.parse_source("s3://vision-data/coco"), None, "")
    assert spec().load_id == first.load_id and len(first.load_id) == 10
    others = {spec(**{"mlplatform.io/source": "s3://vision-data/coco2"}).load_id,
              spec(**{"mlplatform.io/credential": "s3-reader"}).load_id,
              spec(**{"mlplatform.io/refresh": "1"}).load_id,
              ds.read_dataset({**pvc(), "metadata": {**pvc()["metadata"], "uid": "other"}}, MOUNTS).load_id}
    assert len(others) == 4 and first.load_id not in others
    assert first.job_name == f"coco-load-{first.load_id}"
    long = ds.read_dataset(pvc(name="a.b-" + "x" * 59), MOUNTS)
    assert len(long.job_name) <= 63 and long.job_name.startswith("a-b-xxx") and long.job_name.endswith(long.load_id)


def test_the_credential_is_known_by_its_metadata_and_must_fit_the_scheme():
    s = spec(**{"mlplatform.io/credential": "s3-reader"})
    assert ds.credential_for(spec(), None, MOUNTS) is None  # anonymous: no annotation

    def meta(kind):
        return {"metadata": {"name": "s3-reader", "labels": {"mlplatform.io/credential": kind} if kind else {}}}

    assert ds.credential_for(s, meta("aws-credential"), MOUNTS) == Credential(
        "s3-reader", "aws-credential", "/etc/creds/s3-reader/credentials", "/etc/creds/s3-reader/config")
    for secret, text in ((None, "there is no credential 's3-reader' in the project 'vision'; add it"),
                         (meta(None), "the Secret 's3-reader' is not a credential"),
                         (meta("gcp-credential"), "is a gcp-credential; an s3:// source needs a aws-credential")):
        with pytest.raises(UserInputError) as e:
            ds.credential_for(s, secret, MOUNTS)
        assert e.value.field == "mlplatform.io/credential" and text in e.value.message


# -- the loader Job ---------------------------------------------------------------------------------

def test_the_loader_job_whole():
    s = spec(**{"mlplatform.io/credential": "s3-reader"})
    cred = Credential("s3-reader", "aws-credential", "/etc/creds/s3-reader/credentials", "/etc/creds/s3-reader/config")
    labels = {"mlplatform.io/dataset-loader": "coco", "mlplatform.io/dataset-load": s.load_id}
    assert ds.loader_job(s, cred, SETTINGS) == {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"coco-load-{s.load_id}", "namespace": "vision", "labels": labels,
                     "annotations": {"mlplatform.io/source": "s3://vision-data/coco"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "coco",
                                          "uid": UID, "controller": True}]},
        "spec": {
            "backoffLimit": 4,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "loader", "operator": "In", "values": [2]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
            "template": {
                "metadata": {"labels": labels, "annotations": {"mlplatform.io/inject-credentials": "false"}},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "mlplatform-runner",
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 100, "fsGroup": 100,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "loader", "image": "registry.example/trainer-tools:1.2",
                        "command": ["/venv/bin/python", "-m", "server_ext.datasets.load",
                                    "--source", "s3://vision-data/coco", "--dest", "/mnt/dataset"],
                        "env": [{"name": "AWS_CONFIG_FILE", "value": "/etc/creds/s3-reader/config"},
                                {"name": "AWS_ENDPOINT_URL_S3", "value": "http://minio.storage:9000"},
                                {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": "/etc/creds/s3-reader/credentials"}],
                        "volumeMounts": [{"name": "dataset", "mountPath": "/mnt/dataset"},
                                         {"name": "credential-s3-reader", "mountPath": "/etc/creds/s3-reader",
                                          "readOnly": True}],
                        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                            "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                    }],
                    "volumes": [{"name": "dataset", "persistentVolumeClaim": {"claimName": "coco"}},
                                {"name": "credential-s3-reader",
                                 "secret": {"secretName": "s3-reader", "defaultMode": 0o440}}],
                },
            },
        },
    }


def test_an_anonymous_gcs_loader_has_no_credential_and_the_emulator_endpoint():
    settings = OperatorSettings(namespace="ns", identity="i", mounts=MOUNTS, gcs_endpoint="http://127.0.0.1:9023")
    s = ds.read_dataset(pvc({"mlplatform.io/source": "gs://open-data/mnist"}), MOUNTS)
    pod = ds.loader_job(s, None, settings)["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "dataset", "persistentVolumeClaim": {"claimName": "coco"}}]
    (c,) = pod["containers"]
    assert c["env"] == [{"name": "STORAGE_EMULATOR_HOST", "value": "http://127.0.0.1:9023"}]
    assert c["command"] == ["python", "-m", "server_ext.datasets.load", "--source", "gs://open-data/mnist",
                            "--dest", "/mnt/dataset"]


def test_only_this_loads_job_is_adopted():
    s = spec()
    job = ds.loader_job(s, None, SETTINGS)
    assert ds.owned_by(job, UID) and ds.is_loader_of(job, s)
    upgraded = OperatorSettings(namespace="n", identity="i", mounts=MOUNTS, loader_image="other:2")
    assert ds.is_loader_of(ds.loader_job(s, None, upgraded), s)  # another image or interpreter: adopted
    assert not ds.owned_by(job, "another-uid")
    forged = {**job, "spec": {**job["spec"], "template": {**job["spec"]["template"], "spec": {
        **job["spec"]["template"]["spec"], "containers": [{"name": "loader", "command": ["sh", "-c", "true"]}]}}}}
    assert not ds.is_loader_of(forged, s)
    assert not ds.is_loader_of(job, spec(**{"mlplatform.io/refresh": "2"}))


@pytest.mark.parametrize("conditions, state", [
    ([], "running"),
    ([{"type": "Suspended", "status": "False"}], "running"),
    ([{"type": "FailureTarget", "status": "True"}], "running"),  # the pods are still stopping
    ([{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}], "complete"),
    ([{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}], "failed"),
])
def test_job_state(conditions, state):
    assert ds.job_state({"status": {"conditions": conditions}}) == state


# -- progress, messages and conditions --------------------------------------------------------------

@pytest.mark.parametrize("n, text", [(0, "0 B"), (950, "950 B"), (1000, "1 kB"), (1_200_000, "1.2 MB"),
                                     (100_000_000, "100 MB"), (1_050_000_000, "1.1 GB"), (None, "?"), (-1, "?")])
def test_sizes(n, text):
    assert ds.size_text(n) == text


def test_the_last_progress_line_of_a_log_tail():
    lines = ['{"phase":"copying","objects_done":1}\n', "not json\n", '{"phase":"copying","objects_done":12,'
             '"objects_total":1000,"bytes_done":1200000,"bytes_total":100000000}\n', '{"other": 1}\n', "Traceback…"]
    progress = ds.parse_progress(lines)
    assert progress["objects_done"] == 12
    assert ds.progress_message(progress, "s3://b/p") == "12 of 1000 objects, 1.2 MB of 100 MB"
    assert ds.parse_progress(["{half a li", ""]) is None
    assert ds.progress_message(None, "s3://b/p") == "waiting for the loader to start"
    assert ds.progress_message({"phase": "listing", "objects_listed": 3000}, "s3://b/p") == \
        "listing the objects of s3://b/p (3000 so far)"
    failed = {"phase": "failed", "reason": "StorageError", "error": "S3 answered 503 SlowDown listing s3://b/p/"}
    assert ds.progress_message(failed, "s3://b/p") == \
        "the last attempt failed (StorageError: S3 answered 503 SlowDown listing s3://b/p/); retrying"
    done = {"phase": "done", "objects_total": 200, "bytes_total": 1_300_000}
    assert ds.loaded_message(done, "s3://b/p") == "200 objects, 1.3 MB from s3://b/p"
    assert ds.loaded_message(None, "s3://b/p") == "loaded from s3://b/p"


def test_why_a_load_failed():
    job = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                                      "message": "Job has reached the specified backoff limit"}]}}
    pod = {"metadata": {"name": "coco-load-1-abcde"},
           "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}}
    denied = {"phase": "failed", "reason": "AccessDenied", "error": "access denied (InvalidAccessKeyId) listing …"}
    assert ds.failed_message(denied, pod, job) == "access denied (InvalidAccessKeyId) listing …"
    assert ds.failed_message(None, pod, job) == \
        "the loader exited with code 137 without saying why; see the log of the pod coco-load-1-abcde"
    oom = {"status": {"containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}}
    assert ds.failed_message(None, oom, job) == "the loader ran out of memory (OOMKilled)"
    assert ds.failed_message(None, None, job) == "the loader Job failed: Job has reached the specified backoff limit"


def test_why_a_loader_waits():
    missing = {"status": {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {
        "reason": "CreateContainerConfigError", "message": 'secret "s3-reader" not found'}}}]}}
    assert ds.waiting_message(missing) == \
        'the loader is waiting: CreateContainerConfigError: secret "s3-reader" not found'
    creating = {"status": {"containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    assert ds.waiting_message(creating) is None and ds.waiting_message(None) is None
    unscheduled = {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                              "message": "0/3 nodes are available: 3 Insufficient memory."}]}}
    assert ds.waiting_message(unscheduled) == \
        "the loader is waiting for a node: 0/3 nodes are available: 3 Insufficient memory."


def test_the_transition_time_moves_only_with_the_status():
    loading = ds.loaded_condition(False, "Loading", "1 of 2 objects", "2026-12-04T10:00:00Z", None)
    assert loading == {"type": "Loaded", "status": "False", "reason": "Loading", "message": "1 of 2 objects",
                       "lastTransitionTime": "2026-12-04T10:00:00Z"}
    failed = ds.loaded_condition(False, "Failed", "access denied", "2026-12-04T10:05:00Z", loading)
    assert failed["lastTransitionTime"] == "2026-12-04T10:00:00Z"  # still False
    loaded = ds.loaded_condition(True, "Loaded", "2 objects", "2026-12-04T10:06:00Z", failed)
    assert loaded["lastTransitionTime"] == "2026-12-04T10:06:00Z"
    assert ds.same_condition(loading, {**loading, "lastTransitionTime": "x"}) and not ds.same_condition(loading, failed)
    assert not ds.same_condition(None, loading)
    assert len(ds.loaded_condition(False, "Failed", "x" * 5000, "t", None)["message"]) < 1100
    assert ds.condition_of(pvc(status={"conditions": [{"type": "Resizing"}, loaded]})) == loaded
    assert ds.progress_annotation({"b": 1, "a": 2}) == '{"a":2,"b":1}' and ds.progress_annotation(None) == "{}"


@pytest.mark.parametrize("annotations, conditions, state", [
    ({"mlplatform.io/source": "s3://b/p"}, [], ("loading", "waiting for the loader to start")),
    ({}, [], ("ready", "")),  # no source: an admin filled it
    ({"mlplatform.io/source": "s3://b/p"}, [{"type": "Loaded", "status": "True", "reason": "Loaded"}], ("ready", "")),
    ({"mlplatform.io/source": "s3://b/p"},
     [{"type": "Loaded", "status": "False", "reason": "Loading", "message": "1 of 2 objects"}],
     ("loading", "1 of 2 objects")),
    ({}, [{"type": "Loaded", "status": "False", "reason": "Failed", "message": "access denied"}],
     ("failed", "access denied")),
    # a load that has begun: the condition still says the previous one's True (the operator writes
    # the annotations first), and the data are of another load than the one under way
    ({"mlplatform.io/source": "s3://b/p", "mlplatform.io/load-id": "new", "mlplatform.io/loaded": "old"},
     [{"type": "Loaded", "status": "True", "reason": "Loaded"}], ("loading", "a new load is starting")),
    ({"mlplatform.io/source": "s3://b/p", "mlplatform.io/load-id": "new", "mlplatform.io/loaded": "new"},
     [{"type": "Loaded", "status": "True", "reason": "Loaded"}], ("ready", "")),
])
def test_dataset_state(annotations, conditions, state):
    claim = {"metadata": {"name": "coco", "annotations": annotations}, "status": {"conditions": conditions}}
    assert dataset_state(claim) == state
    d = dataset_from_pvc(claim, MOUNTS)
    assert (d.state, d.message) == state


def test_dataset_state_reads_the_configured_source_annotation():
    claim = {"metadata": {"name": "coco", "annotations": {"example.com/from": "gs://b/p"}}}
    assert dataset_state(claim)[0] == "ready"
    assert dataset_from_pvc(claim, MountSettings({}, source_annotation="example.com/from")).state == "loading"


# -- the loader's own decisions ---------------------------------------------------------------------

@pytest.mark.parametrize("key, prefix, path", [
    ("coco/a.jpg", "coco/", "a.jpg"),
    ("coco/x/y/b.jpg", "coco/", "x/y/b.jpg"),
    ("coco/x/", "coco/", None),  # a folder marker
    ("coco/", "coco/", None),
    ("a.jpg", "", "a.jpg"),
    ("coco/.hidden", "coco/", ".hidden"),
    ("coco/x/.mlplatform-load.json", "coco/", "x/.mlplatform-load.json"),  # only the top level is the loader's
])
def test_keys_become_paths_under_the_folder(key, prefix, path):
    assert relative_path(key, prefix) == path


@pytest.mark.parametrize("key", ["coco/../etc/passwd", "coco/a//b", "coco/./a", "coco/..", "coco//a",
                                 "coco/a\x00b", "coco/.mlplatform-load.json", "coco/.mlplatform-tmp/x"])
def test_unsafe_keys_fail_the_load_naming_the_key(key):
    with pytest.raises(LoadError) as e:
        relative_path(key, "coco/")
    assert e.value.reason == "BadKey" and e.value.permanent and repr(key)[:20] in e.value.message


def test_a_file_and_a_folder_of_one_name_fail_the_load():
    check_paths([Obj("p/a", "a", 1, "e"), Obj("p/ab/c", "ab/c", 1, "e")])
    with pytest.raises(LoadError, match="'p/a/b/c' and 'p/a/b/c/d'|'p/a/b/c/d' and 'p/a/b/c'") as e:
        check_paths([Obj("p/a/b/c/d", "a/b/c/d", 1, "e"), Obj("p/a/b/c", "a/b/c", 1, "e")])
    assert e.value.reason == "BadKey"


def test_what_is_copied_again():
    objs = [Obj("p/a", "a", 10, '"e1"'), Obj("p/b", "b", 20, '"e2"'), Obj("p/c", "c", 30, '"e3"'),
            Obj("p/d", "d", 40, '"e4"'), Obj("p/e", "e", 50, '"e5"')]
    recorded = {"a": {"size": 10, "etag": '"e1"'}, "b": {"size": 20, "etag": '"old"'}, "c": {"size": 30, "etag": '"e3"'},
                "e": {"size": 50, "etag": '"e5"'}}
    present = {"a": 10, "b": 20, "c": 29, "d": 40}  # c: cut short; d: not in the manifest; e: file gone
    copy, keep = plan(objs, recorded, present)
    assert [o.path for o in keep] == ["a"] and [o.path for o in copy] == ["b", "c", "d", "e"]


def test_an_outcome_is_decided_once_per_load():
    def claim(load_id, status, reason):
        return {"metadata": {"annotations": {ds.LOAD_ID_ANNOTATION: load_id}},
                "status": {"conditions": [{"type": "Loaded", "status": status, "reason": reason, "message": ""}]}}

    assert ds.decided(claim("l1", "True", "Loaded"), "l1", complete=True)
    assert not ds.decided(claim("l1", "False", "Loading"), "l1", complete=True)  # an event before the outcome
    assert not ds.decided(claim("l0", "True", "Loaded"), "l1", complete=True)  # an older load's
    assert ds.decided(claim("l1", "False", "Failed"), "l1", complete=False)
    assert not ds.decided(claim("l1", "True", "Loaded"), "l1", complete=False)
    assert not ds.decided({"metadata": {}}, "l1", complete=True)
