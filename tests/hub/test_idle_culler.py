"""An abandoned notebook gives its GPU slice back: the real ``jupyterhub-idle-culler`` as a hub
service, the demo hub (local runtime, LocalPlatformSpawner), alice's server on a "Small GPU slice"
(MIG 1g.5gb), a kernel started through the hub's proxy whose cell submits a job and shows
``widgets.jobs()`` and ``widgets.job(...)`` (so the kernel polls the jobs API every 2 s and streams
the job's log), a client speaking the widget protocol over the kernel's websocket as a browser
would (``ready``, then ``alive``). The job has ended by the time the user leaves: a running local
job keeps its server active on purpose (its processes are the server's;
`tests/local/rest/test_running_jobs_activity.py`), the widgets watching it never do.

1. While the view says it is alive, the server is kept: it outlives the culler's timeout several
   times over, and the widgets keep sending.
2. Tab closed, token revoked, user logged out: the widgets go quiet, the jobs API's reads do not
   count as activity, so the culler stops the server and the slice is free again on the spawn form.

The activity settings are short so that this takes about a minute: the hub reads the proxy's
routes every 2 s (``last_activity_interval``), the server reports every 2 s
(``JUPYTERHUB_ACTIVITY_INTERVAL``), the culler culls after 15 s idle, looking every 3 s, and the
kernel's widgets go quiet 6 s after the last view message (``liveness.QUIET_AFTER_S``, 30 s by
default). Without the fix the server is never culled: the widgets' requests and comm messages
count as activity."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import sys
import time
import uuid
from urllib.parse import urlsplit

import aiohttp
import pytest

from hub_ext.local.demo import DemoSecrets, demo_source
from tests.conftest import ROOT
from tests.hub.test_hub_harness import demo_hub_config, form_login
from tests.hub.test_local_platform import server_env

pytestmark = pytest.mark.hub

TIMEOUT_S, CULL_EVERY_S, INTERVAL_S, QUIET_S = 15, 3, 2, 6
TRAINER = ROOT / "examples" / "trainer" / "trainer"

CELL = """
import json
from server_ext import client, widgets
from server_ext.widgets import liveness
liveness.QUIET_AFTER_S = {quiet}
job = client.submit({job!r})
table, detail = widgets.jobs(), widgets.job(job.id)
display(table, detail)
print("WIDGETS " + json.dumps({{"table": table.main.comm.comm_id, "detail": detail.comm.comm_id,
                                "url": table.main._client.base_url}}))
"""


def culled_hub_config(tmp_path, secrets) -> str:
    settings = demo_hub_config(tmp_path, secrets)
    hub = settings["JupyterHub"]
    hub["last_activity_interval"] = INTERVAL_S
    hub["services"] = [{"name": "idle-culler", "command": [
        sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={TIMEOUT_S}", f"--cull-every={CULL_EVERY_S}"]}]
    hub["load_roles"] = [{"name": "idle-culler", "services": ["idle-culler"],
                          "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"]}]
    settings["Spawner"]["environment"] = {**settings["Spawner"]["environment"],
                                          "JUPYTERHUB_ACTIVITY_INTERVAL": str(INTERVAL_S)}
    return demo_source(settings)


class View:
    """A browser's side of the kernel's websocket (jupyter_server's JSON protocol): runs cells,
    speaks the widget protocol to comms, and keeps what the widgets send."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws, self.session = ws, uuid.uuid4().hex
        self.custom: list[dict] = []  # the widgets' custom messages
        self.custom_at = 0.0  # when the last one came
        self.stream = ""
        self.idle: set[str] = set()  # execute requests that ended
        self._reader = asyncio.ensure_future(self._read())

    def _message(self, msg_type: str, content: dict) -> str:
        msg_id = uuid.uuid4().hex
        self.last_id = msg_id
        return json.dumps({"header": {"msg_id": msg_id, "msg_type": msg_type, "username": "alice",
                                      "session": self.session, "version": "5.3",
                                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
                           "parent_header": {}, "metadata": {}, "content": content, "channel": "shell",
                           "buffers": []})

    async def _read(self) -> None:
        async for frame in self.ws:
            if frame.type != aiohttp.WSMsgType.TEXT:
                continue
            msg = json.loads(frame.data)
            kind, content = msg["header"]["msg_type"], msg.get("content", {})
            if kind == "stream":
                self.stream += content.get("text", "")
            elif kind == "comm_msg" and content.get("data", {}).get("method") == "custom":
                self.custom.append(content["data"]["content"])
                self.custom_at = time.monotonic()
            elif kind == "status" and content.get("execution_state") == "idle":
                self.idle.add(msg.get("parent_header", {}).get("msg_id", ""))
            elif kind == "error":
                self.stream += "\n".join(content.get("traceback", []))

    async def run(self, code: str, timeout: float = 90) -> None:
        await self.ws.send_str(self._message("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True}))
        msg_id, deadline = self.last_id, time.monotonic() + timeout
        while msg_id not in self.idle:
            assert time.monotonic() < deadline, f"the cell did not end:\n{self.stream}"
            await asyncio.sleep(0.1)

    async def say(self, comm_id: str, content: dict) -> None:
        await self.ws.send_str(self._message("comm_msg", {
            "comm_id": comm_id, "data": {"method": "custom", "content": content}}))

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


def server_of(hub, user: str = "alice") -> dict | None:
    return hub.api("GET", f"/users/{user}").json()["servers"].get("")


async def test_an_abandoned_server_with_live_widgets_is_culled_and_its_slice_freed(hub_factory, tmp_path):
    secrets = DemoSecrets.generate()
    hub = hub_factory(culled_hub_config(tmp_path, secrets))
    assert hub.api("POST", "/users/alice").status_code in (201, 409)
    r = hub.api("POST", "/users/alice/server", json={"profile": "mig-1g"})
    assert r.status_code in (201, 202), r.text
    await asyncio.to_thread(hub.wait_for_server, "alice")
    session, r = form_login(hub.url, "alice", secrets.user_password)
    assert r.status_code == 302
    assert "1 of 2 free" in session.get(f"{hub.url}/hub/spawn/alice/second", timeout=30).text
    r = hub.api("POST", "/users/alice/tokens", json={"note": "the browser of the idle culler test"})
    assert r.status_code == 201, r.text
    token, token_id = r.json()["token"], r.json()["id"]
    own_url = server_env(hub, "alice")["JUPYTERHUB_SERVICE_URL"]

    job = {"jobId": "abandoned", "labels": {"team": "vision"},
           "trainingInput": {"scaleTier": "BASIC", "pythonModule": "trainer.task", "packageUris": [TRAINER.as_uri()],
                             "args": ["--epochs=70", "--sleep=0.5"]}}  # outlives phase 1
    headers = {"Authorization": f"token {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{hub.url}/user/alice/api/kernels", json={"name": "python3"}) as resp:
            assert resp.status == 201, await resp.text()
            kernel = (await resp.json())["id"]
        ws = await http.ws_connect(f"{hub.url.replace('http', 'ws')}/user/alice/api/kernels/{kernel}/channels")
        view = View(ws)
        await view.run(CELL.format(quiet=QUIET_S, job=job))
        found = re.search(r"WIDGETS (\{.*\})", view.stream)
        assert found, view.stream
        widgets = json.loads(found.group(1))
        # the kernel's jobs client calls its own server, not the hub's proxy (whose route activity counts)
        assert urlsplit(widgets["url"]).port == urlsplit(own_url).port != urlsplit(hub.url).port, widgets
        for name in ("table", "detail"):
            await view.say(widgets[name], {"type": "ready"})

        # 1. a view that says it is alive keeps the server, well past the culler's timeout
        kept_until = time.monotonic() + TIMEOUT_S + 2 * CULL_EVERY_S + 2 * INTERVAL_S
        while time.monotonic() < kept_until:
            for name in ("table", "detail"):
                await view.say(widgets[name], {"type": "alive"})
            await asyncio.sleep(QUIET_S / 3)
        assert (await asyncio.to_thread(server_of, hub)) is not None, "culled while a view was alive"
        kinds = {m.get("type") for m in view.custom}
        assert {"snapshot", "log_reset", "log_append"} <= kinds, kinds
        assert time.monotonic() - view.custom_at < QUIET_S, "the widgets stopped while their view was alive"
        ended_by = time.monotonic() + 90  # the job ends while the view is still there
        while not any(m.get("type") == "log_end" for m in view.custom):
            assert time.monotonic() < ended_by, "the job did not end"
            for name in ("table", "detail"):
                await view.say(widgets[name], {"type": "alive"})
            await asyncio.sleep(QUIET_S / 3)

        # 2. the tab is closed, the browser's token revoked, the user logged out
        await view.close()
    assert hub.api("DELETE", f"/users/alice/tokens/{token_id}").status_code == 204
    session.get(f"{hub.url}/hub/logout", timeout=30)
    left_at = time.monotonic()
    deadline = left_at + QUIET_S + TIMEOUT_S + 2 * CULL_EVERY_S + 4 * INTERVAL_S + 30
    while (server := await asyncio.to_thread(server_of, hub)) is not None:
        assert time.monotonic() < deadline, f"not culled {time.monotonic() - left_at:.0f} s after the user left " \
                                            f"(last activity {server.get('last_activity')})"
        await asyncio.sleep(1)
    assert re.search(r"Culling server alice\b", hub.log_text()), hub.log_tail()
    print(f"culled {time.monotonic() - left_at:.0f} s after the user left")

    # the slice is free again, and nothing runs on it
    gone_by = time.monotonic() + 15
    while left := [p.cmdline for p in hub.processes() if "trainer.task" in p.cmdline or "singleuser" in p.cmdline]:
        assert time.monotonic() < gone_by, left
        await asyncio.sleep(0.5)
    session, r = form_login(hub.url, "alice", secrets.user_password)
    assert r.status_code == 302
    assert "2 of 2 free" in session.get(f"{hub.url}/hub/spawn", timeout=30).text
