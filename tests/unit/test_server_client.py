"""The pure parts of the notebook-server client: SSE parsing split anywhere, where the server is
(environment), and Google's error JSON back into the backends' exceptions; log events with and
without a time; the job id a submit makes up."""

import datetime

import pytest

from server_ext.client.environment import server_from_environment
from server_ext.client.errors import from_response
from server_ext.client.sse import Event, SSEParser
from server_ext.errors import JobExists, JobFinished, JobNotFound, UpstreamError, UserInputError, google_error

pytestmark = pytest.mark.unit

STREAM = ("\ufeff: keepalive\r\n\r\nid: 1\ndata: {\"seq\": 1, \"text\": \"é\"}\n\n"
          "id: 2\rdata: a\rdata: b\r\r: keepalive\n\nevent: end\r\ndata: {\"state\": \"SUCCEEDED\"}\r\n\r\n"
          "id: 3\ndata: cut mid-event\n").encode()
EVENTS = [Event("message", '{"seq": 1, "text": "é"}', "1"), Event("message", "a\nb", "2"),
          Event("end", '{"state": "SUCCEEDED"}', "2")]


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(STREAM)])
def test_sse_events_are_the_same_however_the_bytes_are_split(size):
    parser = SSEParser()
    events = [e for i in range(0, len(STREAM), size) for e in parser.feed(STREAM[i:i + size])]
    assert events == EVENTS
    assert parser.last_id == "3"  # the cut event's id was read; its data never becomes an event


@pytest.mark.parametrize("env, found", [
    ({}, None),
    ({"JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:8888/user/alice/", "JUPYTERHUB_API_TOKEN": "t"},
     ("http://127.0.0.1:8888/user/alice/", "t")),
    ({"JUPYTERHUB_SERVICE_URL": "http://0.0.0.0:8888/user/alice", "JUPYTERHUB_API_TOKEN": "t"},
     ("http://127.0.0.1:8888/user/alice/", "t")),
    ({"JUPYTERHUB_SERVICE_URL": "http://:8888/user/bob/", "JUPYTERHUB_API_TOKEN": "t"},
     ("http://127.0.0.1:8888/user/bob/", "t")),
    ({"JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:8888/user/alice/"}, None),  # no token: not a match
    ({"JUPYTER_TOKEN": "t"}, None),  # a plain jupyter_server exports no URL of its own
    ({"JUPYTER_SERVER_URL": "http://localhost:8888", "JUPYTER_TOKEN": "t"}, ("http://localhost:8888/", "t")),
    ({"MLPLATFORM_SERVER_URL": "http://127.0.0.1:9/x/", "MLPLATFORM_SERVER_TOKEN": "m",
      "JUPYTERHUB_SERVICE_URL": "http://127.0.0.1:8888/user/alice/", "JUPYTERHUB_API_TOKEN": "t"},
     ("http://127.0.0.1:9/x/", "m")),
])
def test_server_from_environment(env, found):
    assert server_from_environment(env) == found


def answer(e):
    return google_error(e)


@pytest.mark.parametrize("error, job_id", [
    (UserInputError("trainingInput.scaleTier", "unknown tier"), "j1"),
    (UserInputError("project", "'alice' may not use project 'x'", 403), None),
    (JobNotFound("alice", "j1"), "j1"),
    (JobExists("alice", "j1"), "j1"),
    (JobFinished("j1", "SUCCEEDED"), "j1"),
    (UpstreamError("list pods", "connection refused"), "j1"),
])
def test_google_errors_come_back_as_the_same_exceptions(error, job_id):
    status, body = google_error(error)
    back = from_response(status, body, action="x", project="alice", job_id=job_id)
    assert (type(back), str(back)) == (type(error), str(error))
    read = dict(vars(back))
    if isinstance(error, UserInputError):  # the one violation this server sends, as a list
        assert read.pop("violations") == ((error.field, error.message),)
    assert read == vars(error)


def violation_answer(*pairs):
    return {"error": {"code": 400, "message": "invalid job", "status": "INVALID_ARGUMENT", "details": [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": f, "description": d} for f, d in pairs[:2]]},
        {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"description": "no field: skipped"}] + [{"field": f, "description": d}
                                                                      for f, d in pairs[2:]]}]}}


def test_every_field_violation_is_kept_in_order():
    pairs = [("trainingInput.pythonModule", "is required"), ("jobId", "must start with a letter"),
             ("trainingInput.hyperparameters.maxTrials", "must be at least 1")]
    e = from_response(400, violation_answer(*pairs), action="create job", project="alice", job_id="j1")
    assert (type(e), e.field, e.message, e.status) == (UserInputError, *pairs[0], 400)
    assert e.violations == tuple(pairs)
    assert str(e) == ("trainingInput.pythonModule: is required; jobId: must start with a letter; "
                      "trainingInput.hyperparameters.maxTrials: must be at least 1")
    bare = from_response(400, {"error": {"code": 400, "message": "bad body", "status": "INVALID_ARGUMENT"}},
                         action="create job", project="alice")
    assert (bare.field, bare.message, bare.violations) == ("request", "bad body", ())


def test_errors_that_are_not_the_apis_own():
    routed = from_response(404, None, action="get job j1", project="alice", job_id="j1")
    assert isinstance(routed, UpstreamError) and "no ml/v1 jobs API" in str(routed)
    refused = from_response(403, {"error": {"code": 403, "message": "Forbidden", "status": "PERMISSION_DENIED",
                                            "details": []}}, action="x", project="alice")
    assert (type(refused), refused.field, refused.status) == (UserInputError, "token", 403)
    broken = from_response(500, {"error": {"code": 500, "message": "internal error", "status": "INTERNAL"}},
                           action="list jobs", project="alice")
    assert isinstance(broken, UpstreamError) and str(broken) == "could not list jobs: internal error"


def test_a_log_event_keeps_the_time_the_server_sent_and_makes_none_up():
    from server_ext.client.rest import _log_line
    from server_ext.jobs.backend import LogLine

    timed = _log_line('{"seq": 3, "task": "master-replica-0", "text": "x", "time": "2026-12-03T15:54:02Z"}', "a")
    assert timed == LogLine(3, "master-replica-0", "x", "2026-12-03T15:54:02Z")
    plain = _log_line('{"seq": 3, "task": "master-replica-0", "text": "x"}', "a")
    assert plain == LogLine(3, "master-replica-0", "x") and plain.time is None and plain.stream is None
    err = _log_line('{"seq": 4, "task": "m", "text": "boom", "time": "2026-12-03T15:54:03.5Z", "stream": "stderr"}', "a")
    assert (err.time, err.stream) == ("2026-12-03T15:54:03.5Z", "stderr")
    assert _log_line('{"seq": 5, "task": "m", "text": "x", "stream": "tty"}', "a").stream is None
    with pytest.raises(UpstreamError):
        _log_line('["not", "an", "event"]', "a")


NOW = datetime.datetime(2026, 12, 3, 15, 54, 2, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize("module, job_id", [
    ("trainer.task", "task_20261203_155402"),
    ("task", "task_20261203_155402"),
    ("pkg._private", "private_20261203_155402"),
    ("pkg.2nd-stage", "nd_stage_20261203_155402"),
    ("", "job_20261203_155402"),
    (None, "job_20261203_155402"),
    ("m." + "x" * 300, "x" * 109 + "_20261203_155402"),
])
def test_default_job_id_is_the_modules_last_part_and_the_utc_time(module, job_id):
    from server_ext.client.submissions import default_job_id
    from server_ext.jobs.model import parse_job

    assert default_job_id(module, NOW) == job_id
    parse_job({"jobId": job_id + "_99", "trainingInput": {"pythonModule": "m", "packageUris": ["gs://b/t.tgz"]}})


def test_submit_without_a_job_id_gets_one_and_an_explicit_one_wins(monkeypatch):
    """The README's ``client.submit(module_name="trainer.task", package_path="trainer/trainer")``."""
    from server_ext.client import submissions
    from server_ext.client.submissions import submission_of

    monkeypatch.setattr(submissions, "_issued", set())

    doc = submission_of(None, "trainer/trainer", {"module_name": "trainer.task"}, now=NOW).job
    assert doc["jobId"] == "task_20261203_155402" and doc["trainingInput"]["pythonModule"] == "trainer.task"
    again = submission_of(None, "trainer/trainer", {"module_name": "trainer.task"}, now=NOW).job
    assert again["jobId"] == "task_20261203_155402_2"  # the same second in the same process
    config = "trainingInput: {pythonModule: census.train, packageUris: ['gs://b/t.tgz']}"
    assert submission_of(config, None, {}, now=NOW).job["jobId"] == "train_20261203_155402"
    assert submission_of(config, None, {"job_id": "mine"}, now=NOW).job["jobId"] == "mine"
    assert submission_of("jobId: named\n" + config, None, {}, now=NOW).job["jobId"] == "named"


def test_clients_are_held_weakly_and_their_connections_closed_at_exit():
    """What ``atexit`` runs (`_close_at_exit`) closes every live client's sessions on the client
    thread; the registry does not keep a client alive, and a collected one is closed too."""
    import gc
    import time
    import weakref

    from server_ext.client import notebook

    closed = []

    class Sessions:
        async def close(self):
            closed.append(self)

    first, second = Sessions(), Sessions()
    client = notebook.Client("http://127.0.0.1:9/", "t", project="p", jobs=first)
    other = notebook.Client("http://127.0.0.1:9/", "t", project="p", jobs=second)
    notebook._close_at_exit()
    assert closed == [first, second] or closed == [second, first]
    closed.clear()
    gone = weakref.ref(other)
    del other
    gc.collect()
    assert gone() is None and client in notebook._clients_alive
    deadline = time.monotonic() + 5
    while closed != [second]:  # the collected client's sessions are closed on the client thread
        assert time.monotonic() < deadline, closed
        time.sleep(0.01)
