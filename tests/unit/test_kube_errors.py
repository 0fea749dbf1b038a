"""Kubernetes errors are translated once, in `hub_ext.kube.client`: the API's answers become the
platform's `KubeError`s (NotFound, Conflict, Gone, Forbidden, Invalid with its causes,
Unavailable), each an `UpstreamError` whose reason reads as before, and no other module of the
platform catches `ApiException` (only `kube_spawner`, around KubeSpawner's own calls).

`Kube` is driven through a stand-in for kubernetes_asyncio's `ApiClient` (the library, not ours)
that answers as the API server would: an `ApiException` with the Status body, or a timeout.
"""

from __future__ import annotations

import ast
import asyncio
import json
import pathlib

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from hub_ext.core.errors import UpstreamError, http_answer
from hub_ext.kube.client import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    Kube,
    KubeError,
    NotFound,
    Unavailable,
    error_of,
    reason,
)
from server_ext.errors import google_error

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]


def status(code: int, why: str, message: str, causes: list | None = None) -> str:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": why,
            "code": code}
    if causes is not None:
        body["details"] = {"causes": causes}
    return json.dumps(body)


class Answers:
    """kubernetes_asyncio's ApiClient as the API server answers: each call takes the next answer
    (an exception to raise, or the object to return)."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    async def call_api(self, path, method, **kwargs):
        self.calls.append((method, path))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def refused(code: int, why: str, message: str, causes: list | None = None) -> ApiException:
    e = ApiException(status=code, reason=why)
    e.body = status(code, why, message, causes)
    return e


@pytest.mark.parametrize("code, kind", [(404, NotFound), (409, Conflict), (410, Gone), (403, Forbidden),
                                        (422, Invalid), (429, Unavailable), (500, Unavailable),
                                        (503, Unavailable), (400, KubeError), (401, KubeError)])
def test_each_answer_has_its_kind(code, kind):
    e = error_of(code, "Why", status(code, "Why", "the message"), "read /api/v1/pods")
    assert type(e) is kind and isinstance(e, UpstreamError)
    assert e.code == code
    assert e.reason == f"Kubernetes answered {code} Why: the message"
    assert str(e) == f"could not read /api/v1/pods: Kubernetes answered {code} Why: the message"
    assert http_answer(e)[0] == 502 and google_error(e)[0] == 502  # as any UpstreamError at a face


def test_invalid_carries_the_field_causes():
    e = error_of(422, "Unprocessable Entity", status(422, "Invalid", 'ConfigMap "x_y" is invalid', [
        {"reason": "FieldValueInvalid", "message": "Invalid value: \"x_y\": a lowercase RFC 1123 subdomain",
         "field": "metadata.name"},
        {"reason": "FieldValueRequired", "message": "Required value"}]))
    assert isinstance(e, Invalid)
    assert e.causes == (("metadata.name", 'Invalid value: "x_y": a lowercase RFC 1123 subdomain'),
                        ("", "Required value"))


def test_an_answer_without_a_status_body_reads_as_before():
    assert error_of(502, "Bad Gateway", "<html>not json").reason == "Kubernetes answered 502 Bad Gateway"
    assert error_of(403, "Forbidden", None).reason == "Kubernetes answered 403 Forbidden:"


async def test_request_raises_the_platforms_errors_not_ApiException():
    kube = Kube(Answers(refused(409, "AlreadyExists", 'configmaps "a" already exists')), backoff=0)
    with pytest.raises(Conflict) as caught:
        await kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "p"}})
    assert caught.value.reason == 'Kubernetes answered 409 AlreadyExists: configmaps "a" already exists'
    assert caught.value.action == "create in /api/v1/namespaces/p/configmaps"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_get_and_delete_treat_not_found_as_absent():
    gone = refused(404, "NotFound", 'pods "x" not found')
    assert await Kube(Answers(gone)).get("/api/v1/namespaces/p/pods/x") is None
    assert await Kube(Answers(gone)).delete("/api/v1/namespaces/p/pods/x") is False


async def test_transient_answers_are_retried_then_unavailable():
    busy = [refused(503, "ServiceUnavailable", "etcd leader changed") for _ in range(4)]
    answers = Answers(*busy)
    with pytest.raises(Unavailable) as caught:
        await Kube(answers, retries=3, backoff=0).get("/api/v1/namespaces/p/pods/x")
    assert len(answers.calls) == 4 and caught.value.code == 503
    answers = Answers(refused(500, "InternalError", "boom"), {"kind": "Pod"})
    assert await Kube(answers, backoff=0).get("/api/v1/namespaces/p/pods/x") == {"kind": "Pod"}


async def test_a_create_refused_by_a_quota_not_yet_counted_is_sent_again(monkeypatch):
    """A new project's ResourceQuota: until the quota controller has counted it, the API server
    refuses creates it governs (nothing done), so the POST is sent again; another 403 is not."""
    import hub_ext.kube.client as kube_module
    monkeypatch.setattr(kube_module, "QUOTA_PENDING_POLL", 0)
    pending = refused(403, "Forbidden", 'tfjobs.kubeflow.org "j" is forbidden: status unknown for quota: '
                                        "mlplatform-resources, resources: count/tfjobs.kubeflow.org")
    answers = Answers(pending, pending, {"kind": "TFJob"})
    assert await Kube(answers, backoff=0).request("POST", "/apis/kubeflow.org/v1/namespaces/p/tfjobs", {}) == \
        {"kind": "TFJob"}
    assert len(answers.calls) == 3
    answers = Answers(*[pending] * (kube_module.QUOTA_PENDING_TRIES + 1))
    with pytest.raises(Forbidden):  # not for ever
        await Kube(answers, backoff=0).request("POST", "/apis/kubeflow.org/v1/namespaces/p/tfjobs", {})
    assert len(answers.calls) == kube_module.QUOTA_PENDING_TRIES + 1
    exceeded = refused(403, "Forbidden", 'pods "x" is forbidden: exceeded quota: q, requested: pods=1')
    answers = Answers(exceeded, {"kind": "Pod"})
    with pytest.raises(Forbidden):
        await Kube(answers, backoff=0).request("POST", "/api/v1/namespaces/p/pods", {})
    assert len(answers.calls) == 1


async def test_a_create_whose_webhook_could_not_be_called_is_sent_once_more(monkeypatch):
    """A webhook that could not be called (the API server's 500 "failed calling webhook"): admission
    failed before anything was stored, so a POST goes once more; a second such answer is raised, and
    a webhook's denial or another 500 is never sent again."""
    import hub_ext.kube.client as kube_module
    monkeypatch.setattr(kube_module, "WEBHOOK_RETRY_S", 0)
    late = refused(500, "InternalError", 'Internal error occurred: failed calling webhook "member-accounts.operator.'
                                         'mlplatform.io": failed to call webhook: context deadline exceeded')
    path = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/p/trainjobs"
    answers = Answers(late, {"kind": "TrainJob"})
    assert await Kube(answers, backoff=0).request("POST", path, {}) == {"kind": "TrainJob"}
    assert len(answers.calls) == 2
    answers = Answers(late, late, {"kind": "TrainJob"})
    with pytest.raises(Unavailable) as caught:
        await Kube(answers, backoff=0).request("POST", path, {})
    assert len(answers.calls) == 2 and "webhook member-accounts) is not answering" in caught.value.reason
    for other in (refused(500, "InternalError", "etcdserver: request timed out"),
                  refused(400, "BadRequest", 'admission webhook "member-accounts.operator.mlplatform.io" denied '
                                             "the request: spec: no")):
        answers = Answers(other, {"kind": "TrainJob"})
        with pytest.raises(KubeError):
            await Kube(answers, backoff=0).request("POST", path, {})
        assert len(answers.calls) == 1


async def test_a_timeout_is_unavailable_with_no_code_and_a_post_is_not_sent_twice():
    answers = Answers(asyncio.TimeoutError(), {"kind": "ConfigMap"})
    with pytest.raises(Unavailable) as caught:
        await Kube(answers, backoff=0).request("POST", "/api/v1/namespaces/p/configmaps", {})
    assert caught.value.code == 0 and len(answers.calls) == 1
    assert reason(caught.value) == "the Kubernetes API did not answer in time"


def test_reason_still_describes_kubespawners_own_ApiException():
    assert reason(refused(403, "Forbidden", "exceeded quota: q")) == "Kubernetes answered 403 Forbidden: exceeded quota: q"


def _catchers(path: pathlib.Path) -> list[int]:
    """Lines of `path` that name ApiException in an except clause or import it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            names = [n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in ast.walk(node.type)]
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
        if "ApiException" in names:
            found.append(node.lineno)
    return found


def test_only_the_api_layer_catches_ApiException():
    allowed = {"hub_ext/kube/client.py", "hub_ext/spawners/kube.py"}  # kube_spawner: around KubeSpawner's own calls
    offenders = {str(p.relative_to(ROOT)): _catchers(p) for area in ("hub_ext", "server_ext")
                 for p in sorted((ROOT / area).rglob("*.py"))}
    assert {p: lines for p, lines in offenders.items() if lines and p not in allowed} == {}


def test_the_platforms_webhook_not_answering_is_named_as_such():
    message = ('Internal error occurred: failed calling webhook "credential-mounts.operator.mlplatform.io": failed to '
               'call webhook: Post "https://mlplatform-operator.mlplatform-system.svc:443/credential-mounts?timeout=5s": '
               'dial tcp 10.96.0.12:443: connect: connection refused')
    e = error_of(500, "Internal Server Error", status(500, "InternalError", message), "create in /api/v1/namespaces/p/pods")
    assert isinstance(e, Unavailable)
    assert e.reason.startswith("the platform's operator (mlplatform operator, webhook credential-mounts) is not answering")
    assert "10.96.0.12" not in e.reason
    other = error_of(500, "Internal Server Error", status(500, "InternalError", message.replace("operator.mlplatform.io",
                                                                                                "example.com")))
    assert other.reason.startswith("Kubernetes answered 500 InternalError: Internal error occurred")
