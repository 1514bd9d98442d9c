"""``[general]``, ``[agent]``, ``[tools]`` and ``[daemon]``: where state lives, how a
turn runs, what every tool shares, and how ``pinclaw run`` schedules and logs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Section, check_zone

DEFAULT_HOME = Path("~/.pinclaw")


class GeneralConfig(Section):
    """Where PinClaw keeps its state, which timezone it lives in, and how much the daemon logs."""

    data_dir: str = Field(
        default=str(DEFAULT_HOME),
        description="The folder holding PinClaw's state: the SQLite database `pinclaw.db`, the "
        "audit log and the agent's `workspace/`. `$PINCLAW_DATA_DIR` overrides it; a relative "
        "path is relative to the config file's folder.",
    )
    timezone: str | None = Field(
        default=None,
        description="IANA timezone name, e.g. `Europe/Lisbon`: the clock tool, the time shown "
        "to the model, scheduled jobs and the token budgets go by it. Not set: the host's "
        "timezone (`$TZ` or `/etc/localtime`), else UTC.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description="How much `pinclaw run` logs (`--log-level` overrides it; where the log goes "
        "is set in `[daemon]`). Except at `debug`, libraries' routine chatter is left out; "
        "their warnings still show. `pinclaw agent` and `pinclaw chat` log only errors "
        "unless given `--log-level`.",
    )

    _check_timezone = field_validator("timezone")(check_zone)


class AgentConfig(Section):
    """How a turn runs: how many tool rounds it may take, how much history the model sees,
    and whether replies stream into chats."""

    max_tool_iterations: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Most model rounds in one turn; a round is one model request plus the tools "
        "it asked for. When the limit is reached the person is told so.",
    )
    history_budget_tokens: int = Field(
        default=12000,
        ge=500,
        description="Roughly how many tokens of earlier conversation the model sees; the oldest "
        "exchanges are left out first (never a tool call without its result).",
    )
    identity_file: str = Field(
        default="IDENTITY.md",
        description="The identity file, relative to the workspace (`DATA_DIR/workspace`): the "
        "start of every system prompt. Created with a default text on first run; edit it to "
        "change the assistant's name, tone or rules (it is read again when it changes).",
    )
    max_delegation_depth: int = Field(
        default=1,
        ge=0,
        le=3,
        description="How deep sub-agents (`[agents.NAME]`) may hand tasks on: 1 lets the main "
        "agent delegate and no one else; 0 turns delegation off.",
    )
    stream: bool = Field(
        default=True,
        description="Show replies as they are written: in a chat, a message that grows (edited "
        "about once a second) with a short line saying what runs while tools work; in "
        "`pinclaw chat`, text as it comes. `false`: the whole reply at the end. Each "
        "channel's `stream` overrides this.",
    )
    usage_footer: bool = Field(
        default=False,
        description="Add one line in italics under each chat reply with the tokens its turn "
        "used and, when `[usage.prices]` has the model, its cost, e.g. "
        "`— 1,234 tokens in · 56 out · $0.0012`. Command answers and what scheduled jobs, "
        "the heartbeat and triggers deliver get none.",
    )


class ToolsConfig(Section):
    """Which tools the agent has, and the limits every tool shares."""

    disabled: list[str] = Field(
        default_factory=list,
        description='Tools the agent does not get, by name, e.g. `["shell", "http_request"]`; '
        "the web panel cannot use them either. A name PinClaw has no tool for is logged as "
        "a warning.",
    )
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a tool call may run before it is stopped and the model told so, "
        "for tools without a limit of their own (the shell has `[security] shell_timeout_s`, "
        "an MCP server its `timeout_s`).",
    )
    max_output_chars: int = Field(
        default=16000,
        ge=200,
        description="Longest tool result the model sees, in characters; a longer one keeps its "
        "head and tail, with a marker saying how much was cut.",
    )
    max_send_bytes: int = Field(
        default=20 * 1024 * 1024,
        ge=1024,
        description="Largest file `send_file` delivers to a chat, in bytes. Each platform has "
        "its own limit as well: Telegram 50 MB, Discord 10 MB, Slack 1 GB.",
    )


class DaemonConfig(Section):
    """How `pinclaw run` schedules turns, survives restarts and writes its log."""

    max_concurrent_turns: int = Field(
        default=4,
        ge=1,
        le=64,
        description="How many chats are answered at the same time. The messages of one chat "
        "are always answered strictly in order.",
    )
    busy_mode: Literal["queue", "collect"] = Field(
        default="queue",
        description="What happens to a message that arrives while its chat is still being "
        "answered. `queue`: it waits and gets its own answer after the current one. "
        "`collect`: it waits with any others, and they are answered together in one turn.",
    )
    max_message_age_s: float = Field(
        default=3600.0,
        ge=0,
        description="Messages older than this many seconds are not answered (each is logged): "
        "those left unanswered when the daemon stopped or crashed, and those a platform "
        "delivers late after an outage (by the platform's timestamp). 0: no limit.",
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        ge=0,
        description="On SIGTERM or SIGINT, seconds the answers in progress get to finish; the "
        "rest are recorded as interrupted and answered after the next start. The whole stop "
        "takes at most this plus 2 s.",
    )
    max_message_bytes: int = Field(
        default=16384,
        ge=0,
        description="A message longer than this many bytes (UTF-8) is not sent to the model: "
        "the sender is asked for a shorter one. 0: no limit.",
    )
    merge_window_ms: int = Field(
        default=1500,
        ge=0,
        le=60_000,
        description="Milliseconds a message that may be part of a long paste waits for the next "
        "part (Telegram and Discord apps split pastes at 4,096 and 2,000 characters); the parts "
        "are answered as one message, and so is a message sent within this time after your "
        "previous one while that one still waits. 0: every message is answered on its own.",
    )
    log_file: str = Field(
        default="",
        description="The file `pinclaw run` writes its whole log to (created 0600, rotated by "
        "size), relative to the data folder; stderr then keeps only warnings and errors. "
        '`""`: stderr only, which is the journal under systemd.',
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="The format of `pinclaw run`'s log lines: `text`, or `json`: one JSON object "
        "per line with the time (UTC), level, logger, message, the exception if any, and "
        "details such as the retry attempt.",
    )
    log_max_bytes: int = Field(
        default=5 * 1024 * 1024,
        ge=1024,
        description="Size in bytes at which the log file is rotated: `pinclaw.log` becomes "
        "`pinclaw.log.1`, and so on. Only with `log_file`.",
    )
    log_backups: int = Field(
        default=3,
        ge=1,
        le=100,
        description="How many rotated log files are kept; the oldest beyond them is deleted.",
    )
