"""A loopback stand-in for github.com's OAuth app flow and the REST API GitHubOAuthenticator uses.

:class:`GitHubAPI` serves, on a free 127.0.0.1 port, what GitHubOAuthenticator 17 calls with
``github_url = GitHubAPI.url`` (so ``github_api = url + "/api/v3"``, as for GitHub Enterprise):

- ``GET /login/oauth/authorize``: a sign-in form (login + password); ``POST`` it to be redirected
  to the client's ``redirect_uri`` with ``code`` and the unchanged ``state``;
- ``POST /login/oauth/access_token``: checks client id, secret, code and (PKCE) the verifier;
  answers ``{"access_token", "token_type": "bearer", "scope": "read:org,read:user"}``;
- ``GET /api/v3/user``, ``/user/orgs``, ``/user/teams`` (Bearer/token auth, list answers with
  ``Link`` pagination headers), ``/orgs/{org}/members/{user}`` and
  ``/orgs/{org}/teams/{team}/members/{user}`` (204 member, 404 not), shaped as GitHub's.

Users: ``{"login": {"password", "id", "name", "email", "orgs": [...], "teams": {"org": ["team-slug"]}}}``;
:attr:`users` may be changed while it runs. Unknown tokens get 401 like GitHub's "Bad credentials".
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

from hub_ext.local.demo import free_port


class GitHubAPI:
    def __init__(self, client_id: str, client_secret: str, users: dict):
        self.client_id, self.client_secret, self.users = client_id, client_secret, users
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.codes: dict[str, tuple[str, str | None]] = {}  # code → (login, PKCE challenge)
        self.tokens: dict[str, str] = {}  # access token → login
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> GitHubAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: tokens travel in URLs of real GitHub flows
                pass

            def send(self, status, body=None, content_type="application/json", headers=()):
                data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def form(self):
                n = int(self.headers.get("Content-Length") or 0)
                return {k: v[0] for k, v in parse_qs(self.rfile.read(n).decode()).items()}

            def do_GET(self):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/login/oauth/authorize":
                    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                                     for k, v in query.items())
                    page = (f"<!doctype html><title>Sign in to GitHub</title><h1>Sign in to GitHub</h1>"
                            f'<form method="post" action="/login/oauth/authorize">{hidden}'
                            '<input id="login" name="login"><input id="password" name="password" type="password">'
                            '<button id="sign-in" type="submit">Sign in</button></form>')
                    return self.send(200, page.encode(), "text/html")
                login = api.tokens.get(self.headers.get("Authorization", "").split(" ")[-1])
                if login is None or login not in api.users:
                    return self.send(401, {"message": "Bad credentials"})
                u = api.users[login]
                parts = url.path.removeprefix("/api/v3").strip("/").split("/")
                if parts == ["user"]:
                    return self.send(200, {"login": login, "id": u["id"], "name": u.get("name"),
                                           "email": u.get("email"), "type": "User"})
                if parts == ["user", "orgs"]:
                    return self.send(200, [{"login": o, "id": i} for i, o in enumerate(u.get("orgs", []))])
                if parts == ["user", "teams"]:
                    teams = [{"slug": t, "name": t, "organization": {"login": org}}
                             for org, ts in u.get("teams", {}).items() for t in ts]
                    return self.send(200, teams)
                if len(parts) == 4 and parts[0] == "orgs" and parts[2] == "members":
                    member = parts[1] in api.users.get(parts[3], {}).get("orgs", [])
                    return self.send(204 if member else 404, None if member else {"message": "Not Found"})
                if len(parts) == 6 and parts[0] == "orgs" and parts[2] == "teams" and parts[4] == "members":
                    teams = api.users.get(parts[5], {}).get("teams", {}).get(parts[1], [])
                    member = parts[3] in teams
                    return self.send(204 if member else 404, None if member else {"message": "Not Found"})
                return self.send(404, {"message": "Not Found"})

            def do_POST(self):
                url = urlsplit(self.path)
                form = self.form()
                if url.path == "/login/oauth/authorize":
                    u = api.users.get(form.get("login", ""))
                    if u is None or u["password"] != form.get("password"):
                        return self.send(401, b"Incorrect username or password.", "text/html")
                    code = secrets.token_hex(10)
                    api.codes[code] = (form["login"], form.get("code_challenge"))
                    target = form["redirect_uri"] + "?" + urlencode({"code": code, "state": form.get("state", "")})
                    return self.send(302, b"", "text/html", [("Location", target)])
                if url.path == "/login/oauth/access_token":
                    login, challenge = api.codes.pop(form.get("code", ""), (None, None))
                    verifier = form.get("code_verifier", "")
                    digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
                    if (login is None or form.get("client_id") != api.client_id or
                            form.get("client_secret") != api.client_secret or
                            (challenge and digest.decode() != challenge)):
                        return self.send(200, {"error": "bad_verification_code",
                                               "error_description": "The code passed is incorrect or expired."})
                    token = "gho_" + secrets.token_hex(16)
                    api.tokens[token] = login
                    return self.send(200, {"access_token": token, "token_type": "bearer",
                                           "scope": "read:org,read:user"})
                return self.send(404, {"message": "Not Found"})

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
