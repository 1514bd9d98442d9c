"""``[[mcp.servers]]``: MCP servers whose tools the agent may use."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from bot.config.base import Section

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class McpServerConfig(Section):
    """One MCP server: a command to run (stdio) or a URL (Streamable HTTP).

    Its tools need approval at ``supervised`` unless ``auto_approve`` names them
    (or is true); ``enabled_tools`` (when set) and ``disabled_tools`` choose which
    tools the model sees.
    """

    name: str
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled_tools: list[str] | None = None
    disabled_tools: list[str] = Field(default_factory=list)
    auto_approve: list[str] | bool = Field(default_factory=list)
    timeout_s: float = Field(default=60.0, gt=0)
    max_result_chars: int = Field(default=16000, ge=100)

    @model_validator(mode="after")
    def _check_transport(self) -> McpServerConfig:
        if not _NAME.match(self.name):
            raise ValueError(f"name: expected 1-32 letters, digits, '_' or '-', got {self.name!r}")
        if self.command and self.url:
            raise ValueError(f"server {self.name!r} has both command and url; give one of them")
        if not self.command and not self.url:
            raise ValueError(f"server {self.name!r} needs a command (stdio) or a url (HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url: expected an http:// or https:// URL, got {self.url!r}")
        if self.command is None and (self.args or self.env):
            raise ValueError(f"server {self.name!r}: args and env only go with a command")
        if self.url is None and self.headers:
            raise ValueError(f"server {self.name!r}: headers only go with a url")
        return self

    def is_auto_approved(self, tool: str) -> bool:
        """Whether calls to ``tool`` run without asking."""
        if isinstance(self.auto_approve, bool):
            return self.auto_approve
        return tool in self.auto_approve

    def offers(self, tool: str) -> bool:
        """Whether the model may see ``tool`` (enabled and not disabled)."""
        if self.enabled_tools is not None and tool not in self.enabled_tools:
            return False
        return tool not in self.disabled_tools


class McpConfig(Section):
    """``[mcp]``: the MCP servers, each a ``[[mcp.servers]]`` table."""

    servers: list[McpServerConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> McpConfig:
        names = [s.name for s in self.servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"two MCP servers are named {dupes[0]!r}")
        return self
