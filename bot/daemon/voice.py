"""Answers by voice: a chat reply that went out as text is also spoken, when ``[speech]`` says.

``reply_with_voice`` decides when: ``when_spoken_to`` (the turn's input held a
transcribed voice note or audio file), ``always`` or ``never``. The reply's
markdown is made speakable (``bot.media.speech.speakable``), sent to the speech
endpoint and delivered through the channel's ``send_voice`` (Telegram: a voice
message; Discord and Slack: an audio file). The text is always sent first; the
voice comes after it. The speech request and the delivery are each tried once
more; then the voice is given up with one warning in the log, and the person
still has the text. Nothing here ever reaches the chat as an error.
"""

from __future__ import annotations

import logging

import httpx

from bot.config.media import SpeechConfig
from bot.core.channel import Channel, DeliveryError, VoiceChannel
from bot.core.errors import log_bug
from bot.core.messages import InboundMessage, OutboundFile
from bot.media.speech import Speech, SpeechError, speakable

log = logging.getLogger(__name__)


def voice_replies(config: SpeechConfig, client: httpx.AsyncClient) -> VoiceReplies | None:
    """The voice replies for ``[speech]``, or None while it is off (no ``base_url``)."""
    if not config.configured or config.reply_with_voice == "never":
        return None
    return VoiceReplies(config, Speech(config, client))


class VoiceReplies:
    """Speaks chat replies where ``reply_with_voice`` asks for it (see the module docstring)."""

    def __init__(self, config: SpeechConfig, speech: Speech) -> None:
        self._config = config
        self._speech = speech
        self._silent: set[str] = set()  # channels already logged as having no voice

    def wanted(self, spoken: bool) -> bool:
        """Whether a reply is spoken, given whether the person spoke (a transcribed recording)."""
        mode = self._config.reply_with_voice
        return mode == "always" or (mode == "when_spoken_to" and spoken)

    async def say(self, channel: Channel, message: InboundMessage, answer: str) -> None:
        """Speak ``answer`` as a reply to ``message``; failures are logged, never raised."""
        try:
            await self._say(channel, message, answer)
        except Exception as exc:
            log_bug(log, f"the voice reply in {message.session} failed", exc)

    async def _say(self, channel: Channel, message: InboundMessage, answer: str) -> None:
        if not isinstance(channel, VoiceChannel):
            if message.channel not in self._silent:
                self._silent.add(message.channel)
                log.info("replies on %s are not spoken: it cannot take voice", message.channel)
            return
        words = speakable(answer)
        if not words:
            log.info("the reply in %s is not spoken: nothing in it to say", message.session)
            return
        if len(words) > self._config.max_chars:
            log.info(
                "the reply in %s is not spoken: %d characters, over [speech] max_chars (%d)",
                message.session,
                len(words),
                self._config.max_chars,
            )
            return
        try:
            recording = await self._speech.say(words)
        except SpeechError as exc:
            log.warning("the reply in %s was sent as text only: %s", message.session, exc)
            return
        file = OutboundFile(
            message.channel,
            message.chat_id,
            recording.name,
            recording.data,
            recording.mime_type,
            thread_id=message.thread_id,
            reply_to=message.message_id,
        )
        try:
            await channel.send_voice(file)
        except DeliveryError as exc:
            log.info(
                "the voice reply in %s was not delivered (%s); once more", message.session, exc
            )
        else:
            return
        try:
            await channel.send_voice(file)
        except DeliveryError as exc:
            log.warning(
                "the reply in %s was sent as text only: the voice was not delivered, twice: %s",
                message.session,
                exc,
            )
