"""``GET ml/v1/projects/{project}/jobs:watch``: a project's job listing as Server-Sent Events, for
the JupyterLab panel (one stream per project instead of re-reading the list):

    event: jobs
    data: {"jobs": [...]}        the whole listing, as ``GET …/jobs`` pages it, at once and again
                                 whenever it changes
    event: error                 a later read failed (e.g. the project is no longer the user's);
    data: {"message": "..."}     the stream ends

The listing is read on the server every `WATCH_EVERY_S` seconds (the Kubernetes backend answers
from its shared watch caches; the local one from SQLite) and sent only when it differs from the
last one sent; a comment (``: keepalive``) every `handlers.KEEPALIVE_S` seconds of silence. The
stream lasts until the client goes. Errors before the first byte (a project not the user's) are
Google's error JSON. Authenticated and authorized like every ``ml/v1`` handler; a read, so not the
user's activity.
"""

from __future__ import annotations

import asyncio
import json

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.iostream import StreamClosedError

from server_ext.errors import PlatformError
from server_ext.rest.handlers import KEEPALIVE_S, _Handler

WATCH_EVERY_S = 1.0
MAX_PAGES = 100  # 10,000 jobs


class JobsWatchHandler(_Handler):
    _gone = False

    def on_connection_close(self) -> None:
        self._gone = True

    async def _listing(self, service, project: str) -> list[dict]:
        jobs: list[dict] = []
        token = None
        for _ in range(MAX_PAGES):
            page = await service.list(self.user, project, None, "100", token)
            jobs += page.get("jobs", [])
            token = page.get("nextPageToken")
            if not token:
                break
        return jobs

    @web.authenticated
    @authorized("read")
    async def get(self, project: str):
        service = await self.service()
        text = json.dumps({"jobs": await self._listing(service, project)})  # errors as JSON, before any byte
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        last, quiet = None, 0.0
        try:
            while not self._gone:
                if text != last:
                    self.write(f"event: jobs\ndata: {text}\n\n")
                    await self.flush()
                    last, quiet = text, 0.0
                elif quiet >= KEEPALIVE_S:
                    self.write(": keepalive\n\n")
                    await self.flush()
                    quiet = 0.0
                await asyncio.sleep(WATCH_EVERY_S)
                quiet += WATCH_EVERY_S
                text = json.dumps({"jobs": await self._listing(service, project)})
        except StreamClosedError:
            return
        except PlatformError as e:
            self.log.info("ml/v1 jobs:watch of %s for %s ended: %s", project, self.user, e)
            self.write(f"event: error\ndata: {json.dumps({'message': str(e)})}\n\n")
        try:
            self.finish()
        except StreamClosedError:
            pass


routes = [(r"/ml/v1/projects/(?P<project>[^/]+)/jobs(?::|%3[Aa])watch", JobsWatchHandler)]
