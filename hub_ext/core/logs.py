"""The platform's hub-side log lines (the ``mlplatform.*`` loggers) in the hub's own format and
stream, from the moment the config file runs: ``[W 2026-12-03 15:40:01.123 mlplatform.login
settings:119] …``. Without this they reach Python's last-resort handler (warnings only, bare
text), so INFO lines such as a project's provisioning never showed and start-up warnings had no
level or time.

`use_hub_format()` is idempotent; `hub_ext.setup.configure` and `hub_ext.login` call it.
"""

from __future__ import annotations

import logging
import sys

LOGGER = "mlplatform"
# JupyterHub's default log_format and log_datefmt
FORMAT = "%(color)s[%(levelname)1.1s %(asctime)s.%(msecs).03d %(name)s %(module)s:%(lineno)d]%(end_color)s %(message)s"
DATEFMT = "%Y-%m-%d %H:%M:%S"


def use_hub_format(level: int = logging.INFO) -> logging.Logger:
    from jupyterhub.log import CoroutineLogFormatter

    logger = logging.getLogger(LOGGER)
    if not any(getattr(h, "_mlplatform", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(CoroutineLogFormatter(fmt=FORMAT, datefmt=DATEFMT))
        handler._mlplatform = True
        logger.addHandler(handler)  # still propagating: the hub's root logger has no handler
        if logger.level == logging.NOTSET:
            logger.setLevel(level)
    return logger
