"""An incremental Server-Sent Events parser (the WHATWG ``text/event-stream`` rules), pure.

`SSEParser.feed(chunk)` takes bytes as they arrive, split anywhere (inside a line, inside a
UTF-8 character, between the ``\\r`` and ``\\n`` of a line end), and returns the events completed
by that chunk, in order. Guarantees:

- lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a leading byte-order mark is dropped;
- ``:``-lines are comments (keepalives) and never make an event;
- ``data`` lines of one event are joined with ``\\n``; ``event`` defaults to ``"message"``;
- ``id`` is remembered across events (`SSEParser.last_id`, what ``Last-Event-ID`` resends);
- an event is only returned once its terminating blank line has arrived, so a connection that
  drops mid-event yields nothing of that event.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    type: str
    data: str
    id: str | None  # the last id seen in the stream when this event was dispatched


class SSEParser:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._skip_lf = False  # the previous chunk ended with "\r": a "\n" first here is the same line end
        self._type = ""
        self._data: list[str] = []
        self.last_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        text = self._decoder.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            self._skip_lf = False
            text = text.removeprefix("\n")
        self._buffer += text
        events: list[Event] = []
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return events
            end, width = cut
            lone_cr = self._buffer[end] == "\r" and width == 1
            line, self._buffer = self._buffer[:end], self._buffer[end + width:]
            if lone_cr and not self._buffer:
                self._skip_lf = True
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _line(self, line: str) -> Event | None:
        if line == "":
            data, kind = self._data, self._type or "message"
            self._data, self._type = [], ""
            if not data:
                return None
            return Event(kind, "\n".join(data), self.last_id)
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id" and "\0" not in value:
            self.last_id = value
        return None  # "retry" and unknown fields are ignored


def _line_end(buffer: str) -> tuple[int, int] | None:
    """(index, width) of the first line end in `buffer`; a lone "\\r" at the very end counts (a
    "\\n" that may follow in the next chunk is skipped then)."""
    cr, lf = buffer.find("\r"), buffer.find("\n")
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if cr + 1 < len(buffer) and buffer[cr + 1] == "\n":
        return cr, 2
    return cr, 1
