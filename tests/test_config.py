"""Config loading: strict validation, one clear line per problem, env interpolation, defaults."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.config import Config, ConfigMissing, load_config, parse_config
from bot.config.env_refs import UnsetVariable
from bot.config.provider import ProviderConfig
from bot.config.security import DEFAULT_FORBIDDEN_PATHS
from bot.core.channel_registry import CHANNELS, settings_model
from bot.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
LOCAL = {"kind": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1"}


def error_for(raw: dict[str, Any], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, env or {})
    message = str(caught.value)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"provider": {**LOCAL, "modle": "x"}},
            "provider.modle: unknown key; did you mean 'model'?",
        ),
        ({"provider": {**LOCAL, "kind": "foo"}}, "provider.kind: expected one of 'openai'"),
        (
            {"provider": LOCAL, "agent": {"max_tool_iterations": "10"}},
            "agent.max_tool_iterations: expected an integer, got string '10'",
        ),
        ({"provider": {**LOCAL, "timeout_s": True}}, "provider.timeout_s: expected a number"),
        ({"provider": LOCAL, "tools": {"disabled": "clock"}}, "tools.disabled: expected an array"),
        ({"provider": LOCAL, "toolz": {}}, "toolz: unknown key; did you mean 'tools'?"),
        ({}, "provider: missing required table [provider]"),
        ({"provider": {"kind": "openai"}}, "provider.model: missing required key"),
        ({"provider": {**LOCAL, "base_url": "ftp://x"}}, "provider.base_url: expected an http://"),
        (
            {"provider": {**LOCAL, "max_retries": -1}},
            "provider.max_retries: input should be greater",
        ),
        (
            {"provider": LOCAL, "general": {"timezone": "Mars/Olympus"}},
            "general.timezone: expected an IANA timezone name",
        ),
        (
            {"provider": {"kind": "openai", "model": "gpt-4o-mini"}},
            "provider.api_key: a key is required for kind 'openai'",
        ),
        (
            {"provider": {**LOCAL, "fallbacks": [{"kind": "anthropic", "model": "c"}]}},
            "provider.fallbacks[0].api_key: a key is required for kind 'anthropic'",
        ),
        (
            {"provider": {**LOCAL, "fallbacks": [{"kind": "gemini", "model": "g", "key": "x"}]}},
            "provider.fallbacks[0].key: unknown key",
        ),
    ],
)
def test_each_problem_is_one_line_naming_the_key(raw: dict[str, Any], expected: str) -> None:
    assert expected in error_for(raw)


def test_every_problem_is_named_on_a_line_of_its_own() -> None:
    raw = {
        "provider": {**LOCAL, "modle": "x", "timeout_s": "slow"},
        "general": {"timezone": "Mars/Olympus"},
        "channels": {"telegram": {"token": "${TG_TOKEN}", "allowed_users": "all"}, "icq": {}},
        "web": {"token": "${WEB_TOKEN}"},
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, {}, source="c.toml")
    assert str(caught.value).splitlines() == [
        "c.toml: channels.telegram.token: environment variable TG_TOKEN is not set "
        "(the config refers to ${TG_TOKEN})",
        "c.toml: web.token: environment variable WEB_TOKEN is not set "
        "(the config refers to ${WEB_TOKEN})",
        "c.toml: channels.telegram.allowed_users: expected an array, got string 'all'",
        "c.toml: channels.icq: unknown channel (known: telegram, discord, slack, web)",
        "c.toml: provider.modle: unknown key; did you mean 'model'?",
        "c.toml: general.timezone: expected an IANA timezone name like 'Europe/Lisbon', "
        "got 'Mars/Olympus'",
        "c.toml: provider.timeout_s: expected a number, got string 'slow'",
    ]


def test_a_misspelt_key_is_one_problem_not_also_a_missing_one() -> None:
    raw = {"provider": {"kind": "openai", "modle": "m", "base_url": "http://127.0.0.1:1/v1"}}
    assert error_for(raw) == "config: provider.modle: unknown key; did you mean 'model'?"
    unlike = {"provider": {"kind": "openai", "name": "m", "base_url": "http://127.0.0.1:1/v1"}}
    with pytest.raises(ConfigError) as caught:  # nothing like "model": both are named
        parse_config(unlike, {})
    assert str(caught.value).splitlines() == [
        "config: provider.name: unknown key (allowed here: "
        + ", ".join(ProviderConfig.model_fields)
        + ")",
        "config: provider.model: missing required key",
    ]


def test_a_value_waiting_for_its_variable_is_not_a_second_problem() -> None:
    raw = {"provider": LOCAL, "daemon": {"max_message_bytes": "${LIMIT}"}}
    assert error_for(raw) == (
        "config: daemon.max_message_bytes: environment variable LIMIT is not set "
        "(the config refers to ${LIMIT})"
    )


def test_unset_variables_can_be_collected_instead_of_failing() -> None:
    raw = {"provider": {**LOCAL, "api_key": "${KEY}"}, "web": {"token": "${WEB_TOKEN:-}"}}
    unset: list[UnsetVariable] = []
    config = parse_config(raw, {}, unset=unset)
    assert unset == [UnsetVariable("provider.api_key", "KEY")]  # a default is not unset
    assert config.provider.api_key is not None
    assert config.provider.api_key.get_secret_value() == "${KEY}"  # kept as written


def test_secrets_come_from_the_environment() -> None:
    raw = {"provider": {"kind": "anthropic", "model": "c", "api_key": "${ANTHROPIC_API_KEY}"}}
    config = parse_config(raw, {"ANTHROPIC_API_KEY": "sk-test"})
    assert config.provider.key() == "sk-test"
    assert "sk-test" not in repr(config)


def test_a_missing_secret_names_the_key_and_the_variable() -> None:
    raw = {"provider": {"kind": "anthropic", "model": "c", "api_key": "${ANTHROPIC_API_KEY}"}}
    message = error_for(raw)
    assert "provider.api_key: environment variable ANTHROPIC_API_KEY is not set" in message


def test_interpolation_defaults_and_embedded_references() -> None:
    raw = {"provider": {**LOCAL, "base_url": "http://${HOST:-127.0.0.1}:${PORT}/v1"}}
    config = parse_config(raw, {"PORT": "8080"})
    assert config.provider.url == "http://127.0.0.1:8080/v1"


def test_defaults_fill_every_section() -> None:
    config = parse_config({"provider": LOCAL}, {})
    assert config.agent.max_tool_iterations == 10
    assert config.tools.timeout_s == 30.0
    assert config.provider.tool_dispatch == "auto"
    assert config.provider.fallbacks == []


def test_load_config_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigMissing, match="pinclaw onboard"):
        load_config(missing, env={})
    broken = tmp_path / "broken.toml"
    broken.write_text("[provider\nkind = 'openai'\n")
    with pytest.raises(ConfigError, match=r"broken.toml: not valid TOML: .*line 1"):
        load_config(broken, env={})


def test_config_path_and_data_dir_resolution(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "pinclaw.toml"
    path.parent.mkdir()
    path.write_text(
        '[general]\ndata_dir = "state"\n[provider]\nkind = "ollama"\nmodel = "llama3.2"\n'
    )
    loaded = load_config(path, env={})
    assert loaded.data_dir == path.parent / "state"
    assert loaded.database == path.parent / "state" / "pinclaw.db"
    override = load_config(path, env={"PINCLAW_DATA_DIR": str(tmp_path / "elsewhere")})
    assert override.data_dir == tmp_path / "elsewhere"


def test_config_file_from_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "custom.toml"
    path.write_text('[provider]\nkind = "ollama"\nmodel = "qwen3"\n')
    monkeypatch.setenv("PINCLAW_CONFIG", str(path))
    assert load_config(None, env={}).config.provider.model == "qwen3"


def test_example_file_is_valid() -> None:
    text = (ROOT / "pinclaw.example.toml").read_text()
    config = parse_config(tomllib.loads(text), {"OPENAI_API_KEY": "sk-test"})
    assert config.provider.kind == "openai"
    # The commented channel tables are valid too, once uncommented.
    head, _, tables = text.partition("# [channels.telegram]")
    tables = re.sub(
        r"^# (\[channels\.|[a-z_]+ = )", r"\1", "# [channels.telegram]" + tables, flags=re.M
    )
    uncommented = head + tables
    env = {k: "x" for k in re.findall(r"\$\{(\w+)\}", text)}
    config = parse_config(tomllib.loads(uncommented), env)
    assert sorted(config.channels) == ["discord", "slack", "telegram", "web"]


def test_example_file_documents_every_key() -> None:
    text = (ROOT / "pinclaw.example.toml").read_text()
    models: list[type[BaseModel]] = [Config, *(settings_model(name) for name in CHANNELS)]
    missing = [
        key
        for key in sorted({k for model in models for k in _all_keys(model)})
        if not re.search(rf"^#?\s*(\[\[?)?[\w.]*\b{re.escape(key)}\b", text, re.MULTILINE)
    ]
    assert missing == []


def test_the_example_lists_the_forbidden_paths_that_apply_by_default() -> None:
    example = tomllib.loads((ROOT / "pinclaw.example.toml").read_text())
    assert example["security"]["forbidden_paths"] == DEFAULT_FORBIDDEN_PATHS
    assert example["security"]["shell_sandbox"] == "auto"


def _all_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        keys.append(field.alias or name)  # as written in the file
        annotation = field.annotation
        inner = getattr(annotation, "__args__", (annotation,))
        for candidate in inner:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                keys += _all_keys(candidate, f"{prefix}{name}.")
    return sorted(set(keys))
