"""PinClaw's configuration: one TOML file, validated strictly, secrets from the environment.

``load_config`` finds the file (``--config``, ``$PINCLAW_CONFIG``, then
``~/.pinclaw/config.toml``), replaces ``${VAR}`` / ``${VAR:-default}`` in string
values, and validates the result. Every problem becomes a line of one
``ConfigError``, naming the key path and saying what is expected: a file with three
mistakes names all three.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator

from bot.config.base import Section, check_url, check_zone, empty_is_none, made_default
from bot.config.browser import BrowserConfig
from bot.config.env_refs import UnsetVariable, interpolate
from bot.config.errors import describe_validation_errors
from bot.config.files import check_paths, read_document
from bot.config.hardware import HardwareConfig, HomeAssistantConfig
from bot.config.mcp import McpConfig
from bot.config.media import MediaConfig, SpeechConfig, TranscriptionConfig, guess_vision
from bot.config.memory import MemoryConfig
from bot.config.schedule import CronConfig, HeartbeatConfig
from bot.config.security import SecurityConfig
from bot.config.skills import SkillsConfig
from bot.config.triggers import TriggerConfig
from bot.config.usage import UsageConfig
from bot.config.web import WebConfig
from bot.core.errors import ConfigError

CONFIG_ENV = "PINCLAW_CONFIG"
DATA_DIR_ENV = "PINCLAW_DATA_DIR"
DEFAULT_HOME = Path("~/.pinclaw")

ProviderKind = Literal["openai", "anthropic", "gemini", "ollama"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://localhost:11434",
}


class ProviderSpec(Section):
    """One model provider: which API it speaks, which model, at which URL, and with which key."""

    kind: ProviderKind = Field(
        description="Which API the model speaks. `openai` also covers any OpenAI-compatible "
        "server: OpenRouter, Groq, vLLM, llama.cpp's `llama-server`, LM Studio, LocalAI."
    )
    model: str = Field(
        min_length=1,
        description="The model's name as the server knows it, e.g. `gpt-4o-mini` or `llama3.2`.",
    )
    base_url: str | None = Field(
        default=None,
        description="The API's root URL. Not set: the kind's default (`https://api.openai.com/v1`, "
        "`https://api.anthropic.com`, `https://generativelanguage.googleapis.com`, "
        "`http://localhost:11434`). For an OpenAI-compatible server include the `/v1`, "
        "e.g. `http://localhost:8080/v1` for llama.cpp.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description='The API key, best taken from the environment: `"${OPENAI_API_KEY}"`. '
        "Required for `anthropic`, `gemini`, and `openai` at its default URL; a local "
        'server needs none (leave it out or write `""`).',
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds to wait for the server before a request counts as failed "
        "(it is then retried, see `max_retries`).",
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        le=10,
        description="Retries after a 429, a 5xx or a connection error, with exponential backoff. "
        "A `Retry-After` header is honoured up to 30 s; a longer wait moves on to the "
        "fallback instead.",
    )
    max_tokens: int = Field(default=4096, ge=1, description="Longest reply, in tokens.")
    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="Sampling temperature, 0 to 2. Not set: the model's own default.",
    )
    tool_dispatch: Literal["auto", "native", "xml"] = Field(
        default="auto",
        description="How tool calls are exchanged with the model. `auto`: the provider's "
        "native tool calling, switching to `xml` for good if the server answers that the "
        "model does not support tools. `native`: always native. `xml`: tools described in "
        'the system prompt and calls written as `<tool_call>{"name": ..., "arguments": '
        "{...}}</tool_call>`, for models without native tool calling.",
    )
    vision: bool | None = Field(
        default=None,
        description="Whether the model can see pictures people send in chats. Not set: "
        "guessed from the model's name (`gpt-4o*`, `claude-3*`, `gemini-*`, `llava*`, "
        "`qwen*-vl`... can; other names are taken as text-only). A model that cannot see "
        "reads a note that a picture was sent.",
    )
    headers: dict[str, str] = Field(
        default={},  # copied for each table; a factory costs more
        description="Extra HTTP headers sent with every request to this provider, e.g. "
        '`{ "HTTP-Referer" = "https://example.org", "X-Title" = "PinClaw" }` for OpenRouter.',
    )

    _check_url = field_validator("base_url")(check_url)
    _empty_key_is_none = field_validator("api_key", mode="before")(empty_is_none)

    @property
    def url(self) -> str:
        """The base URL in use: the configured one or the kind's default."""
        return self.base_url or DEFAULT_BASE_URLS[self.kind]

    @property
    def label(self) -> str:
        """How logs and errors name this provider."""
        return f"{self.kind}:{self.model}"

    def key(self) -> str:
        """The API key, or an empty string for servers that need none."""
        return self.api_key.get_secret_value() if self.api_key else ""

    @property
    def sees_images(self) -> bool:
        """Whether pictures are sent to this model: ``vision``, else known by its name."""
        return guess_vision(self.model) if self.vision is None else self.vision

    def missing_key(self) -> bool:
        """True when this kind and URL need an API key and none is set."""
        if self.api_key is not None:
            return False
        if self.kind in ("anthropic", "gemini"):
            return True
        return self.kind == "openai" and self.base_url is None


class ProviderConfig(ProviderSpec):
    """The model PinClaw talks to, plus fallback providers tried in order when it fails."""

    fallbacks: list[ProviderSpec] = Field(
        default=[],  # copied for each table, like headers
        description="Providers tried in order when this one fails after its own retries, each a "
        "`[[provider.fallbacks]]` table with the keys of `[provider]` but `fallbacks` and "
        '`choices`, e.g. `kind = "ollama"`, `model = "llama3.2"`.',
    )
    choices: list[str] = Field(
        default=[],
        description="More models of this provider (same kind, URL, key and settings) that a "
        'chat may switch to with `/model NAME`, e.g. `["gpt-4o", "gpt-4.1"]`. The main '
        "model, the fallbacks' and the sub-agents' models are offered too. Only the people "
        "who approve requests on a channel may switch; `/model default` goes back to `model`.",
    )


class SubAgentConfig(Section):
    """A sub-agent the `delegate` tool can hand a task to, with its own prompt, tools and
    optionally its own model; its calls go through the same policy and approvals."""

    description: str = Field(
        min_length=1,
        description="What the sub-agent is for, in one line, e.g. `finds things out on the web "
        "and summarises them`: the main agent reads it to choose whom to hand a task to.",
    )
    system_prompt: str = Field(
        default="",
        description="The sub-agent's own instructions, used instead of `IDENTITY.md`. Empty: "
        "a short prompt made from its name and `description`.",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="The main agent's tools this sub-agent may use, by name, e.g. "
        '`["web_fetch", "http_request"]`. Empty: it has no tools at all.',
    )
    provider: ProviderSpec | None = Field(
        default=None,
        description="The sub-agent's own model: a table with the keys of `[provider]` but "
        '`fallbacks` and `choices`, e.g. `{ kind = "ollama", model = "llama3.2" }`. '
        "Not set: the main `[provider]`, with its fallbacks.",
    )
    timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Seconds the sub-agent has for one task; after that the `delegate` call "
        "fails and the main agent is told so.",
    )


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


class Config(Section):
    """The whole configuration file."""

    general: GeneralConfig = Field(default_factory=GeneralConfig)
    provider: ProviderConfig
    agent: AgentConfig = Field(default_factory=AgentConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    cron: CronConfig = Field(default_factory=CronConfig)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    hardware: HardwareConfig = Field(default_factory=HardwareConfig)
    home_assistant: HomeAssistantConfig = Field(default_factory=HomeAssistantConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    usage: UsageConfig = Field(default_factory=UsageConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    speech: SpeechConfig = Field(default_factory=SpeechConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    agents: dict[str, SubAgentConfig] = Field(default_factory=dict)
    triggers: list[TriggerConfig] = Field(default_factory=list)
    channels: dict[str, BaseModel] = Field(default_factory=dict)

    def enabled_channels(self) -> dict[str, BaseModel]:
        """The channel settings whose ``enabled`` is true, by channel name."""
        return {n: s for n, s in self.channels.items() if getattr(s, "enabled", True)}


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A validated config together with where it came from and the resolved data dir."""

    config: Config
    path: Path
    data_dir: Path

    @property
    def workspace(self) -> Path:
        """The agent's workspace directory."""
        return self.data_dir / "workspace"

    @property
    def database(self) -> Path:
        """The SQLite file holding all state."""
        return self.data_dir / "pinclaw.db"

    def timezone(self) -> ZoneInfo:
        """The configured timezone, else the host's, else UTC."""
        return resolve_timezone(self.config.general.timezone)


class ConfigMissing(ConfigError):
    """There is no config file where PinClaw looked."""


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where the config file is: the argument, ``$PINCLAW_CONFIG``, or the default."""
    chosen = explicit or os.environ.get(CONFIG_ENV) or DEFAULT_HOME / "config.toml"
    return Path(chosen).expanduser()


def load_config(
    explicit: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    *,
    unset: list[UnsetVariable] | None = None,
) -> LoadedConfig:
    """Read, interpolate and validate the config; raise ``ConfigError`` with a clear line
    per problem. With ``unset``, variables that are not set are added there instead of
    being problems (the reference stays as written in the value)."""
    path = config_path(explicit)
    if not path.is_file():
        raise ConfigMissing(
            f"no config file at {path}; run `pinclaw onboard` to create one "
            f"(or pass --config PATH / set {CONFIG_ENV})"
        )
    raw = read_document(path)
    values = env if env is not None else with_credentials(dict(os.environ))
    config = parse_config(raw, values, source=str(path), unset=unset)
    environ = env if env is not None else os.environ
    data_dir = Path(environ.get(DATA_DIR_ENV) or config.general.data_dir).expanduser()
    if not data_dir.is_absolute():
        data_dir = (path.parent / data_dir).resolve()
    check_paths(data_dir, config, DATA_DIR_ENV if environ.get(DATA_DIR_ENV) else "general.data_dir")
    return LoadedConfig(config=config, path=path, data_dir=data_dir)


def with_credentials(env: dict[str, str]) -> dict[str, str]:
    """``env`` plus systemd credentials (``LoadCredential=NAME:...``) as ``NAME`` where unset.

    A service can then keep a secret in a credential file instead of its
    environment, and the config still refers to it as ``${NAME}``.
    """
    folder = env.get("CREDENTIALS_DIRECTORY")
    if not folder:
        return env
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return env
    for entry in entries:
        if entry.name not in env and entry.is_file():
            try:
                env[entry.name] = Path(entry.path).read_text(encoding="utf-8").rstrip("\n")
            except (OSError, UnicodeDecodeError):
                continue
    return env


def parse_config(
    raw: dict[str, Any],
    env: dict[str, str],
    source: str = "config",
    *,
    unset: list[UnsetVariable] | None = None,
) -> Config:
    """Validate an already-parsed TOML document; ``ConfigError`` names every problem, one
    line each. With ``unset``, unset variables go there instead (see ``load_config``)."""
    missing: list[UnsetVariable] = []
    data = interpolate(raw, env, missing)
    problems = [] if unset is not None else [m.problem() for m in missing]
    channels = _parse_channels(data.pop("channels", {}), problems, missing)
    config = _tables_in_file(data, channels)
    if config is None:  # something is wrong (or unusual): the whole config says what
        try:
            config = Config.model_validate(data).model_copy(update={"channels": channels})
        except ValidationError as exc:
            told = {m.key for m in missing}  # a value left as "${NAME}" is no mistake itself
            found = describe_validation_errors(exc, Config, skip=told)
            # Nothing else: some values cannot be checked without their variables.
            problems += found or [m.problem() for m in missing if m.problem() not in problems]
    if config is not None:
        problems += _consistency_problems(config)
    if unset is not None:
        unset.extend(missing)
    if problems:
        raise ConfigError("\n".join(f"{source}: {problem}" for problem in problems))
    assert config is not None  # no problems means it validated
    return config


def _consistency_problems(config: Config) -> list[str]:
    """What is wrong between keys that are each valid on their own."""
    problems = [
        f"{where}.api_key: a key is required for kind '{spec.kind}' "
        f'(for example api_key = "${{{key_env_name(spec.kind)}}}")'
        for where, spec in _provider_specs(config)
        if spec.missing_key()
    ]
    names = [t.name for t in config.triggers]
    problems += [
        f"triggers[{i}].name: {name!r} is the name of an earlier trigger; names must differ"
        for i, name in enumerate(names)
        if name in names[:i]
    ]
    if "web" in config.enabled_channels() and (config.web.address is None or not config.web.panel):
        problems.append(
            "channels.web: the web chat is a page of the web panel, which is off "
            '([web] listen = "off" or panel = false); turn the panel on, or remove '
            "[channels.web] (or set enabled = false there)"
        )
    return problems


def _tables_in_file(data: dict[str, Any], channels: dict[str, BaseModel]) -> Config | None:
    """The config as ``Config.model_validate`` makes it, validating only the tables the
    file has: the others are their defaults (``made_default``), so their validators
    are never built. None when a table fails, a key is unknown or missing, or the file
    has ``[agents]``: the whole config is validated then, and its errors are the ones shown.
    """
    fields = Config.model_fields
    if not data.keys() <= fields.keys() or "agents" in data:
        return None
    values: dict[str, Any] = {"channels": channels}
    for name, field in fields.items():
        if name in data:
            table = field.annotation
            if not (isinstance(table, type) and issubclass(table, Section)):
                return None
            try:
                values[name] = table.model_validate(data[name])
            except ValidationError:
                return None
        elif field.is_required():
            return None
        elif name not in values and field.default_factory is not None:
            values[name] = made_default(field)
    return Config.model_construct(_fields_set={*data, "channels"}, **values)


def _parse_channels(
    raw: object, problems: list[str], missing: list[UnsetVariable]
) -> dict[str, BaseModel]:
    """Validate each ``[channels.NAME]`` table with the model its adapter registers; what
    is wrong goes to ``problems`` (a value still waiting for its variable is not wrong)."""
    from bot.core.channel_registry import CHANNELS, settings_model

    if not isinstance(raw, dict):
        problems.append("channels: expected a table of channel tables")
        return {}
    parsed: dict[str, BaseModel] = {}
    for name, table in raw.items():
        if name not in CHANNELS:
            problems.append(f"channels.{name}: unknown channel (known: {', '.join(CHANNELS)})")
            continue
        model = settings_model(name)
        if not isinstance(table, dict):
            problems.append(f"channels.{name}: expected a table")
            continue
        try:
            parsed[name] = model.model_validate(table)
        except ValidationError as exc:
            told = {m.key for m in missing}
            found = describe_validation_errors(exc, model, f"channels.{name}", told)
            waiting = [m.problem() for m in missing if m.key.startswith(f"channels.{name}.")]
            problems += found or [line for line in waiting if line not in problems]
    return parsed


def resolve_timezone(name: str | None) -> ZoneInfo:
    """A ZoneInfo for ``name``, else the host's zone (``$TZ``, /etc/localtime), else UTC."""
    candidates = [name, os.environ.get("TZ", "").lstrip(":") or None, _host_zone_name()]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return ZoneInfo(candidate)
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return ZoneInfo("UTC")


def _host_zone_name() -> str | None:
    try:
        target = os.readlink("/etc/localtime")
    except OSError:
        try:
            return Path("/etc/timezone").read_text(encoding="utf-8").strip() or None
        except OSError:
            return None
    marker = "zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else None


def _provider_specs(config: Config) -> list[tuple[str, ProviderSpec]]:
    specs: list[tuple[str, ProviderSpec]] = [("provider", config.provider)]
    specs += [(f"provider.fallbacks[{i}]", s) for i, s in enumerate(config.provider.fallbacks)]
    specs += [(f"agents.{n}.provider", a.provider) for n, a in config.agents.items() if a.provider]
    return specs


def key_env_name(kind: str) -> str:
    """The environment variable a provider kind's key is usually kept in."""
    return {"anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}.get(
        kind, "OPENAI_API_KEY"
    )
