"""The composition root: builds PinClaw's parts from a loaded config and owns their lifetimes.

Parts start in dependency order (HTTP client, database, history, memory, the security
kit, the tools behind the policy gate, provider, agent) and close in reverse.
Nothing here imports a channel or a hardware library; those are loaded by name
only when the config enables them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.request import getproxies

import httpx

from bot.agent.dispatch import ToolDispatch
from bot.agent.history import HistoryStore
from bot.agent.loop import Agent, ModelSettings
from bot.agent.prompt import PromptBuilder
from bot.agent.tool_registry import ToolExecutor, ToolRegistry, build_registry
from bot.agent.usage_meter import UsageMeter
from bot.config import LoadedConfig
from bot.config.provider import SubAgentConfig
from bot.core.tls import pending_ssl_context, shared_ssl_context
from bot.memory.service import MemoryService
from bot.memory.setup import open_memory
from bot.providers import Provider, build_provider, build_provider_chain
from bot.security.audit import AuditLog
from bot.security.files.provenance import Provenance
from bot.security.gate import UNTRUSTED_NOTE, PolicyGate
from bot.security.kit import SecurityKit, build_security
from bot.security.redact import RedactingFilter, Redactor
from bot.skills import open_catalog
from bot.store.db import Check, Database
from bot.store.people import PeopleStore
from bot.store.usage import UsageStore
from tools.memory import memory_tools

if TYPE_CHECKING:  # each of these is loaded only when the config uses it
    from bot.daemon.voice import VoiceReplies
    from bot.hardware.history import SensorHistory
    from bot.mcp.manager import McpManager
    from bot.media.inbox import Inbox
    from bot.media.prepare import MediaIntake
    from bot.security.net.policy import Resolver
    from tools.delegate import AgentFactory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class App:
    """The assembled core (``media`` is built when first asked for: chats need it,
    ``pinclaw agent -m`` does not)."""

    loaded: LoadedConfig
    db: Database
    history: HistoryStore
    tools: ToolRegistry
    gate: PolicyGate
    security: SecurityKit
    agent: Agent
    people: PeopleStore
    memory: MemoryService | None = None
    usage: UsageStore | None = None
    readings: SensorHistory | None = None
    mcp: McpManager | None = None  # the MCP servers, when the config has any
    client: httpx.AsyncClient | None = None  # the shared HTTP client

    @functools.cached_property
    def media(self) -> MediaIntake:
        """Pictures, voice and documents for chat turns, by the config and the main model's
        vision; documents are saved in the workspace's inbox."""
        from bot.media.prepare import media_intake

        assert self.client is not None, "open_app gives every App its client"
        loaded = self.loaded

        def inbox() -> Inbox:  # made with the first document (its code loaded then)
            from bot.media.inbox import Inbox

            return Inbox(
                loaded.workspace,
                loaded.config.media.inbox_dir,
                loaded.timezone(),
                Provenance(self.db, self.security.paths.roots),  # saved documents: untrusted
            )

        return media_intake(loaded.config, self.client, inbox)

    @functools.cached_property
    def voice(self) -> VoiceReplies | None:
        """Answers by voice for chat turns; None while ``[speech]`` is off."""
        if not self.loaded.config.speech.configured:
            return None
        from bot.daemon.voice import voice_replies

        assert self.client is not None, "open_app gives every App its client"
        return voice_replies(self.loaded.config.speech, self.client)


@asynccontextmanager
async def open_app(
    loaded: LoadedConfig, *, resolver: Resolver | None = None, check: Check = "header"
) -> AsyncIterator[App]:
    """Build and start the core; close everything on exit, in reverse order.

    ``resolver`` replaces DNS for the web tools (tests point names at fakes);
    ``check`` is how closely the database is examined on opening (``quick``
    for the daemon).
    """
    config = loaded.config
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(core_client())
        loaded.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        loaded.workspace.mkdir(mode=0o700, exist_ok=True)
        fresh = not loaded.database.exists()
        db = Database(loaded.database)
        await db.open(check)
        stack.push_async_callback(db.close)
        history = HistoryStore(db)
        await history.setup()
        people = PeopleStore(db)
        await people.setup()
        usage = UsageStore(db, loaded.timezone())
        await usage.setup()
        meter = UsageMeter(usage, config.usage)
        memory = await open_memory(db, loaded, client, fresh=fresh)
        if memory is not None:
            stack.push_async_callback(memory.stop)
        security = build_security(loaded, resolver=resolver)
        stack.push_async_callback(security.aclose)  # the egress proxy, if a command started it
        stack.enter_context(redacted_logs(security.redactor))
        tools = build_registry(loaded, security)
        mcp = await _start_mcp(loaded, tools, stack)
        gate = PolicyGate(
            tools,
            config=config.security,
            audit=AuditLog(loaded.data_dir / config.security.audit_log),
            redactor=security.redactor,
            provenance=Provenance(db, security.paths.roots),
        )
        notes = (UNTRUSTED_NOTE,) if tools.has_untrusted_output() else ()
        skills = open_catalog(loaded)
        prompt = PromptBuilder(
            loaded.workspace / config.agent.identity_file,
            loaded.timezone(),
            notes=notes,
            live_sections=() if skills is None else (skills.prompt_section,),
        )
        prompt.ensure_identity()
        provider = build_provider_chain(config.provider, client)
        if config.agents and "delegate" not in config.tools.disabled:
            from tools.delegate import build_delegate

            delegate = build_delegate(
                config.agents,
                executor=gate,
                history=history,
                make_agent=_sub_agents(loaded, client, provider, history, notes, meter),
                max_depth=config.agent.max_delegation_depth,
            )
            if delegate is not None:
                tools.add(delegate)
        if memory is not None:
            for memory_tool in memory_tools(memory):
                if memory_tool.name not in config.tools.disabled:
                    tools.add(memory_tool)
        readings = await _sensor_history(db, loaded, tools)
        agent = Agent(
            provider=provider,
            tools=gate,
            history=history,
            prompt=prompt,
            dispatch=ToolDispatch(config.provider.tool_dispatch),
            settings=config.agent,
            model=ModelSettings(
                config.provider.max_tokens,
                config.provider.temperature,
                config.security.max_tokens_per_day,
            ),
            workspace=loaded.workspace,
            timezone=loaded.timezone(),
            memory=memory,
            usage=meter,
            redact=security.redactor.text,
        )
        yield App(
            loaded,
            db,
            history,
            tools,
            gate,
            security,
            agent,
            people,
            memory,
            usage,
            readings,
            mcp=mcp,
            client=client,
        )


def core_client() -> httpx.AsyncClient:
    """The HTTP client of the providers, memory's embeddings and transcription.

    The CA bundle is loaded before the first request that may use TLS: one to an
    https:// URL, or any once a proxy is configured in the environment. A model on
    this machine over plain HTTP never needs it.
    """
    proxied = bool(getproxies())
    return httpx.AsyncClient(
        verify=shared_ssl_context() if proxied else pending_ssl_context(),
        follow_redirects=False,
        event_hooks={"request": [_tls_ready]},
    )


async def _tls_ready(request: httpx.Request) -> None:
    if request.url.scheme != "http":
        shared_ssl_context()


async def _sensor_history(
    db: Database, loaded: LoadedConfig, tools: ToolRegistry
) -> SensorHistory | None:
    """The readings history when ``sensor_read`` is offered (its code loaded only then)."""
    if tools.get("sensor_read") is None:
        return None
    from tools.sensor_chart import open_sensor_history

    return await open_sensor_history(db, loaded, tools)


async def _start_mcp(
    loaded: LoadedConfig, tools: ToolRegistry, stack: AsyncExitStack
) -> McpManager | None:
    """Connect the configured MCP servers (the SDK is loaded only when there are some)."""
    servers = loaded.config.mcp.servers
    if not servers:
        return None
    from bot.mcp.manager import McpManager

    manager = McpManager(
        servers,
        loaded.data_dir / "logs" / "mcp",
        tools.add,
        taken=lambda name: tools.get(name) is not None,
    )
    stack.push_async_callback(manager.stop)
    await manager.start()
    return manager


def _sub_agents(
    loaded: LoadedConfig,
    client: httpx.AsyncClient,
    main: Provider,
    history: HistoryStore,
    notes: tuple[str, ...],
    meter: UsageMeter,
) -> AgentFactory:
    """Builds sub-agents for ``delegate``: their own prompt and provider, shared history."""
    config = loaded.config
    providers: dict[str, Provider] = {}

    def make(name: str, sub: SubAgentConfig, tools: ToolExecutor, depth: int) -> Agent:
        if name not in providers:
            providers[name] = build_provider(sub.provider, client) if sub.provider else main
        spec = sub.provider or config.provider
        identity = sub.system_prompt or (
            f"You are {name}, a specialised assistant: {sub.description}. "
            "Do the task you are given and report the result briefly and exactly."
        )
        return Agent(
            provider=providers[name],
            tools=tools,
            history=history,
            prompt=PromptBuilder(
                loaded.workspace / config.agent.identity_file,
                loaded.timezone(),
                notes=notes,
                identity_text=identity,
            ),
            dispatch=ToolDispatch(spec.tool_dispatch),
            settings=config.agent,
            model=ModelSettings(
                spec.max_tokens, spec.temperature, config.security.max_tokens_per_day
            ),
            workspace=loaded.workspace,
            timezone=loaded.timezone(),
            depth=depth,
            usage=meter,
        )

    return make


@contextmanager
def redacted_logs(redactor: Redactor) -> Iterator[None]:
    """Redact the config's secrets from every log line while the core runs."""
    handlers = logging.getLogger().handlers
    log_filter = RedactingFilter(redactor)
    for handler in handlers:
        handler.addFilter(log_filter)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(log_filter)
