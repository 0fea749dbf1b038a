"""A callable ``profile_list``: called with the spawner for each form and spawn, as KubeSpawner does.

KubeSpawner accepts ``c.KubeSpawner.profile_list = f`` where ``f(spawner)`` returns the list
(or an awaitable of it); hubs use it to make profiles per user (their groups, their auth state).
The platform accepts it the same way: at hub start the rest of the configuration is checked
(there is no spawner to call it with yet); for each spawn form and each spawn, `call` runs it with
that spawner and `hub_ext.spawners.platform.Runtime.for_profile_list` checks its result with the same
parser as a static list, its paths starting with `WHERE`. What it raises, or a result with
problems, refuses the spawn with `refusal`: an HTTP 500 whose message names the path at fault
(an administrator's mistake, not the user's). What the function raised is named by its type only:
its text and traceback go to the hub's log (an exception's text may carry a URL with a token or
an identity API's answer); a path or a parser message holds no secret.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable

from tornado import web

from hub_ext.core.errors import ConfigError, Problem

WHERE = "profile_list(spawner)"
log = logging.getLogger("mlplatform.profiles")


def is_callable(value: Any) -> bool:
    """Whether a ``profile_list`` setting is a function to call per spawn (not a list or dict)."""
    return callable(value) and not isinstance(value, (list, tuple, dict, type))


async def call(func: Callable, spawner) -> Any:
    """``func(spawner)``, awaited when it returns an awaitable; what it raises → `ConfigError`."""
    try:
        result = func(spawner)
        if inspect.isawaitable(result):
            result = await result
    except Exception as e:  # the operator's function: its text (a URL with a token, a group API's
        # answer) goes to the hub's log only; users and the API see the exception's type
        log.error("%s for %s raised", WHERE, getattr(getattr(spawner, "user", None), "name", spawner), exc_info=True)
        raise ConfigError([Problem(WHERE, f"raised {type(e).__name__} (the hub's log has the details)")]) from None
    return result


def refusal(e: ConfigError, user: str) -> web.HTTPError:
    """The spawn's answer when the profile list made for `user` cannot be used."""
    shown = "; ".join(str(p) for p in e.problems[:5]) + (f"; and {len(e.problems) - 5} more"
                                                          if len(e.problems) > 5 else "")
    text = (f"the hub's profile list for {user!r} is invalid: {shown} "
            "(an administrator must fix the hub's profile_list function)")
    return web.HTTPError(500, text.replace("%", "%%"))
