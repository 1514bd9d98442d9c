"""The composition root: builds PinClaw's parts from a loaded config and owns their lifetimes.

Parts start in dependency order (HTTP client, database, history, tools,
provider, agent) and close in reverse. Nothing here imports a channel or a
hardware library; those are loaded by name only when the config enables them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import httpx

from bot.agent import Agent, ModelSettings
from bot.config import LoadedConfig
from bot.db import Database
from bot.dispatch import ToolDispatch
from bot.history import HistoryStore
from bot.prompt import PromptBuilder
from bot.providers import build_provider_chain
from bot.tls import shared_ssl_context
from bot.tool_registry import ToolRegistry, build_registry

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class App:
    """The assembled core."""

    loaded: LoadedConfig
    db: Database
    history: HistoryStore
    tools: ToolRegistry
    agent: Agent


@asynccontextmanager
async def open_app(loaded: LoadedConfig) -> AsyncIterator[App]:
    """Build and start the core; close everything on exit, in reverse order."""
    config = loaded.config
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx.AsyncClient(verify=shared_ssl_context(), follow_redirects=False)
        )
        loaded.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        loaded.workspace.mkdir(mode=0o700, exist_ok=True)
        db = Database(loaded.database)
        await db.open()
        stack.push_async_callback(db.close)
        history = HistoryStore(db)
        await history.setup()
        tools = build_registry(loaded)
        prompt = PromptBuilder(loaded.workspace / config.agent.identity_file, loaded.timezone())
        prompt.ensure_identity()
        agent = Agent(
            provider=build_provider_chain(config.provider, client),
            tools=tools,
            history=history,
            prompt=prompt,
            dispatch=ToolDispatch(config.provider.tool_dispatch),
            settings=config.agent,
            model=ModelSettings(config.provider.max_tokens, config.provider.temperature),
            workspace=loaded.workspace,
            timezone=loaded.timezone(),
        )
        yield App(loaded, db, history, tools, agent)
