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
    """The security policy every tool call goes through: how much the agent may do on its
    own, where files may be touched, which private hosts may be reached, and per-person limits.
    """

    autonomy: Autonomy = Field(
        default="supervised",
        description="How much the agent may do on its own. `readonly`: it may read (files, the "
        "web) but not write, run commands or operate devices. `supervised`: low-risk calls "
        "run, medium-risk calls (writing files, most commands) wait for a person's yes, and "
        "high-risk calls (`rm -rf`, `sudo`...) are refused. `full`: calls run without asking (but "
        "for `always_ask` and after untrusted content); the workspace, `forbidden_paths` and "
        "the network rules still hold. `full` needs a working shell sandbox: without one "
        "PinClaw refuses to start, unless `[tools] disabled` names `shell`.",
    )
    after_untrusted: AfterUntrusted = Field(
        default="ask",
        description="What happens, once a turn has read untrusted content (a web page, an API's "
        "or MCP server's answer, serial input, a file from outside, a forwarded or quoted "
        "message), to every later call in it that changes something. `ask`: a person is "
        "asked, even where an always rule, `auto_approve` or `full` autonomy would let it run; "
        "the request says what was read. `rules`: it is decided as usual.",
    )
    approval_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Seconds an approval request waits for a decision; no answer counts as no "
        '("Expired"). Requests still open when PinClaw stops expire too.',
    )
    always_ask: list[str] = Field(
        default_factory=list,
        description="Tools that ask a person before every call, even at `full` autonomy, e.g. "
        '`["shell", "http_request"]` (MCP tools by their `mcp_SERVER_TOOL` name). At '
        "`readonly` what writes is still refused.",
    )
    auto_approve: list[str] = Field(
        default_factory=list,
        description="Tools whose medium-risk calls run without asking at `supervised`, e.g. "
        '`["file_write"]`. High-risk calls are still refused, `always_ask` wins, and after '
        "untrusted content they ask anyway (see `after_untrusted`). Empty: every medium-risk "
        "call asks.",
    )
    extra_roots: list[str] = Field(
        default_factory=list,
        description="Folders the file tools may use besides the workspace (`DATA_DIR/workspace`), "
        'e.g. `["/home/pi/projects"]`; they are writable in the shell sandbox too. '
        "Empty: the workspace only. `forbidden_paths` still apply inside them.",
    )
    forbidden_paths: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FORBIDDEN_PATHS),
        description="Places no tool may touch, whatever else is allowed, also through `..`, `~` "
        "or symlinks; under the shell sandbox they are not even mounted. The default lists "
        "system folders and the credential stores in your home (ssh, gpg, cloud, git, npm, "
        "PyPI, Docker, Kubernetes, browsers, shell and database histories). Setting this "
        "replaces the whole list; PinClaw's own data folder, config and `pinclaw.env` are "
        "always added, and an empty list leaves only those.",
    )
    file_max_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Largest file the file tools handle, in bytes: `file_read` and `file_edit` "
        "refuse a larger file, `file_write` larger content, and `content_search` skips it.",
    )
    shell_sandbox: ShellSandbox = Field(
        default="auto",
        description="The kernel sandbox (bubblewrap) around every shell command. `auto`: used "
        "when it works here; else PinClaw says so loudly (log, status, doctor, panel) and "
        "asks first for commands that run scripts or use the network. `required`: refuse to "
        "start without it. `off`: never; the command classifier alone, at its stricter level.",
    )
    shell_allowlist: list[str] = Field(
        default_factory=list,
        description="Extra commands the shell tool rates low risk (only reading), each a command "
        'or its first words, e.g. `["vcgencmd"]` or `["vcgencmd measure_temp"]`. Shells, '
        "interpreters and commands whose arguments decide what they do (`rm`, `find`, `git`, "
        "`sed`...) cannot be lowered, and a command that uses the network still asks. "
        "Empty: PinClaw's own tables alone decide.",
    )
    shell_env_passthrough: list[str] = Field(
        default_factory=list,
        description="Environment variables passed to commands besides `PATH`, `HOME`, `LANG`, "
        '`LC_*`, `TERM`, `TZ`, `USER` and `TMPDIR`, e.g. `["PICO_SDK_PATH"]`. Everything '
        "else, tokens and API keys included, is removed. Empty: only those basics.",
    )
    shell_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a command may run before it is stopped, with every process it "
        "started.",
    )
    shell_max_output_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Output kept from a command, in bytes (the model sees at most "
        "`[tools] max_output_chars` of it).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Private hosts, addresses or networks that the web tools, the browser and "
        "sandboxed shell commands may reach, e.g. "
        '`["homeassistant.local", "192.168.1.0/24", "*.lan"]` (`*.lan`: its subdomains). '
        "Empty: every loopback, private, link-local and cloud-metadata address is refused; "
        "public ones are always allowed. PinClaw's own ports are never reachable.",
    )
    web_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="Seconds one `web_fetch` or `http_request` call may take in all, redirects "
        "included; also how long the sandbox's proxy waits for a connection.",
    )
    web_max_bytes: int = Field(
        default=2 * 1024 * 1024,
        ge=1024,
        description="Largest response body the web tools keep, in bytes (after decompression); "
        "the rest is cut off.",
    )
    web_max_redirects: int = Field(
        default=5,
        ge=0,
        le=20,
        description="Most redirects the web tools follow; each hop is checked like the first.",
    )
    max_tool_calls_per_hour: int = Field(
        default=200,
        ge=0,
        description="Tool calls one person may make in any hour (counted in memory, so a "
        "restart starts afresh); past it they are told plainly. 0: no limit.",
    )
    max_tokens_per_day: int = Field(
        default=2_000_000,
        ge=0,
        description="Model tokens (in and out) one person may use in any 24 hours; past it they "
        "are told plainly. 0: no limit. The budgets for the whole installation are "
        "`[usage] daily_tokens` and `monthly_tokens`.",
    )
    audit_log: str = Field(
        default="audit.jsonl",
        description="The audit log, relative to the data folder: every tool call with its "
        "decision, and every action in the web panel, as JSON lines in a hash chain. "
        "`pinclaw audit verify` checks it; `pinclaw audit show` reads it.",
    )
