"""Structured logs: one JSON object per line (time, level, logger, message, and the exception's
type only; a traceback goes out only with ``--log-format text``, for a person at a terminal)."""

from __future__ import annotations

import json
import logging
import logging.config


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info and record.exc_info[0] is not None:
            entry["exception"] = record.exc_info[0].__name__
        return json.dumps(entry)


def configure(fmt: str, level: str = "INFO") -> None:
    """The operator process's logging: everything (ours under ``mlplatform.operator``, kopf's,
    aiohttp's) through one stderr handler in `fmt`; kopf's per-event lines and aiohttp's access
    lines only from WARNING up."""
    logging.config.dictConfig({
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter},
                       "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": fmt}},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {"kopf": {"level": "WARNING"}, "aiohttp.access": {"level": "WARNING"}},
    })
