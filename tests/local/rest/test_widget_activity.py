"""What counts as the user's activity of a notebook server, on a real server (the extension on the
local backend, the example trainer as real processes):

- the jobs API's reads (list, get, a log stream, trial metrics: what widgets and panels do by
  themselves every few seconds) leave jupyter_server's ``api_last_activity`` alone; creating and
  cancelling a job move it;
- widgets no view speaks to go quiet: no message to the views (kernel messages count as activity)
  and no request of the poll, while the job keeps running and changing; a view's ``alive`` wakes
  them (so does a reloaded page's request for the state), and they make good what they held back
  (the table's delta from where it stopped, the log's reset, the status held back).

Widgets run with no frontend (`comm.create_comm` records what they send), as in
`test_notebook_client`."""

from __future__ import annotations

import asyncio
import datetime
import json
import time

import comm
import pytest

from server_ext.client.notebook import Client
from server_ext.widgets import liveness, state
from server_ext.widgets.sync import JobsPoll
from server_ext.widgets.views import JobDetail, JobsTable
from tests.bench.widget_traffic import TRAFFIC, RecordingComm, from_view
from tests.local.rest.conftest import PROJECT, job_body

pytestmark = pytest.mark.local

LONG_AGO = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture
def jp_server_config(jp_server_config):
    """Running jobs' own activity off (test_running_jobs_activity has it): here only requests move it."""
    jp_server_config["MLPlatformApp"]["running_jobs_are_activity"] = False
    return jp_server_config


@pytest.fixture
def client(jp_serverapp, http_server, http_server_port, jp_base_url):
    client = Client(f"http://127.0.0.1:{http_server_port[-1]}{jp_base_url}", jp_serverapp.identity_provider.token,
                    project=PROJECT)
    yield client
    client.close()


def test_reads_are_not_activity_and_writes_are(jp_fetch, run, jp_serverapp):
    settings = jp_serverapp.web_app.settings

    def moved(method, *parts, body=None, params=None):
        settings["api_last_activity"] = LONG_AGO
        sent = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        resp = run(jp_fetch("ml", "v1", "projects", *parts, method=method, body=sent, params=params or {},
                            raise_error=False))
        return resp.code, settings["api_last_activity"] != LONG_AGO

    status, active = moved("POST", PROJECT, "jobs", body=job_body("act_long", "--epochs=1000", "--sleep=0.5"))
    assert status == 200 and active
    for parts, params in ((("jobs",), {}), (("jobs",), {"filter": "labels.team=vision"}),
                          (("jobs", "act_long"), {}), (("jobs", "act_long", "logs"), {"follow": "false"}),
                          (("jobs", "act_long", "trials", "1", "metrics"), {}), (("jobs", "nope"), {})):
        status, active = moved("GET", PROJECT, *parts, params=params)
        assert not active, (parts, status)
    status, active = moved("POST", PROJECT, "jobs", "act_long:cancel")
    assert status == 200 and active
    assert jp_serverapp.web_app.last_activity() >= LONG_AGO


class Table(JobsTable):
    """A jobs table that counts its transitions (the hooks a subclass uses to pause a log stream)."""

    def __init__(self, *args, **kwargs):
        self.transitions: list[str] = []
        super().__init__(*args, **kwargs)

    def _going_quiet(self) -> None:
        self.transitions.append("quiet")
        super()._going_quiet()

    def _resume(self) -> None:
        self.transitions.append("resumed")
        super()._resume()


def test_widgets_no_view_speaks_to_go_quiet_and_a_view_wakes_them(client, run, monkeypatch):
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    monkeypatch.setattr(liveness, "QUIET_AFTER_S", 2.0)
    poll = JobsPoll(client, PROJECT, interval=0.5)

    def until(predicate, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.05)

    def go():
        client.submit(job_body("act_run", "--epochs=1000", "--sleep=0.2"))
        table = Table(client, poll=poll)
        detail = JobDetail(client, "act_run", poll=poll)
        t0, first = time.monotonic(), len(TRAFFIC.contents)
        from_view(table, {"type": "ready"})
        from_view(detail, {"type": "ready"})
        until(lambda: any(r[3] == "log_append" for r in TRAFFIC.since(t0)))
        # no view says anything: after QUIET_AFTER_S both are quiet; allow one poll in flight
        time.sleep(liveness.QUIET_AFTER_S + 1.0)
        t1, polls = time.monotonic(), poll.polls
        client.submit(job_body("act_more", "--epochs=1", "--sleep=0"))  # the table would change
        table.status = "held back"  # a trait set while quiet
        time.sleep(3.0)  # the trainer logs 5 lines a second meanwhile
        assert TRAFFIC.since(t1) == [], "a widget no view speaks to sent messages"
        assert poll.polls == polls, "a poll no awake widget listens to made requests"
        assert table.transitions == ["quiet"]
        assert detail._logs._reader is None, "a quiet job detail still reads its log stream"
        # the page is reloaded: its widget manager asks the table for its state first (an answer
        # held back would leave the view unrendered), then the view says it is alive
        t2 = time.monotonic()
        table._handle_msg({"content": {"data": {"method": "request_state"}}, "buffers": []})
        assert [r for r in TRAFFIC.since(t2) if r[2] == "update"], "the state a page asks for is held back"
        from_view(table, {"type": "alive"})
        until(lambda: any(r[3] in ("delta", "snapshot") for r in TRAFFIC.since(t2)))
        assert table.transitions == ["quiet", "resumed"]
        updates = [r for r in TRAFFIC.since(t2) if r[2] == "update"]
        from_view(detail, {"type": "alive"})
        until(lambda: any(r[3] == "log_reset" for r in TRAFFIC.since(t2)))
        until(lambda: any(r[3] == "log_append" for r in TRAFFIC.since(t2)))
        client.job("act_run").cancel()
        table.close()
        detail.close()
        return TRAFFIC.contents[first:], updates

    sent, updates = run(asyncio.to_thread(go))
    assert updates, "the status held back is sent on waking"
    # what the table's view saw is consistent: a snapshot, then deltas numbered one after the other
    # (a view that saw a gap would ask again), and it ends with the job added while quiet
    rev, rows = None, {}
    for m in sent:
        if m.get("type") == "snapshot":
            rev, rows = m["rev"], dict(m["rows"])
        elif m.get("type") == "delta":
            assert rev is not None and m["rev"] == rev + 1, (rev, m)
            rev, rows = m["rev"], state.apply(rows, m)
    assert {"act_run", "act_more"} <= set(rows), rows
