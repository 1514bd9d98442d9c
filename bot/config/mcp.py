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

    name: str = Field(
        description="The server's name: 1 to 32 letters, digits, `_` or `-`, unique among the "
        "servers. Its tools reach the model as `mcp_NAME_TOOL`, and a stdio server's error "
        "output goes to `logs/mcp/NAME.log` in the data folder."
    )
    command: str | None = Field(
        default=None,
        description="The program that runs a stdio server, e.g. `npx`; give either `command` or "
        "`url`. It is started with the daemon (and `pinclaw agent` and `chat`), and again after "
        "1, 2, 4 … up to 60 s when it dies.",
    )
    args: list[str] = Field(
        default_factory=list,
        description="The command's arguments, e.g. "
        '`["-y", "@modelcontextprotocol/server-filesystem", "/home/pi/shared"]`.',
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables for the command, e.g. "
        '`{ GITHUB_TOKEN = "${GITHUB_TOKEN}" }`. Besides these the server gets only `HOME`, '
        "`LOGNAME`, `PATH`, `SHELL`, `TERM` and `USER`.",
    )
    url: str | None = Field(
        default=None,
        description="The `http://` or `https://` URL of a Streamable HTTP server; give either "
        "`url` or `command`.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with every request to a `url` server, e.g. "
        '`{ Authorization = "Bearer ${HA_TOKEN}" }`.',
    )
    enabled_tools: list[str] | None = Field(
        default=None,
        description="Only these of the server's tools are offered to the model, by the "
        'server\'s names for them, e.g. `["read_text_file", "list_directory"]`. Not set: all '
        "of them; empty: none.",
    )
    disabled_tools: list[str] = Field(
        default_factory=list,
        description='The server\'s tools never offered to the model, e.g. `["write_file"]`, even '
        "when `enabled_tools` names them.",
    )
    auto_approve: list[str] | bool = Field(
        default_factory=list,
        description="The server's tools that run without asking at `supervised`: a list of "
        "their names, or `true` for all. Empty or `false`: every call asks; at `readonly` only "
        "these tools run. After untrusted content every call asks (see `[security] "
        "after_untrusted`).",
    )
    timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds one call to the server may take."
    )
    max_result_chars: int = Field(
        default=16000,
        ge=100,
        description="Characters of a call's result kept; a longer result keeps its "
        "head and tail. Results are marked as untrusted, like web pages.",
    )

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
    """MCP servers whose tools the agent may use, each a `[[mcp.servers]]` table."""

    servers: list[McpServerConfig] = Field(
        default_factory=list,
        description="The MCP servers, each a `[[mcp.servers]]` table with a `name` and either a "
        "`command` (stdio) or a `url` (Streamable HTTP). Empty: no MCP tools.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> McpConfig:
        names = [s.name for s in self.servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"two MCP servers are named {dupes[0]!r}")
        return self
