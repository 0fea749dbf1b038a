"""Server-Sent Events bodies as the tests read them: a parser of their own, independent of the
client's incremental `server_ext.client.sse.SSEParser`, so a shared bug cannot hide in both."""

from __future__ import annotations


def sse_events(text: str) -> list[dict]:
    """Parse a Server-Sent Events body into [{"id", "event", "data"}] (comments skipped)."""
    events = []
    for block in text.split("\n\n"):
        event: dict = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            event[key] = value[1:] if value.startswith(" ") else value
        if event:
            events.append(event)
    return events
