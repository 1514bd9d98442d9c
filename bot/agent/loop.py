"""The agent turn: history in, model rounds with tools, reply out, everything stored.

One turn takes a person's message, loads the session's history, and asks the
model; while the model asks for tools, the calls of one response run
concurrently and their results go back to the model, for at most
``max_tool_iterations`` rounds. Every message is committed to SQLite as it is
produced, so an interrupted turn leaves a history the next turn can use.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo

from bot.agent.dispatch import ToolDispatch
from bot.agent.history import HistoryStore, TurnRecord
from bot.agent.history_trim import repair_history, trim_history
from bot.agent.progress import ProgressLine, ProgressSink, Redact
from bot.agent.prompt import PromptBuilder
from bot.agent.tool_registry import ToolExecutor
from bot.agent.usage_meter import UsageMeter
from bot.config.general import AgentConfig
from bot.core.conversation import ChatMessage, Completion, ImagePart, TextSink, ToolCall, Usage
from bot.core.messages import InboundMessage, SessionKey, without_surrogates
from bot.core.metrics import count_model_call, count_turn
from bot.core.taint import Taint, marked_sources
from bot.core.tool_api import FileOutlet, ToolContext, ToolResult
from bot.providers.base import Provider

log = logging.getLogger(__name__)

TurnStatus = Literal["done", "iteration_limit", "budget"]


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended: the reply and what it took."""

    text: str
    status: TurnStatus
    usage: Usage
    rounds: int
    tool_calls: int
    turn_id: int | None = None  # the stored turn (None: refused before it began)


class TurnMemory(Protocol):
    """Long-term memory as a turn uses it (``bot.memory.service.MemoryService``)."""

    async def context_for(
        self, message: InboundMessage, session: Awaitable[int], origin: str
    ) -> str:
        """A prompt section of what the speaker's memory holds for the message ("" for
        nothing); ``origin`` says whose turn it is ("chat", "cron:NAME", "heartbeat").
        ``session`` gives the turn's session id, awaited only once it is needed, so
        finding the session and searching memory can go on together."""
        ...

    async def observe(self, message: InboundMessage, session_id: int) -> None:
        """Keep what a person said."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-request settings taken from the main provider's config, and the daily budget.

    ``tokens_per_day`` caps one person's model tokens in any 24 hours (0: no cap).
    """

    max_tokens: int = 4096
    temperature: float | None = None
    tokens_per_day: int = 0


class Agent:
    """Runs turns; holds no per-chat state (that lives in the history store)."""

    def __init__(
        self,
        *,
        provider: Provider,
        tools: ToolExecutor,
        history: HistoryStore,
        prompt: PromptBuilder,
        dispatch: ToolDispatch,
        settings: AgentConfig,
        model: ModelSettings,
        workspace: Path,
        timezone: ZoneInfo,
        depth: int = 0,
        memory: TurnMemory | None = None,
        usage: UsageMeter | None = None,
        redact: Redact | None = None,
    ) -> None:
        self._redact = redact  # progress lines show tool arguments only through it
        self._memory = memory
        self._usage = usage
        self._depth = depth
        self._provider = provider
        self._tools = tools
        self._history = history
        self._prompt = prompt
        self._dispatch = dispatch
        self._settings = settings
        self._model = model
        self._workspace = workspace
        self._timezone = timezone
        self._files: FileOutlet | None = None

    def send_files_with(self, outlet: FileOutlet | None) -> None:
        """How turns reach their chat with files (``send_file``); None: no chat can take one."""
        self._files = outlet

    async def new_session(self, message: InboundMessage) -> None:
        """Start a fresh conversation in ``message``'s chat."""
        await self._history.new_session(message.session)

    async def remember_delivery(self, key: SessionKey, note: str, text: str) -> None:
        """Record a message sent to a chat outside a turn (a job's output) in its history."""
        session_id = await self._history.session_for(key)
        await self._history.append(
            session_id, [ChatMessage("user", note), ChatMessage("assistant", text)]
        )

    async def run_turn(
        self,
        message: InboundMessage,
        *,
        channel_context: str,
        session_id: int | None = None,
        on_text: TextSink | None = None,
        inbound_id: int | None = None,
        replayed: bool = False,
        history_key: SessionKey | None = None,
        origin: str = "chat",
        on_progress: ProgressSink | None = None,
        images: Sequence[ImagePart] = (),
        taint: Taint | None = None,
        provider: Provider | None = None,
        settings: ModelSettings | None = None,
    ) -> TurnResult:
        """Answer one message. Provider failures propagate as ``ProviderError``.

        ``inbound_id`` ties the turn to its stored inbound message; a message
        answered again after a restart (``replayed``) first drops what its
        interrupted attempt left in history. A scheduled turn may keep its
        history apart from the chat it answers in (``history_key``); ``origin``
        says who started it ("chat", "cron:NAME", "heartbeat"). Streamed reply
        text goes to ``on_text``, and a line saying what each round's tools are doing
        (waiting for approval, running) to ``on_progress`` (arguments only in direct
        chats). A chat that chose another model passes its ``provider`` (and that model's
        ``settings``) to be asked instead of the main one.
        """
        model = _Model(provider or self._provider, settings or self._model)
        started = time.monotonic()
        discard = replayed and inbound_id is not None
        if discard and await self._history.discard_unfinished(inbound_id or 0):
            log.info("discarded an interrupted attempt at answering inbound %s", inbound_id)
        key = history_key or message.session
        refused, remembered, (session_id, earlier) = await self._before(
            message, key, session_id, origin, started
        )
        if refused:
            return refused
        # The pictures go with this turn's requests only; history stores the text,
        # which names each picture ("[image: photo.jpg, 1280x960]").
        user = ChatMessage(role="user", content=message.text, images=tuple(images))
        # Work that may finish while the model is asked (awaited at the end of the turn):
        # keeping what the person said, and recording each model call's usage.
        background = self._observe(message, session_id, origin)
        turn_id = await self._history.begin_turn(session_id, inbound_id, [user], message.sender_id)
        turn: list[ChatMessage] = [user]
        ctx = self._context(message, origin, inbound_id, earlier, taint, on_progress)
        usage, calls_made, status, rounds = Usage(), 0, "failed", 0
        last: list[ChatMessage] = []  # stored together with the turn's outcome
        try:
            limit = self._settings.max_tool_iterations
            while rounds < limit:
                rounds += 1
                system = self._prompt.build(channel=channel_context, extra=remembered)
                messages = trim_history(
                    [*earlier, *turn], self._settings.history_budget_tokens, protected=len(turn)
                )
                completion = await self._ask(
                    model, system, messages, on_text, message, origin, turn_id, background
                )
                usage += completion.usage
                text = without_surrogates(completion.text)  # as it is stored and sent
                reply = ChatMessage("assistant", text, completion.tool_calls)
                if not completion.tool_calls:
                    status, last = "done", [reply]
                    return TurnResult(text, "done", usage, rounds, calls_made, turn_id)
                await self._history.append(session_id, [reply], turn_id)
                turn.append(reply)
                calls_made += len(completion.tool_calls)
                if rounds == limit:
                    results = [_not_run(call, limit) for call in completion.tool_calls]
                else:
                    results = await self._run_tools(completion.tool_calls, ctx)
                await self._history.append(session_id, results, turn_id)
                turn.extend(results)
            text = (
                f"I stopped after {limit} rounds of tool use without finishing "
                "(the limit is agent.max_tool_iterations). "
                "Try a smaller request, or ask me to continue."
            )
            status, last = "iteration_limit", [ChatMessage("assistant", text)]
            return TurnResult(text, "iteration_limit", usage, rounds, calls_made, turn_id)
        except asyncio.CancelledError:
            status = "interrupted"
            raise
        finally:
            if not self._depth:  # a sub-agent's work is part of its caller's turn
                count_turn(status, time.monotonic() - started)
            record = TurnRecord(status, usage, model.provider.label, rounds, calls_made)
            ended = self._history.end_turn(session_id, turn_id, record, last)
            await asyncio.shield(asyncio.gather(*background, ended))
            log.info(
                "turn %s in %s: %s after %d round(s), %d tool call(s), %d+%d tokens",
                turn_id,
                message.session,
                status,
                rounds,
                calls_made,
                usage.input_tokens,
                usage.output_tokens,
            )

    def _context(
        self,
        message: InboundMessage,
        origin: str,
        inbound_id: int | None,
        earlier: Sequence[ChatMessage],
        taint: Taint | None,
        on_progress: ProgressSink | None = None,
    ) -> ToolContext:
        """What the turn's tool calls get, its taint holding the untrusted content already in
        the context: a forwarded or quoted message, marked results and documents in the
        history."""
        ctx = ToolContext(
            session=message.session,
            workspace=self._workspace,
            origin=origin,
            timezone=self._timezone,
            sender_id=message.sender_id,
            depth=self._depth,
            sender_name=message.sender_name,
            is_direct=message.is_direct,
            inbound_id=inbound_id,
            send_file=self._files(message.session) if self._files is not None else None,
            taint=taint if taint is not None else Taint(),
            # The progress line follows each call (arguments only in direct chats).
            on_call=ProgressLine(on_progress, self._redact if message.is_direct else None)
            if on_progress is not None
            else None,
        )
        ctx.taint.add(message.quotes)
        # Tool results and documents people sent (their text is marked in the user's message).
        marked = (m.content for m in earlier if m.role in ("tool", "user"))
        ctx.taint.extend(marked_sources(marked))
        return ctx

    async def _before(
        self,
        message: InboundMessage,
        key: SessionKey,
        session_id: int | None,
        origin: str,
        started: float,
    ) -> tuple[TurnResult | None, tuple[str, ...], tuple[int, list[ChatMessage]]]:
        """A budget's refusal (if any), what memory adds, and the session with its
        history, looked up at once: the database answers them in one go."""
        history = asyncio.ensure_future(self._opened(key, session_id))
        refused, remembered, (session_id, stored) = await asyncio.gather(
            self._refused(message.sender_id, started),
            self._recall(message, _SessionOf(history), origin),
            history,
        )
        return refused, remembered, (session_id, repair_history(stored))

    async def _opened(
        self, key: SessionKey, session_id: int | None
    ) -> tuple[int, list[ChatMessage]]:
        """The session (the chat's current one unless given) and its stored messages."""
        if session_id is None:
            return await self._history.open_session(key)
        return session_id, await self._history.load(session_id)

    async def _recall(
        self, message: InboundMessage, session: Awaitable[int], origin: str
    ) -> tuple[str, ...]:
        """What memory adds to the prompt."""
        if self._memory is None or self._depth:
            return ()
        section = await self._memory.context_for(message, session, origin)
        return (section,) if section else ()

    def _observe(
        self, message: InboundMessage, session_id: int, origin: str
    ) -> list[asyncio.Task[None]]:
        """Keep a person's words for later, in the background (awaited at the turn's end)."""
        if self._memory is None or self._depth or origin != "chat":
            return []
        return [asyncio.create_task(self._memory.observe(message, session_id), name="observe")]

    async def _ask(
        self,
        model: _Model,
        system: str,
        messages: list[ChatMessage],
        on_text: TextSink | None,
        message: InboundMessage,
        origin: str,
        turn_id: int,
        background: list[asyncio.Task[None]],
    ) -> Completion:
        """One model round; the answered request is counted for ``/metrics`` and kept for
        ``pinclaw usage`` and budgets (recorded in the ``background`` of the turn, which
        waits for it at its end, stopped or not: the call was paid for)."""
        completion = await self._dispatch.complete(
            model.provider,
            system,
            messages,
            self._tools.specs(),
            max_tokens=model.settings.max_tokens,
            temperature=model.settings.temperature,
            on_text=on_text,
        )
        label = completion.provider or model.provider.label
        usage = completion.usage
        count_model_call(label, usage.input_tokens, usage.output_tokens)
        if self._usage is not None:
            record = self._usage.record(
                label,
                completion.usage,
                chat=str(message.session),
                sender=message.sender_id,
                origin=origin,
                turn_id=turn_id,
            )
            background.append(asyncio.ensure_future(record))
        return completion

    async def _refused(self, sender: str, started: float) -> TurnResult | None:
        """The answer to a turn a budget stops before it calls the model, else None."""
        over = await self._over_budget(sender)
        if not over:
            return None
        if not self._depth:
            count_turn("budget", time.monotonic() - started)
        return TurnResult(over, "budget", Usage(), 0, 0)

    async def _over_budget(self, sender: str) -> str:
        """A plain sentence when ``sender`` or the installation used up its model budget,
        else ""."""
        if self._usage is not None and (refusal := await self._usage.refusal()):
            return refusal
        limit = self._model.tokens_per_day
        if limit <= 0:
            return ""
        used = await self._history.tokens_since(sender, time.time() - 86_400)
        if used < limit:
            return ""
        log.warning("turn refused: %s used %d of %d tokens in 24 h", sender, used, limit)
        return (
            f"You have reached today's limit for the model ({used:,} of {limit:,} tokens "
            "in the last 24 hours). Please try again later."
        )

    async def _run_tools(self, calls: Sequence[ToolCall], ctx: ToolContext) -> list[ChatMessage]:
        progress = ctx.on_call if isinstance(ctx.on_call, ProgressLine) else None
        if progress is not None:  # the gate reports each call as it waits, runs, ends
            progress.begin(calls)
        results = await asyncio.gather(*(self._tools.execute(call, ctx) for call in calls))
        if progress is not None:
            progress.settle()
        return [_result_message(call, result) for call, result in zip(calls, results, strict=True)]


@dataclass(frozen=True, slots=True)
class _Model:
    """The provider a turn asks and its request settings."""

    provider: Provider
    settings: ModelSettings


class _SessionOf:
    """The session id from a pending history lookup, for memory to await when it needs it
    (a plain coroutine would warn when memory returns early without awaiting it)."""

    __slots__ = ("_history",)

    def __init__(self, history: asyncio.Future[tuple[int, list[ChatMessage]]]) -> None:
        self._history = history

    def __await__(self) -> Generator[Any, None, int]:
        session_id, _ = yield from self._history.__await__()
        return session_id


def _result_message(call: ToolCall, result: ToolResult) -> ChatMessage:
    return ChatMessage(
        role="tool",
        content=result.for_model(),
        tool_call_id=call.id,
        tool_name=call.name,
        is_error=not result.ok,
    )


def _not_run(call: ToolCall, limit: int) -> ChatMessage:
    return _result_message(
        call, ToolResult.failure(f"not run: the turn reached its limit of {limit} tool rounds")
    )
