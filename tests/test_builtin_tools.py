"""The two built-in tools: calculator and clock."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.agent.tool_registry import ToolRegistry
from bot.core.conversation import ToolCall
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from tools.calculator import calculator
from tools.clock import clock

FIXED = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # the night Lisbon moves to summer time


@pytest.fixture
def tools() -> ToolRegistry:
    return ToolRegistry([calculator, clock])


def context(tmp_path: Path, zone: str = "Europe/Lisbon") -> ToolContext:
    return ToolContext(SessionKey("t", "1"), tmp_path, ZoneInfo(zone), now=lambda: FIXED)


@pytest.mark.parametrize(
    ("expression", "answer"),
    [
        ("2+2", "2+2 = 4"),
        ("(3.5+2)*4^2", "(3.5+2)*4^2 = 88"),
        ("0.1+0.2", "0.1+0.2 = 0.3"),
        ("7 // 2 + 7 % 2", "7 // 2 + 7 % 2 = 4"),
        ("sqrt(2)", "sqrt(2) = 1.41421356237"),
        ("-2**2", "-2**2 = -4"),
        ("2**-1", "2**-1 = 0.5"),
        ("max(3, 9, 4)", "max(3, 9, 4) = 9"),
        ("round(pi, 3)", "round(pi, 3) = 3.142"),
        ("12 × 3 ÷ 4", "12 × 3 ÷ 4 = 9"),
        ("10**999 // 10**998", "10**999 // 10**998 = 10"),
    ],
)
async def test_calculator_answers(
    tools: ToolRegistry, tmp_path: Path, expression: str, answer: str
) -> None:
    result = await tools.execute(
        ToolCall("1", "calculator", {"expression": expression}), context(tmp_path)
    )
    assert result.ok, result.error
    assert result.output == answer


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("1/0", "division by zero"),
        ("__import__('os').system('id')", "unsupported element"),
        ("open('/etc/passwd')", "unsupported element"),
        ("(1).__class__", "unsupported element"),
        ("9**9**9", "exponents above 10000"),
        ("7**9999", "more than 1000 digits"),
        ("factorial(5000)", "factorial is limited"),
        ("sqrt(-1)", "math error"),
        ("2 +", "is not an arithmetic expression"),
        ("", "the expression is empty"),
        ("1+" * 300 + "1", "longer than 500 characters"),
    ],
)
async def test_calculator_refuses_clearly(
    tools: ToolRegistry, tmp_path: Path, expression: str, error: str
) -> None:
    result = await tools.execute(
        ToolCall("1", "calculator", {"expression": expression}), context(tmp_path)
    )
    assert not result.ok
    assert error in (result.error or "")


async def test_clock_uses_the_configured_zone_across_dst(
    tools: ToolRegistry, tmp_path: Path
) -> None:
    result = await tools.execute(ToolCall("1", "clock", {}), context(tmp_path))
    assert result.output.startswith("Sunday 29 March 2026, 00:30:00 WET (UTC+00:00")
    assert "timezone Europe/Lisbon" in result.output
    later = ToolContext(
        SessionKey("t", "1"),
        tmp_path,
        ZoneInfo("Europe/Lisbon"),
        now=lambda: datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
    )
    summer = await tools.execute(ToolCall("2", "clock", {}), later)
    assert "02:30:00 WEST (UTC+01:00" in summer.output


async def test_clock_in_another_zone_and_bad_zone(tools: ToolRegistry, tmp_path: Path) -> None:
    ok = await tools.execute(
        ToolCall("1", "clock", {"timezone": "Asia/Kolkata"}), context(tmp_path)
    )
    assert "06:00:00 IST (UTC+05:30" in ok.output
    bad = await tools.execute(ToolCall("2", "clock", {"timezone": "Moon/Base"}), context(tmp_path))
    assert not bad.ok
    assert "unknown timezone 'Moon/Base'" in (bad.error or "")
