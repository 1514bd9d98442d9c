"""The ``delegate`` tool: hand a task to a configured sub-agent and return its answer.

Each ``[agents.NAME]`` has its own prompt, its own provider (or the main one)
and a subset of the tools. A sub-agent's tool calls go through the same policy
gate as everyone's, in the same chat, so approvals, limits and the audit log
apply unchanged. Delegation depth is capped by ``[agent] max_delegation_depth``,
so agents cannot hand work to each other in circles, and each delegation has
its own timeout. The sub-agent works in a session of its own, so its steps do
not crowd the chat's history.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Annotated, Literal

from pydantic import Field

from bot.agent.history import HistoryStore
from bot.agent.loop import Agent
from bot.agent.tool_registry import ToolExecutor
from bot.config.provider import SubAgentConfig
from bot.core.conversation import ToolCall, ToolSpec
from bot.core.errors import Refused, ToolError
from bot.core.messages import InboundMessage, SessionKey
from bot.core.tool_api import Tool, ToolContext, ToolResult

AgentFactory = Callable[[str, SubAgentConfig, ToolExecutor, int], Agent]
"""Builds the sub-agent ``name`` with its tools, at a given delegation depth."""


class ToolSubset:
    """A ``ToolExecutor`` that offers only some of another executor's tools."""

    def __init__(self, inner: ToolExecutor, names: Collection[str]) -> None:
        self._inner = inner
        self._names = frozenset(names)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The specs of the allowed tools."""
        return tuple(s for s in self._inner.specs() if s.name in self._names)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run an allowed call through the inner executor; refuse any other."""
        if call.name not in self._names:
            return ToolResult.failure(f"there is no tool named {call.name!r} for this agent")
        return await self._inner.execute(call, ctx)


def build_delegate(
    agents: Mapping[str, SubAgentConfig],
    *,
    executor: ToolExecutor,
    history: HistoryStore,
    make_agent: AgentFactory,
    max_depth: int,
) -> Tool | None:
    """The ``delegate`` tool for the configured sub-agents (None when there are none)."""
    if not agents or max_depth < 1:
        return None
    names = tuple(agents)
    roster = "; ".join(f"{name}: {cfg.description}" for name, cfg in agents.items())

    async def delegate(ctx: ToolContext, agent: str, task: str) -> str:
        if ctx.depth >= max_depth:
            raise Refused("this agent may not hand tasks to other agents")
        config = agents[agent]
        tools = ToolSubset(executor, config.tools)
        worker = make_agent(agent, config, tools, ctx.depth + 1)
        key = SessionKey("delegate", f"{agent}:{uuid.uuid4().hex[:12]}")
        session_id = await history.new_session(key)
        message = InboundMessage(
            channel=ctx.session.channel,
            chat_id=ctx.session.chat_id,
            thread_id=ctx.session.thread_id,
            sender_id=ctx.sender_id,
            text=task,
        )
        context = f"You are the sub-agent {agent!r}; another agent gave you this task."
        try:
            async with asyncio.timeout(config.timeout_s):
                result = await worker.run_turn(  # the same taint: what either read, both did
                    message, channel_context=context, session_id=session_id, taint=ctx.taint
                )
        except TimeoutError:
            raise ToolError(f"{agent} did not finish within {config.timeout_s:g} s") from None
        return f"{agent} answered:\n{result.text}"

    delegate.__annotations__.update(
        agent=Annotated[Literal[names], Field(description="which agent: " + roster)],
        task=Annotated[str, Field(description="the task, with everything the agent needs")],
    )
    return Tool(
        delegate,
        name="delegate",
        description=(
            "Hand a self-contained task to a specialised agent and get its answer back. "
            f"Agents: {roster}."
        ),
        untrusted_output=True,
        timeout_s=max(cfg.timeout_s for cfg in agents.values()) + 5,
        taints=lambda ctx, values: ctx.taint.describe(),
    )
