"""Turns per session: strictly in order within a chat, concurrently across chats.

Each session with work has one worker task that takes its queued messages in
arrival order; a global limit caps how many turns run at once. A message that
arrives while its session is busy waits in the queue (``busy_mode = "queue"``)
or is answered together with the other waiting ones in the next turn
(``"collect"``); an edit of a waiting message changes it in place
(``replace_waiting``). ``stop`` cancels a session's running turn and drops what waits;
``shutdown`` lets running turns finish for a grace period, then cancels them.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from bot.core.messages import InboundMessage, SessionKey
from bot.daemon.stopping import CANCEL_WAIT_S, STOP

log = logging.getLogger(__name__)

SHUTDOWN = "interrupted by shutdown"


@dataclass(frozen=True, slots=True)
class Scheduled:
    """What makes a job a scheduled turn: its history, who started it, and where its
    result goes (the scheduler delivers it; the router does not)."""

    history: SessionKey | None
    origin: str
    context: str
    result: asyncio.Future[Any]


@dataclass(frozen=True, slots=True)
class Job:
    """One accepted message waiting for its turn; ``row_id`` is its inbound-store row."""

    row_id: int
    message: InboundMessage
    replayed: bool = False  # left unanswered before a restart
    scheduled: Scheduled | None = None
    joins: Literal["", "turn", "paste"] = ""
    """"turn": answered in one turn with the job queued before it (the same person wrote
    again within ``merge_window_ms``); "paste": also the next part of that job's text (a
    long paste the platform split into several messages)."""


TurnHandler = Callable[[list[Job]], Awaitable[None]]
DropHandler = Callable[[list[Job]], Awaitable[None]]


class SessionRunner:
    """Queues jobs per session and runs them through ``handler`` one turn at a time."""

    def __init__(
        self,
        handler: TurnHandler,
        *,
        max_concurrent: int = 4,
        busy_mode: Literal["queue", "collect"] = "queue",
        on_dropped: DropHandler | None = None,
    ) -> None:
        self._handler = handler
        self._on_dropped = on_dropped
        self._slots = asyncio.Semaphore(max_concurrent)
        self._busy_mode = busy_mode
        self._queues: dict[SessionKey, collections.deque[Job]] = {}
        self._workers: dict[SessionKey, asyncio.Task[None]] = {}
        self._running: set[SessionKey] = set()
        self._closing = False

    def submit(self, job: Job) -> int:
        """Queue ``job``; return how many turns are ahead of it in its session."""
        if self._closing:
            raise RuntimeError("the session runner is shutting down")
        key = job.message.session
        queue = self._queues.setdefault(key, collections.deque())
        queue.append(job)
        ahead = len(queue) - 1 + (1 if key in self._running else 0)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name=f"session {key}")
        return ahead

    def replace_waiting(
        self, key: SessionKey, original_id: str, revise: Callable[[InboundMessage], InboundMessage]
    ) -> Job | None:
        """Edit a message that waits in ``key``'s queue: the newest waiting version of the
        message ``original_id`` (the message itself, or an earlier edit of it waiting as a
        correction) becomes ``revise(it)``. The new job, or None when none waits."""
        queue = self._queues.get(key)
        if not queue:
            return None
        for index in reversed(range(len(queue))):
            job = queue[index]
            message = job.message
            if job.scheduled is None and original_id in (message.message_id, message.edit_of):
                queue[index] = dataclasses.replace(job, message=revise(message))
                return queue[index]
        return None

    def is_running(self, key: SessionKey) -> bool:
        """Whether a turn of this session is in progress."""
        return key in self._running

    def last_waiting(self, key: SessionKey) -> Job | None:
        """The newest job of this session whose turn has not started (None if none waits)."""
        queue = self._queues.get(key)
        return queue[-1] if queue else None

    def waiting(self, key: SessionKey) -> int:
        """How many messages of this session wait for a turn."""
        return len(self._queues.get(key, ()))

    def active(self) -> int:
        """How many turns are running now."""
        return len(self._running)

    def busy(self) -> bool:
        """Whether any session has work queued or running."""
        return bool(self._workers)

    async def idle(self) -> None:
        """Wait until no session has work."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def stop(self, key: SessionKey) -> bool:
        """Cancel the session's running turn and drop its queue; True if anything was stopped."""
        queue = self._queues.pop(key, collections.deque())
        worker = self._workers.get(key)
        if queue and self._on_dropped is not None:
            await self._on_dropped(list(queue))
        if worker is None or worker.done():
            return bool(queue)
        worker.cancel(STOP)
        await asyncio.gather(worker, return_exceptions=True)
        return True

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking jobs; give running turns ``grace_s`` seconds, then cancel everything.

        Jobs that never started stay pending in the inbound store, so they are
        answered after the next start.
        """
        self._closing = True
        for queue in self._queues.values():
            for job in queue:
                if job.scheduled is not None:
                    job.scheduled.result.cancel()
            queue.clear()
        workers = list(self._workers.values())
        if not workers:
            return
        _, late = await asyncio.wait(workers, timeout=grace_s)
        for task in late:
            task.cancel(SHUTDOWN)
        if late:
            log.warning("shutdown: %d turn(s) did not finish in %.0f s", len(late), grace_s)
            # Their clean-up (recording the interruption) is quick; one that hangs is left.
            _, stuck = await asyncio.wait(late, timeout=CANCEL_WAIT_S)
            if stuck:
                log.warning("shutdown: %d turn(s) did not end when interrupted", len(stuck))

    async def _work(self, key: SessionKey) -> None:
        try:
            while queue := self._queues.get(key):
                jobs = _next_turn(queue, self._busy_mode)
                for _ in jobs:
                    queue.popleft()
                async with self._slots:
                    self._running.add(key)
                    try:
                        await self._handler(jobs)
                    except Exception:
                        log.exception("turn handler failed in %s", key)
                    finally:
                        self._running.discard(key)
        finally:
            self._workers.pop(key, None)
            if not self._queues.get(key):
                self._queues.pop(key, None)


def _next_turn(queue: collections.deque[Job], busy_mode: str) -> list[Job]:
    """The jobs one turn answers: the first with the jobs that join it, or in collect mode
    every waiting message up to the next scheduled job (a scheduled turn runs alone)."""
    first = queue[0]
    if first.scheduled is not None:
        return [first]
    taken = [first]
    for job in itertools.islice(queue, 1, None):
        if job.scheduled is not None or not (job.joins or busy_mode == "collect"):
            break
        taken.append(job)
    return taken
