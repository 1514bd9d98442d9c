"""The MCP servers of the config: started with the core, their tools added to the registry."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config.mcp import McpServerConfig
from bot.core.tool_api import Tool
from bot.mcp.connection import CONNECT_TIMEOUT_S, McpConnection, ServerStatus
from bot.mcp.tools import McpTool, tool_name

if TYPE_CHECKING:
    from mcp import types

log = logging.getLogger(__name__)


class McpManager:
    """Owns one ``McpConnection`` per configured server; idempotent start and stop."""

    def __init__(
        self,
        servers: list[McpServerConfig],
        log_dir: Path,
        add_tool: Callable[[Tool], None],
        *,
        taken: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self._add_tool = add_tool
        self._taken = taken
        self._added: set[str] = set()
        self._connections = [McpConnection(s, log_dir, self._register) for s in servers]
        self._started = False

    async def start(self) -> None:
        """Connect every server at once; wait for each first attempt (a failure is logged)."""
        if self._started:
            return
        self._started = True
        await asyncio.gather(*(c.start(CONNECT_TIMEOUT_S) for c in self._connections))
        for status in self.statuses():
            if status.state != "connected":
                log.warning("MCP server %s did not start: %s", status.name, status.reason)

    async def stop(self) -> None:
        """Disconnect every server, side by side (each may take seconds to end its process)."""
        await asyncio.gather(*(connection.stop() for connection in self._connections))
        self._started = False

    def statuses(self) -> list[ServerStatus]:
        """Each server's state, in config order."""
        return [c.status() for c in self._connections]

    def _register(self, connection: McpConnection, listed: list[types.Tool]) -> None:
        """Add the tools a server offers that the model does not know yet."""
        config = connection.config
        for remote in listed:
            if not config.offers(remote.name):
                continue
            name = tool_name(config.name, remote.name)
            if name in self._added:
                continue
            if self._taken(name):
                log.warning("MCP tool %s clashes with another tool's name; left out", name)
                continue
            self._added.add(name)
            self._add_tool(
                McpTool(
                    config,
                    remote.name,
                    remote.description or remote.title or "",
                    remote.input_schema,
                    connection.call,
                )
            )
