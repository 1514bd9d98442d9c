"""``[security]``: what the agent may do, and where.

The defaults are the safe ones: supervised autonomy, file tools inside the
workspace, the usual secret-holding folders forbidden, private network
addresses refused, and per-person limits on tool use and model tokens.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bot.config.base import Section

Autonomy = Literal["readonly", "supervised", "full"]
ShellSandbox = Literal["auto", "required", "off"]
AfterUntrusted = Literal["ask", "rules"]
"""Once a turn has read untrusted content, calls with side effects ask ("ask"), or the
usual rules apply ("rules")."""

DEFAULT_FORBIDDEN_PATHS = [
    "/etc",
    "/root",
    "/proc",
    "/sys",
    "/boot",
    "/dev",
    "/var/lib",
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.config",
    "~/.netrc",
    "~/.pinclaw",
    "~/.gitconfig",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.yarnrc",
    "~/.pypirc",
    "~/.docker",
    "~/.kube",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.m2/settings.xml",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.vault-token",
    "~/.azure",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.terraform.d",
    "~/.terraformrc",
    "~/.s3cfg",
    "~/.boto",
    "~/.oci",
    "~/.pulumi",
    "~/.gradle/gradle.properties",
    "~/.smbcredentials",
    "~/.mozilla",
    "~/.thunderbird",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.mysql_history",
    "~/.psql_history",
    "~/.sqlite_history",
    "~/.rediscli_history",
    "~/.lesshst",
    "~/.viminfo",
]


class SecurityConfig(Section):
    """The one security policy every tool call goes through."""

    autonomy: Autonomy = "supervised"
    after_untrusted: AfterUntrusted = "ask"
    approval_timeout_s: float = Field(default=300.0, gt=0)
    always_ask: list[str] = Field(default_factory=list)
    auto_approve: list[str] = Field(default_factory=list)
    extra_roots: list[str] = Field(default_factory=list)
    forbidden_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_FORBIDDEN_PATHS))
    file_max_bytes: int = Field(default=1024 * 1024, ge=1024)
    shell_sandbox: ShellSandbox = "auto"
    shell_allowlist: list[str] = Field(default_factory=list)
    shell_env_passthrough: list[str] = Field(default_factory=list)
    shell_timeout_s: float = Field(default=60.0, gt=0)
    shell_max_output_bytes: int = Field(default=1024 * 1024, ge=1024)
    allowed_hosts: list[str] = Field(default_factory=list)
    web_timeout_s: float = Field(default=20.0, gt=0)
    web_max_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    web_max_redirects: int = Field(default=5, ge=0, le=20)
    max_tool_calls_per_hour: int = Field(default=200, ge=0)
    max_tokens_per_day: int = Field(default=2_000_000, ge=0)
    audit_log: str = "audit.jsonl"
