"""The operator's admission decisions (hub_ext.operator.rules.admission), whole values: the credential
Secret check, and the JSON Patch that mounts credentials into a pod (applied to whole pods, and
through kopf's own patch object as the webhook hands it over)."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import kopf
import pytest

from hub_ext.core.credentials import secret_manifest, validate_files
from hub_ext.core.errors import UserInputError
from hub_ext.operator.rules import settings as op_settings
from hub_ext.operator.rules.admission import (
    Asked,
    check_secret,
    claims,
    loader_claim,
    mount_ops,
    read_only_ops,
    requested,
    secret_files,
)

pytestmark = pytest.mark.unit

SETTINGS = op_settings.parse(["--namespace", "mlplatform-system", "--identity", "t"])
MOUNTS = SETTINGS.mounts
SECRET_PART = "SuperSecretMaterial"
KEY = {"type": "service_account", "project_id": "vision-training", "private_key_id": "1",
       "private_key": f"-----BEGIN PRIVATE KEY-----\nMIIE{SECRET_PART}==\n-----END PRIVATE KEY-----\n",
       "client_email": "trainer@vision-training.iam.gserviceaccount.com"}
AWS_FILE = "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/b" \
           f"{SECRET_PART}\n"
ROOT = "/etc/mlplatform/credentials"
POD_ANN, SA_ANN = "metadata.annotations[mlplatform.io/credentials]", \
    "the ServiceAccount mlplatform-runner's metadata.annotations[mlplatform.io/credentials]"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def gcp_secret(name="gcs-key", key=None, labels=None, **extra) -> dict:
    secret = secret_manifest("p1", name, "gcp-credential", validate_files("gcp-credential", {
        "key.json": json.dumps(KEY)}), "", "alice")
    secret["data"] = {"key.json": b64(json.dumps(key if key is not None else KEY))}
    if labels is not None:
        secret["metadata"]["labels"] = labels
    return {**secret, **extra}


# ---- credential Secrets ----------------------------------------------------------------------------

def test_a_good_credential_is_its_kind_and_other_secrets_are_not_looked_at():
    assert check_secret(gcp_secret(), None, MOUNTS) == "gcp-credential"
    aws = {"type": "aws-credential",
           "metadata": {"name": "s3", "labels": {"mlplatform.io/credential": "aws-credential"}},
           "stringData": {"credentials": AWS_FILE, "config": "[default]\nregion = eu-west-1\n"}}
    assert check_secret(aws, None, MOUNTS) == "aws-credential"
    # another type, even with a reserved name, bad data and a wrong label: not this webhook's business
    other = {"type": "Opaque", "metadata": {"name": "jupyter-x", "labels": {"mlplatform.io/credential": "x"}},
             "data": {"key.json": "%%%"}}
    assert check_secret(other, None, MOUNTS) is None
    assert check_secret({"metadata": {"name": "x"}}, None, MOUNTS) is None


def test_configured_types_decide_what_is_a_credential():
    custom = op_settings.parse(["--namespace", "n", "--identity", "t",
                                "--credential-type", "gcp-credential=example.com/gcp"]).mounts
    assert check_secret(gcp_secret(), None, custom) is None
    assert check_secret(gcp_secret(type="example.com/gcp"), None, custom) == "gcp-credential"


@pytest.mark.parametrize("secret, old, field, message", [
    (gcp_secret(key={**KEY, "private_key": f"MIIE{SECRET_PART}"}), None,
     "data.key.json.private_key", "must be a PEM private key"),
    (gcp_secret(key={**KEY, "type": "authorized_user"}), None, "data.key.json.type", "must be \"service_account\""),
    (gcp_secret(data={"key.json": b64("{" + SECRET_PART)}), None, "data.key.json", "is not valid JSON"),
    (gcp_secret(data={}), None, "data.key.json", "is required"),
    (gcp_secret(data={"key.json": b64(json.dumps(KEY)), "token": b64(SECRET_PART)}), None, "data.token",
     "a gcp-credential holds only key.json"),
    (gcp_secret(data={"key.json": SECRET_PART + "%"}), None, "data.key.json", "is not base64"),
    (gcp_secret(data={"key.json": base64.b64encode(b"\xff\xfe" + SECRET_PART.encode()).decode()}), None,
     "data.key.json", "is not UTF-8 text"),
    (gcp_secret(data={"key.json": b64("x" * 70000)}), None, "data.key.json", "is larger than 64 KiB"),
    (gcp_secret(data=None, stringData={"key.json": json.dumps({**KEY, "client_email": SECRET_PART})}), None,
     "data.key.json.client_email", "must be the service account's e-mail address"),
    (gcp_secret(labels={}), None, "metadata.labels[mlplatform.io/credential]",
     "must be 'gcp-credential' on a Secret of type 'gcp-credential' (the hub sets it; made another way, add the "
     "label mlplatform.io/credential: gcp-credential to its metadata.labels)"),
    (gcp_secret(labels={"mlplatform.io/credential": "aws-credential"}), None,
     "metadata.labels[mlplatform.io/credential]", "must be 'gcp-credential'"),
    (gcp_secret(name="mlplatform-runner"), None, "metadata.name", "may not start with 'mlplatform-'"),
    (gcp_secret(name="jupyter-alice"), None, "metadata.name", "may not start with 'jupyter-'"),
    (gcp_secret(name="alice-hub-token"), None, "metadata.name", "may not end with '-hub-token'"),
    (gcp_secret(name="Key.JSON"), None, "metadata.name", "must be 1-40 lower-case letters"),
    ({"type": "aws-credential", "metadata": {"name": "s3", "labels": {"mlplatform.io/credential": "aws-credential"}},
      "data": {"credentials": b64(AWS_FILE + f"credential_process = {SECRET_PART}\n")}}, None,
     "data.credentials.credential_process", "is not allowed"),
    # an UPDATE that changes the data is checked as a CREATE is (a reserved name it already has may stay)
    (gcp_secret(name="jupyter-old", key={**KEY, "project_id": SECRET_PART}),
     gcp_secret(name="jupyter-old"), "data.key.json.project_id", "must be a Google Cloud project id"),
])
def test_a_bad_credential_is_refused_naming_the_field_and_never_the_value(secret, old, field, message):
    with pytest.raises(UserInputError) as e:
        check_secret(secret, old, MOUNTS)
    assert (e.value.field, e.value.message[:len(message)]) == (field, message)
    assert SECRET_PART not in str(e.value) and SECRET_PART.lower() not in str(e.value).lower()


def test_an_update_that_leaves_the_credential_as_it_is_is_allowed():
    unlabelled = gcp_secret(name="jupyter-old", labels={}, key={**KEY, "project_id": "Bad"})
    annotated = copy.deepcopy(unlabelled)
    annotated["metadata"]["annotations"] = {"x": "y"}
    annotated["metadata"]["finalizers"] = []
    assert check_secret(annotated, unlabelled, MOUNTS) == "gcp-credential"
    relabelled = copy.deepcopy(unlabelled)
    relabelled["metadata"]["labels"] = {"mlplatform.io/credential": "gcp-credential"}
    with pytest.raises(UserInputError) as e:  # labelling it is a change: its data is checked then
        check_secret(relabelled, unlabelled, MOUNTS)
    assert e.value.field == "data.key.json.project_id"
    assert check_secret(gcp_secret(name="jupyter-old"), gcp_secret(name="jupyter-old", key={**KEY, "project_id": "x"}),
                        MOUNTS) == "gcp-credential"  # an old reserved name may be kept while the data is fixed


def test_secret_files_merge_data_and_string_data():
    assert secret_files({"data": {"a": b64("1"), "b": b64("2")}, "stringData": {"b": "3"}}) == {"a": "1", "b": "3"}
    assert secret_files({}) == {}


# ---- pods ------------------------------------------------------------------------------------------

def pod(annotations=None, containers=None, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "train-", "namespace": "p1", "annotations": annotations or {}},
            "spec": {"serviceAccountName": "mlplatform-runner",
                     "containers": containers or [{"name": "main", "image": "python", "command": ["python"]}],
                     **spec}}


def gcp_volume(name="gcs-key", mode=0o440):
    return {"name": f"credential-{name}", "secret": {"secretName": name, "defaultMode": mode}}


def gcp_mount(name="gcs-key"):
    return {"name": f"credential-{name}", "mountPath": f"{ROOT}/{name}", "readOnly": True}


KINDS = {"gcs-key": "gcp-credential", "s3": "aws-credential", "opaque": "", "gone": None}


def mounted(p: dict, asked, kinds=KINDS) -> dict:
    return jsonpatch.apply_patch(p, mount_ops(p, asked, kinds, SETTINGS))


def test_requested_takes_the_pods_annotation_then_its_service_accounts():
    p = pod({"mlplatform.io/credentials": " gcs-key, ,s3,gcs-key"})
    assert requested(p, {"mlplatform.io/credentials": "s3,other"}, SETTINGS) == (
        Asked("gcs-key", POD_ANN), Asked("s3", POD_ANN), Asked("other", SA_ANN))
    assert requested(pod(), None, SETTINGS) == ()
    assert requested(pod({"mlplatform.io/credentials": ""}), {"x": "y"}, SETTINGS) == ()


def test_the_opt_out_skips_the_service_account_but_not_the_pods_own_annotation():
    p = pod({"mlplatform.io/credentials": "gcs-key", "mlplatform.io/inject-credentials": "False"})
    assert requested(p, {"mlplatform.io/credentials": "s3"}, SETTINGS) == (Asked("gcs-key", POD_ANN),)
    p = pod({"mlplatform.io/inject-credentials": "true"})
    assert requested(p, {"mlplatform.io/credentials": "s3"}, SETTINGS) == (Asked("s3", SA_ANN),)


@pytest.mark.parametrize("annotation, message", [
    ("gcs-key,mlplatform-operator-tls", "'mlplatform-operator-tls': may not start with 'mlplatform-'"),
    ("alice-hub-token", "'alice-hub-token': may not end with '-hub-token'"),
    ("Key_1", "'Key_1': must be 1-40 lower-case letters"),
])
def test_a_name_that_is_no_credentials_is_refused_on_the_annotation(annotation, message):
    with pytest.raises(UserInputError) as e:
        requested(pod({"mlplatform.io/credentials": annotation}), None, SETTINGS)
    assert (e.value.field, e.value.message[:len(message)]) == (POD_ANN, message)
    with pytest.raises(UserInputError) as e:
        requested(pod(), {"mlplatform.io/credentials": annotation}, SETTINGS)
    assert e.value.field == SA_ANN


def test_a_credentials_mode_lets_the_pods_user_read_it():
    """0440 with the pod's fsGroup; 0400 for root; 0444 with neither (a non-root image's user could
    not read a root-owned 0440 file: the tests' kubelet, running pods as their users, found it)."""
    def mode(**spec):
        ops = mount_ops(pod(**spec), [Asked("gcs-key", POD_ANN)], KINDS, SETTINGS)
        (vols,) = [o["value"] for o in ops if o["path"] == "/spec/volumes"]
        return vols[0]["secret"]["defaultMode"]
    assert mode(securityContext={"fsGroup": 100, "runAsUser": 1000}) == 0o440
    assert mode(securityContext={"runAsUser": 0}) == 0o400
    assert mode(securityContext={"runAsUser": 1000}) == 0o444
    assert mode() == 0o444


def test_a_credential_is_mounted_into_every_container_with_its_path_variables():
    p = pod(containers=[{"name": "main", "image": "python", "env": [{"name": "A", "value": "1"}],
                         "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                        {"name": "side", "image": "busybox"}],
            initContainers=[{"name": "init", "image": "busybox"}],
            volumes=[{"name": "data", "emptyDir": {}}], securityContext={"fsGroup": 100})
    aws_mount = {"name": "credential-s3", "mountPath": f"{ROOT}/s3", "readOnly": True}
    aws_env = [{"name": "AWS_CONFIG_FILE", "value": f"{ROOT}/s3/config"},
               {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": f"{ROOT}/s3/credentials"}]
    gcp_env = {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": f"{ROOT}/gcs-key/key.json"}
    ops = mount_ops(p, [Asked("gcs-key", POD_ANN), Asked("s3", SA_ANN)], KINDS, SETTINGS)
    assert ops == [
        {"op": "add", "path": "/spec/volumes/-", "value": gcp_volume()},
        {"op": "add", "path": "/spec/volumes/-", "value": {"name": "credential-s3",
                                                             "secret": {"secretName": "s3", "defaultMode": 0o440}}},
        {"op": "add", "path": "/spec/initContainers/0/volumeMounts", "value": [gcp_mount(), aws_mount]},
        {"op": "add", "path": "/spec/initContainers/0/env", "value": [*aws_env, gcp_env]},
        {"op": "add", "path": "/spec/containers/0/volumeMounts/-", "value": gcp_mount()},
        {"op": "add", "path": "/spec/containers/0/volumeMounts/-", "value": aws_mount},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": aws_env[0]},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": aws_env[1]},
        {"op": "add", "path": "/spec/containers/0/env/-", "value": gcp_env},
        {"op": "add", "path": "/spec/containers/1/volumeMounts", "value": [gcp_mount(), aws_mount]},
        {"op": "add", "path": "/spec/containers/1/env", "value": [*aws_env, gcp_env]},
    ]
    after = jsonpatch.apply_patch(p, ops)
    assert after["spec"]["containers"][0] == {
        "name": "main", "image": "python", "env": [{"name": "A", "value": "1"}, *aws_env, gcp_env],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, gcp_mount(), aws_mount]}
    assert mount_ops(after, [Asked("gcs-key", POD_ANN), Asked("s3", SA_ANN)], KINDS, SETTINGS) == []  # reinvoked


def test_a_root_pod_gets_owner_only_files():
    p = pod(securityContext={"runAsUser": 0})
    assert mounted(p, [Asked("gcs-key", POD_ANN)])["spec"]["volumes"] == [gcp_volume(mode=0o400)]


def test_what_the_spawner_or_a_job_mounted_already_is_not_mounted_twice():
    # the spawner's pod: its own volume for the Secret (any name), mounted at the credential's directory,
    # and GOOGLE_APPLICATION_CREDENTIALS set; an extra container (a sidecar) has none of it
    spawned = pod(containers=[{"name": "notebook", "image": "jupyter", "volumeMounts": [
                                  {"name": "theirs", "mountPath": f"{ROOT}/gcs-key/", "readOnly": True}],
                               "env": [{"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/elsewhere/key.json"}]},
                              {"name": "sidecar", "image": "busybox"}],
                  volumes=[{"name": "theirs", "projected": {"sources": [{"secret": {"name": "gcs-key"}}]}}])
    after = mounted(spawned, [Asked("gcs-key", SA_ANN)])
    assert after["spec"]["volumes"] == spawned["spec"]["volumes"]
    assert after["spec"]["containers"][0] == spawned["spec"]["containers"][0]
    assert after["spec"]["containers"][1] == {
        "name": "sidecar", "image": "busybox",
        "volumeMounts": [{"name": "theirs", "mountPath": f"{ROOT}/gcs-key", "readOnly": True}],
        "env": [{"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": f"{ROOT}/gcs-key/key.json"}]}


def test_a_credential_the_pod_holds_only_through_items_refuses_the_pod():
    # key.json renamed: GOOGLE_APPLICATION_CREDENTIALS would name a file that is not there
    partly = pod(volumes=[{"name": "theirs", "secret": {"secretName": "gcs-key",
                                                        "items": [{"key": "key.json", "path": "sa.json"}]}}])
    with pytest.raises(UserInputError) as e:
        mount_ops(partly, [Asked("gcs-key", POD_ANN)], KINDS, SETTINGS)
    assert e.value.field == POD_ANN and "through items" in e.value.message


@pytest.mark.parametrize("asked, kinds, field, message", [
    ([Asked("gone", SA_ANN)], KINDS, SA_ANN, "the credential 'gone' does not exist in the namespace 'p1'"),
    ([Asked("opaque", POD_ANN)], KINDS, POD_ANN,
     "the Secret 'opaque' is not a credential (it has no label mlplatform.io/credential; a credential is a Secret "
     "labelled aws-credential or gcp-credential)"),
    ([Asked("odd", POD_ANN)], {"odd": "ssh-key"}, POD_ANN,
     "the Secret 'odd' is not a credential (its label mlplatform.io/credential is 'ssh-key'"),
    ([Asked("gcs-key", POD_ANN), Asked("other", SA_ANN)], {**KINDS, "other": "gcp-credential"}, SA_ANN,
     "choose at most one gcp-credential (already chose 'gcs-key')"),
])
def test_a_credential_that_cannot_be_mounted_refuses_the_pod(asked, kinds, field, message):
    with pytest.raises(UserInputError) as e:
        mount_ops(pod(), asked, kinds, SETTINGS)
    assert (e.value.field, e.value.message[:len(message)]) == (field, message)


def test_a_volume_name_taken_by_something_else_refuses_the_pod():
    p = pod(volumes=[{"name": "credential-gcs-key", "emptyDir": {}}])
    with pytest.raises(UserInputError) as e:
        mount_ops(p, [Asked("gcs-key", POD_ANN)], KINDS, SETTINGS)
    assert e.value.field == "spec.volumes" and "'credential-gcs-key'" in e.value.message


def test_nothing_asked_nothing_changed():
    assert mount_ops(pod(), [], {}, SETTINGS) == []


def test_kopfs_patch_carries_the_ops_as_the_webhook_hands_them_over():
    """The webhook adds the ops as a transformation of kopf's patch; kopf answers the JSON Patch it
    diffs from them, which must give the API server the same pod."""
    p = pod(containers=[{"name": "main", "image": "python", "env": [{"name": "A", "value": "1"}]}])
    ops = mount_ops(p, [Asked("gcs-key", POD_ANN)], KINDS, SETTINGS)
    patch = kopf.Patch(body=kopf.Body(copy.deepcopy(p)))
    patch.fns.append(lambda raw: jsonpatch.apply_patch(raw, ops, in_place=True))
    answered = patch.as_json_patch()
    assert answered and jsonpatch.apply_patch(p, answered) == jsonpatch.apply_patch(p, ops)
    assert p == pod(containers=[{"name": "main", "image": "python", "env": [{"name": "A", "value": "1"}]}])


# ---- dataset mounts ---------------------------------------------------------------------------------

def _dataset_pod(read_only_volume=None, read_only_mount=None, labels=None, owner=None) -> dict:
    source = {"claimName": "coco", **({"readOnly": read_only_volume} if read_only_volume is not None else {})}
    mount = {"name": "data", "mountPath": "/data", **({"readOnly": read_only_mount} if read_only_mount is not None else {})}
    return {"metadata": {"name": "p", "namespace": "proj", "labels": labels or {},
                         "ownerReferences": [owner] if owner else []},
            "spec": {"volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "home"}},
                                 {"name": "data", "persistentVolumeClaim": source}],
                     "initContainers": [{"name": "fetch", "volumeMounts": [mount]}],
                     "containers": [{"name": "a", "volumeMounts": [{"name": "home", "mountPath": "/home"}, mount]},
                                    {"name": "b"}]}}


def test_every_mount_of_a_dataset_becomes_read_only_and_nothing_else_changes():
    pod = _dataset_pod(read_only_mount=False)
    assert claims(pod) == {"home", "coco"}
    ops = read_only_ops(pod, {"coco"})
    patched = jsonpatch.apply_patch(pod, ops)
    assert patched["spec"]["volumes"][1]["persistentVolumeClaim"] == {"claimName": "coco", "readOnly": True}
    assert patched["spec"]["volumes"][0] == pod["spec"]["volumes"][0]
    assert [m.get("readOnly") for c in patched["spec"]["initContainers"] + patched["spec"]["containers"]
            for m in c.get("volumeMounts") or []] == [True, None, True]
    assert read_only_ops(patched, {"coco"}) == []  # reinvoked: nothing more
    assert read_only_ops(pod, set()) == []


def test_only_a_pod_controlled_by_a_job_that_names_the_claim_may_be_its_loader():
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "load-coco", "uid": "u1", "controller": True}
    loader = _dataset_pod(labels={"mlplatform.io/dataset-loader": "coco"}, owner=job)
    assert loader_claim(loader, "mlplatform.io/dataset-loader") == ("load-coco", "u1", "coco")
    for pod in (_dataset_pod(labels={"mlplatform.io/dataset-loader": "coco"}),  # no owner
                _dataset_pod(labels={"mlplatform.io/dataset-loader": "coco"}, owner={**job, "kind": "PyTorchJob"}),
                _dataset_pod(labels={"mlplatform.io/dataset-loader": "coco"}, owner={**job, "controller": False}),
                _dataset_pod(owner=job)):
        assert loader_claim(pod, "mlplatform.io/dataset-loader") is None
    # the label names the dataset, whose data may be on another of its volumes (a reload in use):
    # whether the Job is that dataset's loader is the webhook's to read
    other = _dataset_pod(labels={"mlplatform.io/dataset-loader": "other"}, owner=job)
    assert loader_claim(other, "mlplatform.io/dataset-loader") == ("load-coco", "u1", "other")


def test_a_pod_mounts_only_its_own_jobs_or_servers_copies():
    from hub_ext.operator.rules.admission import refuse_foreign_copies

    def claim(name, owner_uid=None):
        meta = {"name": name, "labels": {"mlplatform.io/dataset-copy-of": "frames"}}
        if owner_uid:
            meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner_uid}]
        return {"metadata": meta}

    def pod(name=None, owner_uid=None):
        meta = {"name": name} if name else {"generateName": "x-"}
        if owner_uid:
            meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner_uid, "controller": True}]
        return {"metadata": meta}

    job_copy, server_copy = claim("copy-b-frames-copy", "uid-b"), claim("jupyter-alice-frames-copy")
    refuse_foreign_copies(pod(owner_uid="uid-b"), {"copy-b-frames-copy": job_copy})  # the job's own pod
    refuse_foreign_copies(pod("jupyter-alice"), {"jupyter-alice-frames-copy": server_copy})  # the server's
    refuse_foreign_copies(pod(owner_uid="uid-k"), {"frames": {"metadata": {"name": "frames"}}})  # not a copy
    for attempt, found in [(pod(owner_uid="uid-k"), {"copy-b-frames-copy": job_copy}),
                           (pod("jupyter-bob"), {"jupyter-alice-frames-copy": server_copy}),
                           (pod(owner_uid="uid-k"), {"jupyter-alice-frames-copy": server_copy}),
                           (pod("jupyter-alice", owner_uid="uid-k"), {"copy-b-frames-copy": job_copy})]:
        with pytest.raises(UserInputError) as e:
            refuse_foreign_copies(attempt, found)
        assert e.value.status == 403 and e.value.field == "spec.volumes" and "private copy" in e.value.message
    with pytest.raises(UserInputError) as e:
        refuse_foreign_copies(pod(owner_uid="uid-k"), {"copy-c-frames-copy": None})
    assert "does not exist yet" in e.value.message
