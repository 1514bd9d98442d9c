"""An MCP server's tool as a PinClaw ``Tool``: its name, schema, risk and result mapping."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from bot.agent.tool_registry import truncate_result
from bot.config.mcp import McpServerConfig
from bot.core.conversation import ToolSpec
from bot.core.errors import ToolError
from bot.core.tool_api import Assessment, Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from mcp import types

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")

CallMcp = Callable[[str, dict[str, Any]], Awaitable[ToolResult]]
"""Calls a tool on the server by its own name; raises ``ToolError`` when it cannot."""


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: ``mcp_<server>_<tool>``, only [A-Za-z0-9_], at most 64."""
    return _UNSAFE.sub("_", f"mcp_{server}_{tool}")[:MAX_NAME]


class _Arguments(BaseModel):
    """Any JSON object: the server checks its arguments against its own schema."""

    model_config = ConfigDict(extra="allow")


def _arguments_key(values: BaseModel) -> str:
    return json.dumps(values.model_extra or {}, sort_keys=True, ensure_ascii=False)


class McpTool(Tool):
    """A tool served by an MCP server; calls go through the registry and gate like any other."""

    def __init__(
        self,
        server: McpServerConfig,
        remote: str,
        description: str,
        schema: Mapping[str, Any],
        call: CallMcp,
    ) -> None:
        # Not Tool.__init__: the schema comes from the server, not from a signature.
        self.server = server.name
        self.remote = remote
        self.name = tool_name(server.name, remote)
        label = f"[from the MCP server '{server.name}'] "
        self.description = label + (description.strip() or f"the {remote} tool")
        auto = server.is_auto_approved(remote)
        self.risk = "low" if auto else "medium"
        self.effect = "network"
        self.untrusted_output = True
        self._assess = None
        self.timeout_s = server.timeout_s
        self.approval_fields = None
        self.approval_key = _arguments_key
        self.taints = lambda ctx, values: f"the MCP server '{server.name}'"
        self.check = None  # nothing to look up before the gate decides
        self.arguments_model = _Arguments
        self._container_fields = frozenset()
        self._schema = _object_schema(schema)
        self._spec = None
        self._call = call
        self._reason = "" if auto else f"{self.name} is a tool of the MCP server '{server.name}'"

    def spec(self) -> ToolSpec:
        """The server's description and JSON schema (the provider cleans it)."""
        if self._spec is None:
            self._spec = ToolSpec(self.name, self.description, self._schema)
        return self._spec

    def validate(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Check that required parameters are there; the server checks the rest."""
        required = self._schema.get("required") or []
        missing = [key for key in required if key not in arguments]
        if missing:
            params = ", ".join(self._schema.get("properties") or {}) or "none"
            raise ToolError(
                f"invalid arguments for {self.name}: {', '.join(repr(m) for m in missing)} "
                f"required. Parameters: {params}. Correct the arguments and call the tool again."
            )
        return _Arguments.model_validate(dict(arguments))

    def assess(self, ctx: ToolContext, values: BaseModel) -> Assessment:
        """Medium risk (ask at ``supervised``) unless the config auto-approves the tool.

        What a server's tool does is unknown, so every call counts as acting: after
        untrusted content it asks, auto-approved or not."""
        return Assessment(self.risk, self._reason, acts=True)

    async def run(self, ctx: ToolContext, values: BaseModel) -> ToolResult:
        """Call the tool on its server."""
        return await self._call(self.remote, dict(values.model_extra or {}))


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(schema)
    if result.get("type") != "object":
        result = {"type": "object", "properties": {}}
    result.setdefault("properties", {})
    return result


def map_result(result: types.CallToolResult, limit: int) -> ToolResult:
    """Text, pictures and resources of an MCP result as one capped ``ToolResult``."""
    parts = [_describe(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if result.is_error:
        mapped = ToolResult.failure("the MCP tool reported an error", output=text)
    else:
        mapped = ToolResult.success(text or "(the tool returned nothing)")
    return truncate_result(mapped, limit)


def _describe(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(block.data) * 3 // 4
        return f"[{kind} ({block.mime_type}, about {size} bytes): not shown to you]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {resource.uri}]\n{text}"
        mime = resource.mime_type or "binary data"
        return f"[resource {resource.uri} ({mime}): binary content not shown]"
    if kind == "resource_link":
        return f"[resource link {block.uri}: {block.name}]"
    return f"[{kind or 'unknown'} content not shown]"
