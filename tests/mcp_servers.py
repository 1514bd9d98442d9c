"""MCP servers for the tests, written with the SDK's own ``MCPServer``.

``python -m tests.mcp_servers stdio`` serves over stdin/stdout;
``python -m tests.mcp_servers http PORT`` serves Streamable HTTP on 127.0.0.1:PORT/mcp.
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import EmbeddedResource, ImageContent, TextResourceContents

server = MCPServer("pinclaw-test", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text back, with a marker the tests look for."""
    return f"echo from mcp: {text}"


@server.tool()
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return f"sum is {a + b}"


@server.tool(name="delete-everything")
def delete_everything(target: str) -> str:
    """A tool that must never be offered (the tests disable it)."""
    return f"deleted {target}"


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after ``seconds`` (for timeouts)."""
    await anyio.sleep(seconds)
    return "finally"


@server.tool()
def picture() -> list[ImageContent | EmbeddedResource]:
    """A picture and a text resource."""
    image = ImageContent(
        type="image", data=base64.b64encode(b"x" * 300).decode(), mime_type="image/png"
    )
    note = TextResourceContents(uri="memo://today", mime_type="text/plain", text="buy soil")
    return [image, EmbeddedResource(type="resource", resource=note)]


@server.tool()
def crash() -> str:
    """End the server process at once, as a crashing server would."""
    os._exit(3)


def main(argv: list[str]) -> None:
    """Serve over the transport named in ``argv``."""
    if argv[:1] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
