"""The chat page's live updates: the feed's events as Server-Sent Events.

Each event goes out as ``id: EPOCH:N``, ``event: entry|remove|typing|reload`` and
one line of JSON, all ASCII (JSON escapes the rest), so no character of a reply, not
even half of an emoji cut by a streaming model, can fail to encode and end the
stream on the same event at every reconnect. The browser's ``EventSource`` sends
the last id back when it reconnects (``Last-Event-ID``); the stream goes on with
exactly the events after it, from the feed's bounded buffer of recent events
(``channels.web.feed.KEPT_EVENTS``). A page that fell further behind, or whose
events are from before a restart, gets ``reload`` and reads the stored
conversation afresh. A comment line every ``PING_S`` keeps proxies from closing a
quiet stream and finds out when the page has gone away.
"""

from __future__ import annotations

import json
import logging

from aiohttp import web

from channels.web.feed import Feed, FeedEvent

log = logging.getLogger(__name__)

PING_S = 15.0
RETRY_MS = 3000  # how long the browser waits before reconnecting


def resume_point(request: web.Request) -> tuple[str, int]:
    """(epoch, last event number) from ``Last-Event-ID``, else ``?epoch=&after=``."""
    last = request.headers.get("Last-Event-ID", "")
    epoch, _, number = last.partition(":")
    if not number:
        epoch, number = request.query.get("epoch", ""), request.query.get("after", "")
    return epoch, int(number) if number.isdigit() else 0


def frame(epoch: str, event: FeedEvent) -> bytes:
    """One event in the wire format."""
    data = json.dumps(event.data, separators=(",", ":"))  # ASCII: always encodes
    return f"id: {epoch}:{event.id}\nevent: {event.name}\ndata: {data}\n\n".encode("ascii")


async def serve_events(request: web.Request, feed: Feed) -> web.StreamResponse:
    """Stream the feed's events after the page's resume point until the page goes away
    or the channel stops."""
    epoch, after = resume_point(request)
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",  # nginx: pass each event on at once
        }
    )
    await response.prepare(request)
    if request.method == "HEAD":
        return response
    try:
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        while True:
            batch = await feed.wait(after, epoch, PING_S)
            if batch.closed:
                break
            if batch.stale:
                await response.write(b"event: reload\ndata: {}\n\n")
                break
            if not batch.events:
                await response.write(b": ping\n\n")
                continue
            await response.write(b"".join(frame(feed.epoch, event) for event in batch.events))
            after = batch.events[-1].id
    except ConnectionError:  # the page was closed or reloaded
        log.debug("web chat: a page stopped following the chat")
    return response
