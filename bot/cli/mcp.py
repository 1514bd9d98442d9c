"""``pinclaw mcp list``: each configured MCP server, whether it connects, and its tools.

Only argparse is imported at the top: the parser is built for every ``pinclaw`` command.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.cli.doctor.findings import Finding
    from bot.config import LoadedConfig
    from bot.config.mcp import McpServerConfig
    from bot.mcp.connection import ServerStatus

Subparsers = argparse._SubParsersAction  # the type argparse gives add_subparsers


def add_mcp_commands(
    sub: Subparsers[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register ``pinclaw mcp list``."""
    mcp = sub.add_parser(
        "mcp",
        parents=[common],
        help="MCP servers whose tools the assistant may use",
        description="MCP servers are configured as [[mcp.servers]] tables in the config file.",
    )
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION")
    listing = actions.add_parser(
        "list", parents=[common], help="connect to each server and show its state and tools"
    )
    listing.add_argument("--json", action="store_true", help="print the states as JSON")
    mcp.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    import asyncio

    from bot.config import load_config

    loaded = load_config(getattr(args, "config", None))
    if not loaded.config.mcp.servers:
        print("No MCP servers configured. Add a [[mcp.servers]] table to the config file.")
        return 0
    statuses = asyncio.run(check_servers(loaded, loaded.config.mcp.servers))
    if getattr(args, "json", False):
        print(json.dumps({s.name: s.as_dict() for s in statuses}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(server_lines({s.name: s.as_dict() for s in statuses})))
    return 0 if all(s.state == "connected" for s in statuses) else 1


async def check_servers(loaded: LoadedConfig, servers: list[McpServerConfig]) -> list[ServerStatus]:
    """Connect to ``servers``, list their tools, and disconnect."""
    from bot.mcp.manager import McpManager

    manager = McpManager(servers, loaded.data_dir / "logs" / "mcp", lambda tool: None)
    try:
        await manager.start()
        return manager.statuses()
    finally:
        await manager.stop()


def server_lines(servers: dict[str, dict[str, Any]]) -> list[str]:
    """One line per server (from ``ServerStatus.as_dict``), and its tools under it."""
    width = max((len(name) for name in servers), default=0)
    lines = []
    for name, server in servers.items():
        tools = list(server.get("tools", []))
        if server.get("state") == "connected":
            state = f"connected, {len(tools)} tool{'s' if len(tools) != 1 else ''}"
            if server.get("restarts"):
                state += f" (restarted {server['restarts']} times)"
        else:
            state = f"{server.get('state', '?')}: {server.get('reason') or 'not connected'}"
        lines.append(f"{name:<{width}}  {state}")
        if tools and server.get("state") == "connected":
            lines.append(f"{'':<{width}}  tools: {', '.join(tools)}")
    return lines


async def doctor_probe(loaded: LoadedConfig, server: McpServerConfig) -> Finding:
    """``pinclaw doctor``'s line for one server: it connects and lists N tools, or why not."""
    from bot.cli.doctor.findings import Finding

    [status] = await check_servers(loaded, [server])
    check = f"mcp {server.name}"
    if status.state == "connected":
        tools = len(status.tools)
        return Finding(check, "ok", f"MCP server {server.name}: connects and lists {tools} tools")
    where = server.command or server.url or ""
    return Finding(
        check,
        "fail",
        f"MCP server {server.name}: does not connect ({status.reason or 'no answer'})",
        f"check the [[mcp.servers]] table named {server.name!r} ({where})",
    )
