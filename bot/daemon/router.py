"""The router: every inbound message passes here on its way to an answer.

``put`` (the inbox every channel feeds) decides access, stores the message
durably, recognises duplicate deliveries, runs chat commands at once and
queues everything else per session. A turn runs the agent, delivers the reply
and records the outcome in the inbound store; messages still pending at start
(an interrupted turn, a crash) are answered by ``replay``, unless too old.

This is also where errors meet people: a ``UserError`` becomes its plain
sentence, anything else is logged as a bug with an id. No traceback ever
reaches a chat.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from bot.agent.loop import Agent, TurnResult
from bot.agent.prompt import describe_chat
from bot.approvals.service import ApprovalService
from bot.config.general import DaemonConfig
from bot.core.channel import (
    ButtonPress,
    Channel,
    DeliveryError,
    PressReply,
    ReplySink,
    ShuttingDown,
    StreamingChannel,
)
from bot.core.chat_commands import parse_command
from bot.core.conversation import ImagePart
from bot.core.draft import STOPPED
from bot.core.errors import UserError, bug_message, log_bug
from bot.core.messages import InboundMessage, OutboundMessage, SessionKey, cleaned, too_long
from bot.core.taint import Taint
from bot.daemon.access import AccessControl, pairing_offer
from bot.daemon.commands import ChatCommands
from bot.daemon.edits import Edits
from bot.daemon.linking import Linking
from bot.daemon.merging import Gatherer, pasted
from bot.daemon.models import ChatModels
from bot.daemon.quoting import with_quoted_sources
from bot.daemon.sessions import Job, Scheduled, SessionRunner
from bot.daemon.stopping import CANCEL_WAIT_S, STOP, WITHDRAW_S, recorded, sent_unless_cut, within
from bot.daemon.storage import StorageWatch, full_reason
from bot.media.prepare import MediaIntake, TurnInput
from bot.store.inbound import InboundStatus, InboundStore, sort_pending
from bot.store.pairing import PairingStore

if TYPE_CHECKING:  # loaded only when [speech] or [agent] usage_footer is set up
    from bot.daemon.usage_footer import UsageFooter
    from bot.daemon.voice import VoiceReplies

log = logging.getLogger(__name__)

# The answer to a message a channel could not read (it is stored as failed).
UNREADABLE = (
    "Sorry, I could not read your last message; please send it again, perhaps in other words."
)


class Router:
    """Accepts, stores, queues and answers inbound messages."""

    def __init__(
        self,
        *,
        agent: Agent,
        channels: Mapping[str, Channel],
        inbound: InboundStore,
        settings: DaemonConfig,
        access: AccessControl | None = None,
        pairing: PairingStore | None = None,
        model_label: str = "",
        approvals: ApprovalService | None = None,
        linking: Linking | None = None,
        media: MediaIntake | None = None,
        storage: StorageWatch | None = None,
        models: ChatModels | None = None,
        footer: UsageFooter | None = None,
        voice: VoiceReplies | None = None,
    ) -> None:
        self._voice = voice  # without it, replies are text only
        self._storage = storage  # without it, a full disk fails like any other error
        self._models = models  # without it, every chat uses the main model (no /model)
        self._footer = footer  # with it, chat replies end with their tokens and cost
        self._media = media  # without it, attachments are only named to the model
        self._linking = linking
        self._approvals = approvals
        self._agent = agent
        self._channels = channels
        self._inbound = inbound
        self._settings = settings
        self._access = access
        self._pairing = pairing
        self._runner = SessionRunner(
            self._turn,
            max_concurrent=settings.max_concurrent_turns,
            busy_mode=settings.busy_mode,
            on_dropped=self._mark_stopped,
        )
        limits = {name: getattr(c, "paste_limit", 0) for name, c in channels.items()}
        self._gather = Gatherer(self._runner, window_ms=settings.merge_window_ms, limits=limits)
        self._edits = Edits(inbound, self._runner, storage)
        self._commands = ChatCommands(
            agent=agent,
            runner=self._runner,
            channels=channels,
            model_label=model_label,
            approvals=approvals,
            models=models,
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False

    async def put(self, message: InboundMessage) -> bool:
        """The inbox: store and queue ``message``; False if it was delivered before."""
        if self._closing:
            raise ShuttingDown("PinClaw is stopping")
        message = cleaned(message)
        channel = self._channels.get(message.channel)
        if channel is None:
            log.warning("dropped a message from unknown channel %s", message.channel)
            return True
        channel.status.heard()
        decision = await self._access.decide(message) if self._access is not None else None
        if self._linking is not None and _is_link(message):
            known = decision is None or decision.action == "accept"
            if self._linking.first_delivery(message):
                self._spawn(self._link(message, known))
            return True
        if decision is not None:
            if decision.action == "drop":
                log.info(
                    "dropped message %s on %s: %s",
                    message.message_id,
                    message.channel,
                    decision.reason,
                )
                return True
            if decision.action == "pair":
                self._spawn(self._offer_pairing(message, decision.reason))
                return True
        max_age = self._settings.max_message_age_s
        if max_age and message.age() > max_age:
            log.warning(
                "not answering message %s on %s: it was sent %.0f s ago (max_message_age_s)",
                message.message_id,
                message.channel,
                message.age(),
            )
            return True
        if note := too_long(message.text, self._settings.max_message_bytes):
            log.warning(
                "not answering message %s on %s: %d bytes, over max_message_bytes",
                message.message_id,
                message.channel,
                len(message.text.encode()),
            )
            self._spawn(self._reply(message, note))
            return True
        if message.edit_of is not None:  # an edit: replaces a waiting text, or corrects
            if job := await self._edits.take(message, self._gather):
                self._dispatch(job)
            return True
        row = await self._record(message)
        if row is None:
            log.info(
                "ignored a second delivery of message %s on %s", message.message_id, message.channel
            )
            return False
        self._dispatch(Job(row, message))
        return True

    async def _record(self, message: InboundMessage) -> int | None:
        """Store ``message``; while the data folder is full, wait for space and try again
        (the channel stays up, and the platform keeps the message until it is stored)."""
        if self._storage is None:
            return await self._inbound.record(message)
        waiting = f"message {message.message_id} on {message.channel} waits for space to be stored"
        row = await self._storage.persist(lambda: self._inbound.record(message), waiting)
        if self._closing:
            raise ShuttingDown("PinClaw is stopping")
        return row

    async def unreadable(self, message: InboundMessage, reason: str) -> None:
        """Store a message that could not be read as failed; tell its chat when the sender
        is known and would be answered (a stranger, or a group message that may not have
        been for the bot, is not)."""
        if self._closing:
            raise ShuttingDown("PinClaw is stopping")
        message = cleaned(message)
        row = await self._record(message)
        if row is None:
            log.info("ignored a second delivery of unreadable message %s", message.message_id)
            return
        await self._mark(row, "failed", f"could not be read: {reason}")
        if message.channel not in self._channels or not (message.chat_id and message.sender_id):
            return
        decision = await self._access.decide(message) if self._access is not None else None
        if decision is None or decision.action == "accept":
            self._spawn(self._reply(message, UNREADABLE))

    async def run_scheduled(
        self, message: InboundMessage, *, history: SessionKey | None, origin: str, context: str
    ) -> TurnResult:
        """Run a turn for a job or the heartbeat, in order with the chat's own turns.

        The result comes back to the caller instead of being sent: the scheduler
        decides what is delivered. Raises ``CancelledError`` if the turn was
        stopped (``/stop``) or PinClaw is stopping.
        """
        if self._closing:
            raise asyncio.CancelledError("PinClaw is stopping")
        result: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()
        self._runner.submit(Job(0, message, scheduled=Scheduled(history, origin, context, result)))
        return await result

    def busy(self, key: SessionKey) -> bool:
        """Whether a turn of this chat runs or waits."""
        return self._runner.is_running(key) or self._runner.waiting(key) > 0

    async def press(self, press: ButtonPress) -> PressReply:
        """A button tap: an approval decision (checked by the approval service)."""
        if self._approvals is None:
            return PressReply("This button is no longer active.")
        return await self._approvals.press(press)

    async def replay(self, channel_timeout_s: float = 60.0) -> None:
        """Answer messages left pending by a stop or crash; skip those older than the limit.

        Each channel is waited for once (up to ``channel_timeout_s``) before its
        messages are queued, so replies do not go out while it is still connecting.
        """
        pending = await self._inbound.pending()
        answer, skipped = sort_pending(pending, self._channels, self._settings.max_message_age_s)
        # What their senders send meanwhile waits for them (a split paste's last part).
        self._gather.expect(stored.message for group in answer.values() for stored in group)
        try:
            for stored, why in skipped:
                log.warning(
                    "not answering message %s from before the restart: %s",
                    stored.message.message_id,
                    why,
                )
                await self._inbound.mark(stored.id, "skipped", why)
            for name, group in answer.items():
                if not await self._channels[name].status.wait_connected(channel_timeout_s):
                    log.warning("%s is not connected yet; replayed replies may wait", name)
                for stored in group:
                    log.info(
                        "answering message %s left unanswered before the restart",
                        stored.message.message_id,
                    )
                    self._dispatch(Job(stored.id, stored.message, replayed=True))
                self._gather.replayed(name)
        finally:
            self._gather.replayed()

    async def drain(self) -> None:
        """Wait until every accepted message has been handled."""
        while self._tasks or self._runner.busy() or self._gather.holding():
            await self._gather.settled()
            await self._runner.idle()
            if self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def shutdown(self, grace_s: float) -> None:
        """Refuse new messages; let running turns finish within ``grace_s``, then interrupt them."""
        self._closing = True
        self._gather.close()  # held messages stay pending: answered after the next start
        await asyncio.gather(self._runner.shutdown(grace_s), self._finish_tasks(grace_s))

    async def _finish_tasks(self, grace_s: float) -> None:
        """Short replies in progress (notes, pairing codes) get the same grace as turns."""
        if self._tasks:
            _, late = await asyncio.wait(list(self._tasks), timeout=grace_s)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=CANCEL_WAIT_S)

    def _dispatch(self, job: Job) -> None:
        # A part of a paste is text, never a command: a message that fills half the
        # platform's limit, or one that comes while the sender's paste is held.
        part = self._gather.may_continue(job.message) or self._gather.continues(job.message)
        command = None if part else parse_command(job.message.text)
        if command is None:
            self._gather.add(job)  # held a moment when it may be one part of a split paste
        else:
            self._spawn(self._command(job, *command))

    async def _command(self, job: Job, name: str, args: str) -> None:
        text = await self._commands.answer(job.message, name, args)
        channel = self._channels[job.message.channel]
        await sent_unless_cut(asyncio.ensure_future(self._finish([job], channel, text)))

    async def _turn(self, jobs: list[Job]) -> None:
        if jobs[0].scheduled is not None:
            await self._scheduled_turn(jobs[0].message, jobs[0].scheduled)
            return
        while True:
            try:
                await self._chat_turn(jobs)
                return
            except Exception as exc:
                if self._storage is None or not self._storage.failed(exc):
                    raise
            # Nothing was delivered: answer again once writes work, as after a restart
            # (what the failed attempt left in the history is dropped first).
            log.warning("a turn in %s waits: the data folder is full", jobs[-1].message.session)
            await self._storage.writable()
            jobs = [dataclasses.replace(job, replayed=True) for job in jobs]

    async def _chat_turn(self, jobs: list[Job]) -> None:
        message = jobs[-1].message
        channel = self._channels[message.channel]
        sink = channel.text_sink(message) if isinstance(channel, StreamingChannel) else None
        sending: asyncio.Future[bool] | None = None
        try:
            async with channel.typing(message):
                given = await self._take_in(jobs, channel)
                if given.text != message.text:
                    message = dataclasses.replace(message, text=given.text)
                text = given.answer  # set when there is nothing for the model (a voice note)
                answer = None
                if text is None:
                    answer, result = await self._answer(
                        message, jobs[0], sink, given.images, given.untrusted
                    )
                    text = given.reply(answer)
                    if self._footer is not None and result is not None:
                        text = await self._footer.under(text, result.turn_id)
                sending = asyncio.ensure_future(self._finish(jobs, channel, text, sink))
                delivered = await sent_unless_cut(sending)
                voice = self._voice  # the reply said too, when [speech] asks (bot.daemon.voice)
                if delivered and answer is not None and voice and voice.wanted(given.spoken):
                    await voice.say(channel, message, answer)
        except asyncio.CancelledError as exc:
            if exc.args and exc.args[0] == STOP:
                await asyncio.shield(self._mark_stopped(jobs))
                if sink is not None:  # a progress line shown would go on claiming to run
                    await asyncio.shield(sink.abandon(STOPPED))
            elif sink is not None and not recorded(sending):
                # Stopping before the reply went out: it comes whole after the next start.
                await within(WITHDRAW_S, sink.withdraw(), "taking back a reply's draft")
            raise
        finally:
            if sink is not None:
                sink.close()

    async def _scheduled_turn(self, message: InboundMessage, scheduled: Scheduled) -> None:
        outcome = scheduled.result
        try:
            result = await self._agent.run_turn(
                message,
                channel_context=scheduled.context,
                history_key=scheduled.history,
                origin=scheduled.origin,
            )
        except asyncio.CancelledError:
            outcome.cancel()
            raise
        except Exception as exc:
            if self._storage is not None:
                self._storage.failed(exc)  # counted and told; the scheduler records the run
            if not outcome.done():
                outcome.set_exception(exc)
            return
        if not outcome.done():
            outcome.set_result(result)

    async def _take_in(self, jobs: list[Job], channel: Channel) -> TurnInput:
        """What the model gets from the jobs' messages: pictures and transcripts (fetched
        now, never stored with the inbound message), or just the files' names."""
        # Corrections and quoted replies as the model reads them; a split paste joined back.
        messages = pasted([await self._edits.for_model(job) for job in jobs])
        if self._media is None:
            from bot.media.documents import with_attachments  # a bare router: names only

            given = TurnInput("\n\n".join(with_attachments(m) for m in messages))
        else:
            given = await self._media.prepare(messages, channel.fetch)
        return with_quoted_sources(given, messages)  # someone else's words: the turn is tainted

    async def _answer(
        self,
        message: InboundMessage,
        job: Job,
        sink: ReplySink | None,
        images: tuple[ImagePart, ...] = (),
        untrusted: tuple[str, ...] = (),
    ) -> tuple[str, TurnResult | None]:
        """The model's answer (or a sentence saying why there is none) and the turn's result."""
        try:
            chosen = await self._models.for_turn(message.session) if self._models else None
            result = await self._agent.run_turn(
                message,
                channel_context=describe_chat(message),
                on_text=sink,
                inbound_id=job.row_id,
                replayed=job.replayed,
                on_progress=sink.status if sink is not None else None,
                images=images,
                taint=Taint(list(untrusted)),  # documents read: the turn starts tainted
                provider=chosen.provider if chosen else None,
                settings=chosen.settings if chosen else None,
            )
        except UserError as exc:
            log.warning("turn in %s failed: %s", message.session, exc)
            return f"Sorry, I could not answer: {exc}", None
        except Exception as exc:
            if self._storage is not None and full_reason(exc) is not None:
                raise  # not a bug: the turn is tried again once there is space
            return bug_message(log_bug(log, f"turn in {message.session} crashed", exc)), None
        return result.text or "(the model sent an empty reply)", result

    async def _finish(
        self, jobs: list[Job], channel: Channel, text: str, sink: ReplySink | None = None
    ) -> bool:
        """Deliver the reply to the last job's message (into its streamed draft, if one is
        shown) and record the outcome of all jobs; whether it was delivered."""
        message = jobs[-1].message
        reply = OutboundMessage.reply(message, text)
        status: InboundStatus
        try:
            await (sink.finish(reply) if sink is not None else channel.send(reply))
        except DeliveryError as exc:
            log.error("reply in %s was not delivered: %s", message.session, exc)
            status, note = "failed", str(exc)
        else:
            status, note = "answered", ""
        for job in jobs:
            await self._mark(job.row_id, status, note)
        return status == "answered"

    async def _mark(self, row_id: int, status: InboundStatus, note: str = "") -> None:
        """Record a message's outcome; while the data folder is full, wait for space (the
        reply went out already: answering again would answer twice)."""
        if self._storage is None:
            await self._inbound.mark(row_id, status, note)
        else:
            await self._storage.persist(lambda: self._inbound.mark(row_id, status, note))

    async def _reply(self, message: InboundMessage, text: str) -> None:
        """A short answer that is not a turn (nothing stored, nothing for the model)."""
        try:
            await self._channels[message.channel].send(OutboundMessage.reply(message, text))
        except DeliveryError as exc:
            log.error("a note to %s was not delivered: %s", message.session, exc)

    async def _mark_stopped(self, jobs: list[Job]) -> None:
        for job in jobs:
            if job.scheduled is not None:
                job.scheduled.result.cancel()
            else:
                await self._inbound.mark(job.row_id, "stopped")

    async def _link(self, message: InboundMessage, known: bool) -> None:
        assert self._linking is not None
        command = parse_command(message.text)
        code = command[1] if command is not None else ""
        try:
            text = await self._linking.handle(message, code, known=known)
        except Exception as exc:
            text = bug_message(log_bug(log, f"/link from {message.session} failed", exc))
        if text is not None:
            await self._reply(message, text)

    async def _offer_pairing(self, message: InboundMessage, reason: str) -> None:
        text = await pairing_offer(self._pairing, message, reason) if self._pairing else ""
        if text:
            await self._reply(message, text)  # the pairing code, like any short note

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log_bug(log, "background reply failed", task.exception())


def _is_link(message: InboundMessage) -> bool:
    command = parse_command(message.text)  # an edit never runs a command (``Edits``)
    return command is not None and command[0] == "link" and message.edit_of is None
