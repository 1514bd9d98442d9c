"""One MCP server's connection, held open by its own task and restarted with backoff.

The SDK's transports and ``ClientSession`` are anyio context managers whose
cancel scopes must be entered and left in the same task, so one task per server
opens them, keeps them while the server answers, and reopens them after it dies.
Other tasks call tools through the open session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bot.config.mcp import McpServerConfig
from bot.core.errors import ToolError
from bot.core.lean_imports import allow_skipped_imports
from bot.core.tool_api import ToolResult
from bot.mcp.tools import map_result

if TYPE_CHECKING:
    from mcp import ClientSession, types

log = logging.getLogger(__name__)

State = Literal["starting", "connected", "failed", "stopped"]
MAX_BACKOFF_S = 60.0
PING_INTERVAL_S = 10.0
CONNECT_TIMEOUT_S = 30.0  # starting a server (npx, uvx) may take longer than one call


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """What ``pinclaw mcp list``, ``status`` and ``doctor`` show for one server."""

    name: str
    state: State
    reason: str = ""
    tools: tuple[str, ...] = ()
    restarts: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The status as JSON-friendly values."""
        return {
            "state": self.state,
            "reason": self.reason,
            "tools": list(self.tools),
            "restarts": self.restarts,
        }


ToolsListed = Callable[["McpConnection", "list[types.Tool]"], None]


class McpConnection:
    """Keeps one server connected; ``call`` runs a tool on it."""

    def __init__(self, config: McpServerConfig, log_dir: Path, on_tools: ToolsListed) -> None:
        self.config = config
        self._log_dir = log_dir
        self._on_tools = on_tools
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._first = asyncio.Event()
        self._lost = asyncio.Event()
        self._state: State = "stopped"
        self._reason = ""
        self._tools: tuple[str, ...] = ()
        self._connects = 0

    def status(self) -> ServerStatus:
        """The server's state now."""
        restarts = max(0, self._connects - 1)
        return ServerStatus(self.config.name, self._state, self._reason, self._tools, restarts)

    async def start(self, wait_s: float) -> None:
        """Start connecting; wait up to ``wait_s`` for the first attempt to end."""
        if self._task is not None:
            return
        self._state = "starting"
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.config.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._first.wait()), wait_s)
        except TimeoutError:
            self._reason = f"it did not answer within {wait_s:g} s"
            log.warning("MCP server %s: %s; still trying", self.config.name, self._reason)

    async def stop(self) -> None:
        """Close the connection (and end a stdio server's process)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._session = None
        self._state = "stopped"

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Run ``tool``; raise ``ToolError`` when the server is not there to run it."""
        session = self._session
        if session is None or self._state != "connected":
            why = f" ({self._reason})" if self._reason else ""
            raise ToolError(
                f"the MCP server {self.config.name} is not running{why}; retrying. "
                "Tell the user the tool is unavailable for now."
            )
        try:
            result = await session.call_tool(tool, arguments)
        except (asyncio.CancelledError, TimeoutError):
            raise
        except Exception as exc:
            if _is_protocol_error(exc):
                raise ToolError(f"the MCP server {self.config.name} refused: {exc}") from None
            self._mark_lost(describe(exc))
            raise ToolError(
                f"the MCP server {self.config.name} stopped answering ({describe(exc)}); "
                "it is being restarted"
            ) from None
        return map_result(result, self.config.max_result_chars)

    def _mark_lost(self, reason: str) -> None:
        if self._state == "connected":
            self._state, self._reason = "failed", reason
        self._lost.set()

    async def _hold(self) -> None:
        delay = 1.0
        while True:
            try:
                async with self._open() as session:
                    listed = await _list_tools(session)
                    self._connects += 1
                    self._session, self._state, self._reason = session, "connected", ""
                    self._tools = tuple(t.name for t in listed if self.config.offers(t.name))
                    self._on_tools(self, listed)
                    self._first.set()
                    delay = 1.0
                    log.info("MCP server %s connected: %d tools", self.config.name, len(listed))
                    await self._watch(session)
            except Exception as exc:  # often an ExceptionGroup from the SDK's task groups
                self._state, self._reason = "failed", describe(exc)
            self._session = None
            self._state = "failed"
            self._first.set()
            log.warning(
                "MCP server %s is not running (%s); retrying in %g s",
                self.config.name,
                self._reason or "it stopped",
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    async def _watch(self, session: ClientSession) -> None:
        """Return when the server stops answering pings or a call found it gone."""
        self._lost.clear()
        while True:
            try:
                await asyncio.wait_for(self._lost.wait(), PING_INTERVAL_S)
                return
            except TimeoutError:
                pass
            try:
                await asyncio.wait_for(session.send_ping(), self.config.timeout_s)
            except Exception as exc:  # TimeoutError included
                self._reason = describe(exc) if str(exc) else "it stopped answering"
                return

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[ClientSession]:
        allow_skipped_imports()  # the SDK imports cryptography (through pyjwt)
        from mcp import ClientSession

        async with AsyncExitStack() as stack:
            if self.config.command is not None:
                from mcp.client.stdio import StdioServerParameters, stdio_client

                self._log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                errlog = stack.enter_context(
                    (self._log_dir / f"{self.config.name}.log").open("a", encoding="utf-8")
                )
                params = StdioServerParameters(
                    command=self.config.command,
                    args=list(self.config.args),
                    env=dict(self.config.env) or None,
                )
                read, write = await stack.enter_async_context(stdio_client(params, errlog))
            else:
                from mcp.client.streamable_http import streamable_http_client
                from mcp.shared._httpx_utils import create_mcp_http_client

                client = await stack.enter_async_context(
                    create_mcp_http_client(headers=dict(self.config.headers))
                )
                assert self.config.url is not None
                read, write = await stack.enter_async_context(
                    streamable_http_client(self.config.url, http_client=client)
                )
            session = await stack.enter_async_context(ClientSession(read, write))
            await asyncio.wait_for(session.initialize(), CONNECT_TIMEOUT_S)
            yield session


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    from mcp import types

    found: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        found.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return found


def _is_protocol_error(exc: Exception) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


def describe(exc: BaseException) -> str:
    """A short reason for a failure, from the innermost exception of a group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"the command was not found ({exc.filename or exc})"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if name == "MCPError" and text:
        return text[:200]  # the server's or the SDK's own words, e.g. "Connection closed"
    return (f"{name}: {text}" if text else name)[:200]
