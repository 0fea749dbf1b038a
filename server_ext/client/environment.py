"""Where the notebook server that a process runs inside is, read from that process's environment
(terminals and kernels inherit the server's). Pure: the environment is passed in.

`server_from_environment(env)` → ``(base_url, token)`` or None, first match wins:

1. ``MLPLATFORM_SERVER_URL`` + ``MLPLATFORM_SERVER_TOKEN``: set explicitly (any server);
2. ``JUPYTERHUB_SERVICE_URL`` + ``JUPYTERHUB_API_TOKEN``: a JupyterHub single-user server sets
   both for itself, so its terminals and kernels have them. The URL is the spawner's bind URL,
   the server's own address, never the hub's proxy: the kernel's requests (widgets poll every
   2 s) reach the server directly and are never counted as the proxy route's activity, which
   an idle culler would read as the user's;
3. ``JUPYTER_SERVER_URL`` + ``JUPYTER_TOKEN``: a plain jupyter_server puts neither into the
   environment of its kernels or terminals (it only reads ``JUPYTER_TOKEN``), so this matches only
   where a user or launcher exported both.

A bind address (``0.0.0.0``, ``::``, empty host: what a spawner gives a server to listen on) is
reached on the loopback interface. The base URL always ends with ``/``. An incomplete pair (a URL
without a token) does not match.
"""

from __future__ import annotations

from typing import Mapping
from urllib.parse import urlsplit, urlunsplit

PAIRS = (("MLPLATFORM_SERVER_URL", "MLPLATFORM_SERVER_TOKEN"),
         ("JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_API_TOKEN"),
         ("JUPYTER_SERVER_URL", "JUPYTER_TOKEN"))
_ANY = {"", "0.0.0.0", "::", "[::]", "*"}


def reachable_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = parts.netloc
    if host in _ANY or netloc.startswith(":"):
        netloc = "127.0.0.1" + (f":{parts.port}" if parts.port else "")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urlunsplit((parts.scheme or "http", netloc, path, "", ""))


def server_from_environment(env: Mapping[str, str]) -> tuple[str, str] | None:
    for url_name, token_name in PAIRS:
        url, token = env.get(url_name, "").strip(), env.get(token_name, "").strip()
        if url and token:
            return reachable_url(url), token
    return None
