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
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, ValidationError

from bot.config.base import Section, made_default
from bot.config.browser import BrowserConfig
from bot.config.env_refs import UnsetVariable, interpolate
from bot.config.errors import describe_validation_errors
from bot.config.files import check_paths, read_document
from bot.config.general import (
    DEFAULT_HOME,
    AgentConfig,
    DaemonConfig,
    GeneralConfig,
    ToolsConfig,
)
from bot.config.hardware import HardwareConfig, HomeAssistantConfig
from bot.config.mcp import McpConfig
from bot.config.media import MediaConfig, SpeechConfig, TranscriptionConfig
from bot.config.memory import MemoryConfig
from bot.config.provider import ProviderConfig, ProviderSpec, SubAgentConfig
from bot.config.schedule import CronConfig, HeartbeatConfig
from bot.config.security import SecurityConfig
from bot.config.skills import SkillsConfig
from bot.config.triggers import TriggerConfig
from bot.config.usage import UsageConfig
from bot.config.web import WebConfig
from bot.core.errors import ConfigError

CONFIG_ENV = "PINCLAW_CONFIG"
DATA_DIR_ENV = "PINCLAW_DATA_DIR"


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
