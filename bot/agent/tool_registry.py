"""The tool registry: assembled from the config, it runs calls and maps every failure.

This is the one place where a tool's outcome becomes a ``ToolResult``: an
unreadable call, an unknown tool, bad arguments, a ``ToolError``, a timeout and
a bug all come back as a result the model can read, and output is capped with a
visible marker. Approvals and policy (later) wrap a ``ToolExecutor`` rather than
living inside tools.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from bot.config import LoadedConfig
from bot.core.conversation import ToolCall, ToolSpec
from bot.core.errors import ToolError, log_bug
from bot.core.tool_api import CallState, Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from bot.security.kit import SecurityKit

log = logging.getLogger(__name__)

TOOL_MODULES: tuple[str, ...] = (
    "tools.clock",
    "tools.calculator",
    "tools.files",
    "tools.send_file",
    "tools.shell",
    "tools.web",
    "tools.browser",
    "tools.system_info",
    "tools.home_assistant",
    "tools.gpio",
    "tools.serial_port",
    "tools.i2c",
    "tools.skill",
)
"""Modules that contribute tools; each has ``build(loaded, security) -> list[Tool]``."""


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call whose tool was found and whose arguments passed validation."""

    call: ToolCall
    tool: Tool
    values: BaseModel


class ToolExecutor(Protocol):
    """What the agent needs from a tool set: the specs to show and a way to run a call."""

    def specs(self) -> tuple[ToolSpec, ...]: ...

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult: ...


class ToolRegistry:
    """The tools available to the agent, keyed by name."""

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        default_timeout_s: float = 30.0,
        max_output_chars: int = 16000,
    ) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            if item.name in self._tools:
                raise ValueError(f"two tools are named {item.name!r}")
            self._tools[item.name] = item
        self._default_timeout_s = default_timeout_s
        self._max_output_chars = max_output_chars

    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if there is one."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about every tool."""
        return tuple(item.spec() for item in self._tools.values())

    def has_untrusted_output(self) -> bool:
        """Whether any tool returns outside text (so the prompt explains the marking)."""
        return any(item.untrusted_output for item in self._tools.values())

    def add(self, item: Tool) -> None:
        """Register one more tool (one built after the others, such as ``delegate``)."""
        if item.name in self._tools:
            raise ValueError(f"two tools are named {item.name!r}")
        self._tools[item.name] = item

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run one call; never raises except on cancellation."""
        prepared = self.prepare(call)
        if isinstance(prepared, ToolResult):
            report_call(ctx, call, "done")
            return prepared
        report_call(ctx, call, "running")
        try:
            return await self.run_prepared(prepared, ctx)
        finally:
            report_call(ctx, call, "done")

    def prepare(self, call: ToolCall) -> PreparedCall | ToolResult:
        """Find the tool and validate the arguments; a failed result says what to fix."""
        if call.error:
            return ToolResult.failure(f"the call to {call.name} could not be read: {call.error}")
        item = self._tools.get(call.name)
        if item is None:
            known = ", ".join(self._tools) or "none"
            return ToolResult.failure(f"there is no tool named {call.name!r}; tools: {known}")
        try:
            return PreparedCall(call, item, item.validate(call.arguments))
        except ToolError as exc:
            return ToolResult.failure(str(exc))

    async def run_prepared(self, prepared: PreparedCall, ctx: ToolContext) -> ToolResult:
        """Run a validated call with its timeout; map every failure to a result; cap output."""
        call, item = prepared.call, prepared.tool
        timeout = item.timeout_s or self._default_timeout_s
        try:
            async with asyncio.timeout(timeout) as scope:
                result = await item.run(ctx, prepared.values)
        except ToolError as exc:
            result = ToolResult.failure(str(exc))
        except TimeoutError:
            if not scope.expired():
                result = self._bug(call, ctx)
            else:
                result = ToolResult.failure(f"{call.name} did not finish within {timeout:g} s")
        except Exception:
            result = self._bug(call, ctx)
        return truncate_result(result, self._max_output_chars)

    def _bug(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        error_id = log_bug(log, f"tool {call.name} crashed in session {ctx.session}")
        return ToolResult.failure(
            f"{call.name} failed because of an internal error (error id {error_id}); "
            "tell the user it failed and do not retry it"
        )


def report_call(ctx: ToolContext, call: ToolCall, state: CallState) -> None:
    """Tell the turn (``ctx.on_call``) where ``call`` stands; a failing hook costs no call."""
    if ctx.on_call is None:
        return
    try:
        ctx.on_call(call, state)
    except Exception as exc:  # only the progress line is lost
        log_bug(log, f"reporting a {call.name} call as {state} failed", exc)


def truncate_result(result: ToolResult, limit: int) -> ToolResult:
    """Cap a result's output at ``limit`` characters, keeping the head and the tail."""
    text = result.output
    if len(text) <= limit:
        return result
    cut = len(text) - limit
    head = text[: limit * 3 // 4]
    tail = text[len(text) - (limit - len(head)) :]
    marker = f"\n…[{cut} characters cut: output longer than {limit} characters]…\n"
    return ToolResult(ok=result.ok, output=head + marker + tail, error=result.error)


def build_registry(loaded: LoadedConfig, security: SecurityKit) -> ToolRegistry:
    """Assemble the tool set from the config, leaving out disabled tools.

    Each tool module gets the ``SecurityKit`` (its guards and settings) here, when
    the registry is assembled: there is no other way for a tool to reach them.
    """
    settings = loaded.config.tools
    disabled = set(settings.disabled)
    available: list[Tool] = []
    for module_name in TOOL_MODULES:
        available.extend(importlib.import_module(module_name).build(loaded, security))
    tools = [t for t in available if t.name not in disabled]
    unknown = disabled - {t.name for t in available}
    if unknown:
        log.warning(
            "tools.disabled names tools PinClaw does not have: %s", ", ".join(sorted(unknown))
        )
    return ToolRegistry(
        tools, default_timeout_s=settings.timeout_s, max_output_chars=settings.max_output_chars
    )
