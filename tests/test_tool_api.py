"""The tool API and registry: derived schemas, safe coercion, and every failure as a result."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel, Field

from bot.agent.tool_registry import ToolRegistry, build_registry, truncate_result
from bot.config import LoadedConfig, parse_config
from bot.core.conversation import ToolCall
from bot.core.errors import ToolError
from bot.core.messages import SessionKey
from bot.core.tool_api import Tool, ToolContext, ToolResult, _strip_titles, tool
from bot.security.kit import SecurityKit, build_security


class Point(BaseModel):
    x: int
    y: int


@tool(risk="medium")
async def sample(
    ctx: ToolContext,
    count: Annotated[int, Field(description="how many")],
    flag: bool = False,
    label: str = "none",
    mode: Literal["fast", "slow"] = "fast",
    tags: list[str] | None = None,
    at: Point | None = None,
) -> str:
    """A sample tool for tests."""
    return f"count={count!r} flag={flag!r} label={label!r} mode={mode} tags={tags} at={at}"


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(SessionKey("test", "1"), tmp_path, ZoneInfo("UTC"))


def test_schema_is_derived_from_the_signature() -> None:
    spec = sample.spec()
    assert spec.name == "sample"
    assert spec.description == "A sample tool for tests."
    params = spec.parameters
    assert params["type"] == "object"
    assert params["required"] == ["count"]
    assert params["properties"]["count"] == {"description": "how many", "type": "integer"}
    assert params["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert "ctx" not in params["properties"]
    assert "title" not in str(params)
    assert sample.risk == "medium"


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ({"count": "7"}, "count=7 "),
        ({"count": 7.0}, "count=7 "),
        ({"count": 1, "flag": "true"}, "flag=True"),
        ({"count": 1, "flag": "no"}, "flag=False"),
        ({"count": 1, "label": 42}, "label='42'"),
        ({"count": 1, "label": None}, "label='none'"),
        ({"count": 1, "tags": '["a", "b"]'}, "tags=['a', 'b']"),
        ({"count": 1, "at": '{"x": "1", "y": 2}'}, "at=x=1 y=2"),
    ],
)
async def test_safe_coercion(ctx: ToolContext, arguments: dict[str, object], shown: str) -> None:
    result = await sample.invoke(ctx, arguments)
    assert result.ok
    assert shown in result.output


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({}, "'count' is required"),
        ({"count": "seven"}, "'count': Input should be a valid integer"),
        ({"count": 7.5}, "'count'"),
        ({"count": 1, "colour": "red"}, "'colour' is not a parameter of this tool"),
        ({"count": 1, "mode": "warp"}, "'mode'"),
    ],
)
def test_validation_errors_tell_the_model_what_to_fix(
    arguments: dict[str, object], complaint: str
) -> None:
    with pytest.raises(ToolError) as caught:
        sample.validate(arguments)
    message = str(caught.value)
    assert complaint in message
    assert "Parameters: count, flag, label, mode, tags, at." in message


def test_a_tool_must_be_async_typed_and_described() -> None:
    def not_async(ctx: ToolContext) -> str:
        """Doc."""
        return ""

    async def no_doc(ctx: ToolContext) -> str:
        return ""

    async def untyped(ctx: ToolContext, value) -> str:  # type: ignore[no-untyped-def]
        """Doc."""
        return ""

    with pytest.raises(TypeError, match="async"):
        Tool(not_async)  # type: ignore[arg-type]  # the mistake under test
    with pytest.raises(ValueError, match="description"):
        Tool(no_doc)
    with pytest.raises(TypeError, match="annotation"):
        Tool(untyped)


@tool()
async def fails(ctx: ToolContext, path: str) -> str:
    """Fails like an ordinary tool."""
    raise ToolError(f"no such file: {path}")


@tool()
async def crashes(ctx: ToolContext) -> str:
    """Has a bug."""
    raise KeyError("secret internal detail")


@tool(timeout_s=0.05)
async def hangs(ctx: ToolContext) -> str:
    """Never finishes."""
    await asyncio.Event().wait()
    return ""


@tool()
async def inner_timeout(ctx: ToolContext) -> str:
    """Its own operation times out; that is a failure of the tool, not of the call budget."""
    async with asyncio.timeout(0.01):
        await asyncio.Event().wait()
    return ""


@tool()
async def loud(ctx: ToolContext, size: int) -> str:
    """Prints a lot."""
    return "A" * (size // 2) + "Z" * (size - size // 2)


@tool()
async def structured(ctx: ToolContext) -> dict[str, int]:
    """Returns data."""
    return {"a": 1}


def registry() -> ToolRegistry:
    return ToolRegistry(
        [sample, fails, crashes, hangs, inner_timeout, loud, structured],
        default_timeout_s=5,
        max_output_chars=1000,
    )


async def test_registry_turns_every_failure_into_a_result(
    ctx: ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    tools = registry()

    ordinary = await tools.execute(ToolCall("1", "fails", {"path": "a.txt"}), ctx)
    assert ordinary == ToolResult.failure("no such file: a.txt")
    assert ordinary.for_model() == "Error: no such file: a.txt"

    unknown = await tools.execute(ToolCall("2", "nope", {}), ctx)
    assert not unknown.ok
    assert "there is no tool named 'nope'" in (unknown.error or "")

    unreadable = await tools.execute(ToolCall("3", "sample", {}, error="not valid JSON"), ctx)
    assert unreadable.error == "the call to sample could not be read: not valid JSON"

    bad_args = await tools.execute(ToolCall("4", "sample", {"count": "x"}), ctx)
    assert "invalid arguments for sample" in (bad_args.error or "")

    with caplog.at_level(logging.ERROR):
        bug = await tools.execute(ToolCall("5", "crashes", {}), ctx)
    assert "internal error (error id" in (bug.error or "")
    assert "secret internal detail" not in bug.for_model()
    error_id = (bug.error or "").split("error id ")[1].split(")")[0]
    assert any(error_id in record.getMessage() for record in caplog.records)

    timed_out = await tools.execute(ToolCall("6", "hangs", {}), ctx)
    assert timed_out.error == "hangs did not finish within 0.05 s"

    own_timeout = await tools.execute(ToolCall("7", "inner_timeout", {}), ctx)
    assert "internal error" in (own_timeout.error or "")

    data = await tools.execute(ToolCall("8", "structured", {}), ctx)
    assert data == ToolResult.success('{"a": 1}')


async def test_long_output_keeps_head_and_tail_with_a_marker(ctx: ToolContext) -> None:
    result = await registry().execute(ToolCall("1", "loud", {"size": 5000}), ctx)
    assert result.ok
    assert result.output.startswith("AAAA")
    assert result.output.endswith("ZZZZ")
    assert "[4000 characters cut: output longer than 1000 characters]" in result.output
    assert len(result.output) < 1100
    short = ToolResult.success("fine")
    assert truncate_result(short, 1000) is short


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools"):
        ToolRegistry([sample, sample])


def test_build_registry_from_config(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "tools": {"disabled": ["calculator", "shell", "teleport"], "timeout_s": 3},
    }
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path)
    with caplog.at_level(logging.WARNING):
        tools = build_registry(loaded, build_security(loaded))
    assert "calculator" not in tools.names() and "shell" not in tools.names()
    assert "clock" in tools.names()
    assert "teleport" in caplog.text
    full = LoadedConfig(parse_config({"provider": raw["provider"]}, {}), tmp_path, tmp_path)
    everything = build_registry(full, build_security(full))
    assert everything.names() == [
        "clock",
        "calculator",
        "file_read",
        "file_write",
        "file_edit",
        "file_list",
        "glob_search",
        "content_search",
        "send_file",
        "shell",
        "http_request",
        "web_fetch",
        "browser_open",  # Playwright and Debian's chromium are installed for the tests
        "browser_screenshot",
        "system_info",
        "skill",
    ]


def test_every_hardware_tool_is_offered_once_its_devices_are_declared(tmp_path: Path) -> None:
    raw = {
        "provider": {"kind": "ollama", "model": "m"},
        "hardware": {
            "pin_factory": "mock",
            "gpio": {"porch_light": {"pin": 17}, "fan": {"pin": 18, "kind": "pwm"}},
            "serial": {"arduino": {"port": "loop://"}},
            "i2c": {"buses": [1], "addresses": [0x50]},
            "sensors": {"greenhouse": {"driver": "bme280", "address": 0x76}},
        },
        "home_assistant": {"url": "http://127.0.0.1:8123", "token": "t", "allow": ["light"]},
    }
    loaded = LoadedConfig(parse_config(raw, {}), tmp_path, tmp_path)
    names = build_registry(loaded, build_security(loaded)).names()
    hardware = [n for n in names if n.split("_")[0] in {"gpio", "serial", "i2c", "sensor", "ha"}]
    assert sorted(hardware) == [
        "gpio_list", "gpio_pulse", "gpio_pwm", "gpio_read", "gpio_write",
        "ha_call_service", "ha_states",
        "i2c_read", "i2c_scan", "i2c_write",
        "sensor_read",
        "serial_list", "serial_send",
    ]  # fmt: skip


def test_plain_schemas_are_what_pydantic_writes_and_the_model_waits_for_a_call(
    tmp_path: Path,
) -> None:
    hardware = {
        "pin_factory": "mock",
        "gpio": {"porch_light": {"pin": 17}, "fan": {"pin": 18, "kind": "pwm"}},
        "serial": {"arduino": {"port": "loop://"}},
        "i2c": {"buses": [1], "addresses": [0x50]},
        "sensors": {"greenhouse": {"driver": "bme280", "address": 0x76}},
    }
    assistant = {"url": "http://127.0.0.1:8123", "token": "t", "allow": ["light"]}
    configs: list[dict[str, object]] = [
        {},
        {"hardware": hardware, "home_assistant": assistant},
        {"hardware": {"pin_factory": "mock", "allow_raw_pins": True}},
    ]
    everyday = build_registry(*_default_setup(tmp_path))
    waiting = {name for name in everyday.names() if everyday.get(name)._model is None}  # type: ignore[union-attr]
    assert len(waiting) > 10
    everyday.specs()  # the schemas are written without the models
    assert waiting == {name for name in everyday.names() if everyday.get(name)._model is None}  # type: ignore[union-attr]
    assert all(everyday.get(name)._plain is not None for name in everyday.names())  # type: ignore[union-attr]
    tools: list[Tool] = [sample]
    for index, extra in enumerate(configs):
        raw = {"provider": {"kind": "ollama", "model": "m"}, **extra}
        loaded = LoadedConfig(parse_config(raw, {}), tmp_path, tmp_path / str(index))
        registry = build_registry(loaded, build_security(loaded))
        tools += [item for name in registry.names() if (item := registry.get(name))]
    plain = [item for item in tools if item._plain is not None]
    for item in tools:
        shown = json.dumps(item.spec().parameters)  # key order too: it is the request body
        assert shown == json.dumps(_strip_titles(item.arguments_model.model_json_schema()))
    assert len(plain) > 40


def _default_setup(tmp_path: Path) -> tuple[LoadedConfig, SecurityKit]:
    loaded = LoadedConfig(
        parse_config({"provider": {"kind": "ollama", "model": "m"}}, {}), tmp_path, tmp_path
    )
    return loaded, build_security(loaded)
