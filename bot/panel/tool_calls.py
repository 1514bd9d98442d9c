"""Tool calls a person starts in the panel, put through the policy gate like the agent's.

A page that acts on the world (the Hardware page switching a GPIO output)
does not call the device itself: it hands a ``ToolCall`` to the daemon's
``PolicyGate.execute`` with a ``ToolContext`` for the logged-in person
(``panel_context``), so the policy decides, an approval is asked where it says
so (the request goes where a job's would: the owner's private chat, and the
Approvals page lists it), and the gate writes the call to the audit log.

An approval can take minutes, and a page must not wait that long: ``PanelCalls``
runs each call as a named task, waits a moment for a quick answer, and keeps
the latest calls with how they went, for the page to show. The tasks still
waiting are cancelled when the panel's application is cleaned up (the daemon
stops).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from bot.agent.tool_registry import ToolExecutor
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.panel.context import panel_deps, panel_session

PANEL = "panel"  # the channel and origin of calls made in the panel
WAIT_S = 2.0  # how long a POST waits for a call to finish before saying it is waiting
KEPT = 20

State = Literal["waiting", "done", "failed"]


@dataclass(slots=True)
class PanelCall:
    """One call the panel put through the gate, and how it went so far."""

    id: int
    tool: str
    arguments: str
    by: str
    started: float
    state: State = "waiting"
    result: str = ""


class PanelCalls:
    """Tool calls from the panel through the policy gate, each a named, tracked task."""

    def __init__(self, gate: ToolExecutor, keep: int = KEPT) -> None:
        self._gate = gate
        self._recent: deque[PanelCall] = deque(maxlen=keep)
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)

    @property
    def recent(self) -> tuple[PanelCall, ...]:
        """The latest calls, newest first."""
        return tuple(reversed(self._recent))

    async def submit(self, call: ToolCall, ctx: ToolContext, wait_s: float = WAIT_S) -> PanelCall:
        """Start ``call``; return once it finished or after ``wait_s`` (then it is waiting,
        most likely for an approval, and finishes on its own)."""
        shown = ", ".join(f"{k}={v}" for k, v in call.arguments.items())
        record = PanelCall(next(self._ids), call.name, shown, ctx.sender_name, time.time())
        self._recent.append(record)
        task = asyncio.create_task(self._run(record, call, ctx), name=f"panel {call.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        await asyncio.wait({task}, timeout=wait_s)
        return record

    async def stop(self) -> None:
        """Cancel the calls still waiting."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, record: PanelCall, call: ToolCall, ctx: ToolContext) -> None:
        result = await self._gate.execute(call, ctx)  # never raises, but on cancel
        record.state = "done" if result.ok else "failed"
        record.result = result.output if result.ok else (result.error or "it failed")


CALLS: web.AppKey[PanelCalls] = web.AppKey("panel_calls", PanelCalls)


def keep_calls(app: web.Application, gate: ToolExecutor) -> None:
    """Put a ``PanelCalls`` on ``app`` (while the pages are added), stopped on cleanup."""
    if CALLS in app:
        return
    calls = PanelCalls(gate)
    app[CALLS] = calls

    async def stop(_: web.Application) -> None:
        await calls.stop()

    app.on_cleanup.append(stop)


def panel_calls(request: web.Request) -> PanelCalls:
    """The panel's tool calls (``keep_calls`` put them there)."""
    return request.app[CALLS]


def panel_context(request: web.Request) -> ToolContext:
    """The context of a call made by the logged-in person: their own ``panel`` session,
    the daemon's workspace and time zone."""
    session = panel_session(request)
    loaded = panel_deps(request).app.loaded
    person = str(session.person_id)
    return ToolContext(
        session=SessionKey(PANEL, person),
        workspace=loaded.workspace,
        timezone=loaded.timezone(),
        origin=PANEL,
        sender_id=person,
        sender_name=session.person_name,
    )
