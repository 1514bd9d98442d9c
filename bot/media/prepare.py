"""What a turn gives the model from what people sent: text, pictures, transcripts.

It runs when the turn starts, not when the message arrives: the inbound store
keeps only the attachment records (JSON, for replay after a restart), and the
bytes are fetched from the channel here, then dropped when the turn ends.

- **Pictures** (declared as images, or of unknown type) are downloaded up to
  ``[media] max_image_bytes`` and recognised by their content. A real JPEG, PNG,
  GIF or WebP goes to the model as an ``ImagePart``; the text names it with a
  line like ``[image: photo.jpg, 1280x960]``, which is all later turns see (the
  history keeps text only, so it stays small). A model without vision reads a
  note instead, and the person is told once per chat.
- **Voice notes and audio files** are transcribed; the model reads
  ``[voice message, 0:07] the words`` and the reply quotes the words first. When
  a message is nothing but a recording that could not be heard (no
  ``[transcription]``, a failure), the person gets a sentence saying so and the
  model is not asked at all.
- **Documents** (anything else) are saved in the workspace's inbox and, when they
  are text or a PDF, read: the model gets a line naming each, then its text marked
  as untrusted, and the turn starts tainted (``documents``, ``inbox``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from bot.config import Config
from bot.config.media import MediaConfig
from bot.core.channel import DeliveryError
from bot.core.conversation import BLIND_NOTE, ImagePart
from bot.core.errors import bug_message, log_bug
from bot.core.messages import Attachment, InboundMessage
from bot.media.audio import clock, duration_s, is_audio, is_voice_note, upload_name
from bot.media.images import IMAGE_SUFFIXES, sniff_image
from bot.media.transcribe import Transcriber, TranscriptionError

if TYPE_CHECKING:  # documents are read by code loaded with the first one
    from bot.media.documents import DocumentReader
    from bot.media.inbox import Inbox

log = logging.getLogger(__name__)

Fetch = Callable[[Attachment], Awaitable[bytes]]

NO_TRANSCRIPTION = (
    "I can't listen to voice messages yet: the owner can turn that on with a "
    "[transcription] section in PinClaw's config. Until then, please type your message."
)
BLIND_TOLD = (
    "(The model I use cannot see pictures, so I only know that you sent one. "
    "If it can, the owner can set vision = true in the [provider] section of the config.)"
)
_UNKNOWN_TYPE = "application/octet-stream"
QUOTE_LIMIT = 600  # characters of a transcript quoted in the reply (the model gets all)


@dataclass(frozen=True, slots=True)
class TurnInput:
    """What the model reads, the pictures it sees, and what the person is told first.

    With ``answer`` set there is nothing for the model: the reply is that text.
    """

    text: str
    images: tuple[ImagePart, ...] = ()
    notes: tuple[str, ...] = ()
    answer: str | None = None
    untrusted: tuple[str, ...] = ()
    """Labels of outside content the text holds (a document's text): the turn starts tainted."""
    spoken: bool = False
    """The person spoke (a voice note was transcribed): a reply may be spoken too."""

    def reply(self, answer: str) -> str:
        """The reply as the person sees it: the notes (and quoted transcripts) first."""
        return "\n\n".join([*self.notes, answer]) if self.notes else answer


@dataclass
class _Gathered:
    """What the attachments of one turn turned into, while they are worked through."""

    images: list[ImagePart] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)  # quoted transcripts, for the reply
    notes: list[str] = field(default_factory=list)  # for the person, in the reply
    unheard: int = 0  # recordings (or files) that gave the model nothing to go on
    usable: int = 0  # texts and attachments the model can do something with
    untrusted: list[str] = field(default_factory=list)  # labels of documents read
    spoken: bool = False  # a recording was transcribed: the reply may be spoken too

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def media_intake(
    config: Config, client: httpx.AsyncClient, inbox: Callable[[], Inbox] | None = None
) -> MediaIntake:
    """The intake for a config: the main model's vision, ``[media]``, ``[transcription]``,
    and where documents are saved."""
    settings = config.transcription
    transcriber = Transcriber(settings, client) if settings.configured else None
    vision = config.provider.sees_images
    return MediaIntake(config.media, vision=vision, transcriber=transcriber, inbox=inbox)


class MediaIntake:
    """Prepares each turn's input from the messages it answers (see the module docstring)."""

    def __init__(
        self,
        config: MediaConfig,
        *,
        vision: bool,
        transcriber: Transcriber | None,
        inbox: Callable[[], Inbox] | None = None,
    ) -> None:
        self._config = config
        self._vision = vision
        self._transcriber = transcriber
        self._inbox = inbox  # makes the inbox, with the first document
        self._reader: DocumentReader | None = None  # made for the first document
        self._told_blind: set[str] = set()

    async def prepare(self, messages: Sequence[InboundMessage], fetch: Fetch) -> TurnInput:
        """The input for a turn answering ``messages`` (of one chat), fetching through ``fetch``."""
        got = _Gathered()
        if any(message.attachments for message in messages):
            from bot.media.documents import FetchedOnce

            fetch = FetchedOnce(fetch)  # a file looked at twice is downloaded once
        parts: list[str] = []
        for message in messages:
            lines = [] if _says_nothing(message) else [message.text]
            got.usable += bool(lines)
            for attachment in message.attachments:
                lines.append(await self._attachment(attachment, message, fetch, got))
            parts.append("\n".join(lines))
        text = "\n\n".join(p for p in parts if p)
        if got.unheard and not got.usable:
            return TurnInput(text, answer="\n\n".join(got.notes))
        notes, untrusted = (*got.heard, *got.notes), tuple(got.untrusted)
        return TurnInput(text, tuple(got.images), notes, untrusted=untrusted, spoken=got.spoken)

    async def _attachment(
        self, attachment: Attachment, message: InboundMessage, fetch: Fetch, got: _Gathered
    ) -> str:
        from bot.media.documents import declared_kind  # loaded with the first file

        try:
            if is_audio(attachment):
                return await self._recording(attachment, message, fetch, got)
            line = None
            if _maybe_picture(attachment) and declared_kind(attachment) is None:
                line = await self._picture(attachment, message, fetch, got)
            if line is None:  # a document, or a file of no declared type that is no picture
                document = await self._documents().take(attachment, message, fetch)
                line = document.line
                if document.untrusted:
                    got.untrusted.append(document.untrusted)
        except Exception as exc:
            error_id = log_bug(
                log, f"could not prepare {attachment.name} in {message.session}", exc
            )
            return self._unheard(got, bug_message(error_id), f"[{attachment.name}: unreadable]")
        got.usable += 1
        return line

    async def _picture(
        self, attachment: Attachment, message: InboundMessage, fetch: Fetch, got: _Gathered
    ) -> str | None:
        """The line for a picture; None when a file of no declared type is not one."""
        name, declared = attachment.name, _declares_picture(attachment)
        if not self._vision:
            if not declared:
                return None
            if str(message.session) not in self._told_blind:
                self._told_blind.add(str(message.session))
                got.note(BLIND_TOLD)
            return f"{BLIND_NOTE} ({name})"
        limit = self._config.max_image_bytes
        if attachment.size > limit:
            return self._too_big(attachment, attachment.size, got) if declared else None
        if len(got.images) >= self._config.max_images:
            got.note(f"(I looked at the first {self._config.max_images} pictures only.)")
            return f"[image: {name}, not shown: at most {self._config.max_images} per message]"
        try:
            data = await fetch(attachment)
        except DeliveryError as exc:
            log.warning("could not download %s in %s: %s", name, message.session, exc)
            got.note(
                f"(I could not download {name} from {_platform(message)}, so I did not see it.)"
            )
            return f"[image: {name}, could not be downloaded]"
        if len(data) > limit:
            return self._too_big(attachment, len(data), got) if declared else None
        picture = sniff_image(data)
        if picture is None:
            if not declared:
                return None
            line = _file_line(attachment)
            return f"{line} (not shown: its content is not a JPEG, PNG, GIF or WebP picture)"
        label = ", ".join(p for p in (name, picture.size_text) if p)
        got.images.append(ImagePart(picture.mime_type, data, label))
        return f"[image: {label}]"

    def _too_big(self, attachment: Attachment, size: int, got: _Gathered) -> str:
        name, size_text = attachment.name, _megabytes(size)
        limit = _megabytes(self._config.max_image_bytes)
        got.note(f"({name} is {size_text}, more than the {limit} I look at, so I did not see it.)")
        return f"[image: {name}, not shown: {size_text}, over the {limit} limit]"

    async def _recording(
        self, attachment: Attachment, message: InboundMessage, fetch: Fetch, got: _Gathered
    ) -> str:
        kind = "voice message" if is_voice_note(attachment) else f"audio file {attachment.name}"
        transcriber = self._transcriber
        if transcriber is None:
            return self._unheard(got, NO_TRANSCRIPTION, f"[{kind}: not transcribed]")
        too_long = f"[{kind}: too long]"
        if attachment.size > transcriber.max_bytes:
            return self._unheard(got, _too_long(attachment.size, transcriber), too_long)
        try:
            data = await fetch(attachment)
        except DeliveryError as exc:
            log.warning("could not download %s in %s: %s", attachment.name, message.session, exc)
            sentence = (
                f"Sorry, I could not download your {kind} from {_platform(message)}. "
                "Please try again."
            )
            return self._unheard(got, sentence, f"[{kind}: could not be downloaded]")
        if len(data) > transcriber.max_bytes:
            return self._unheard(got, _too_long(len(data), transcriber), too_long)
        try:
            heard = await transcriber.transcribe(
                data, upload_name(attachment), attachment.mime_type
            )
        except TranscriptionError as exc:
            log.warning("could not transcribe %s in %s: %s", attachment.name, message.session, exc)
            sentence = (
                f"Sorry, I couldn't understand your {kind}: {exc.person}. "
                "Please try again later, or type your message."
            )
            return self._unheard(got, sentence, f"[{kind}: could not be transcribed]")
        if not heard.text:
            sentence = (
                f"I couldn't make out any words in your {kind}. Please try again, or type it."
            )
            return self._unheard(got, sentence, f"[{kind}: no words could be made out]")
        got.usable += 1
        got.spoken = True
        got.heard.append(quoted(heard.text))
        seconds = heard.duration_s if heard.duration_s is not None else duration_s(data)
        length = f", {clock(seconds)}" if seconds is not None else ""
        return f"[{kind}{length}] {heard.text}"

    def _documents(self) -> DocumentReader:
        """The document reader, made (and its code loaded) for the first document."""
        if self._reader is None:
            from bot.media.documents import DocumentReader

            inbox = self._inbox() if self._inbox is not None else None
            self._reader = DocumentReader(self._config, inbox)
        return self._reader

    @staticmethod
    def _unheard(got: _Gathered, sentence: str, line: str) -> str:
        got.unheard += 1
        got.note(sentence)
        return line


def quoted(transcript: str, limit: int = QUOTE_LIMIT) -> str:
    """A transcript as the reply quotes it: ``> 🎤 words``, cut after ``limit`` characters."""
    text = transcript if len(transcript) <= limit else transcript[:limit].rstrip() + " …"
    lines = [line for line in text.splitlines() if line.strip()] or [text]
    return "\n".join(f"> 🎤 {line}" if i == 0 else f"> {line}" for i, line in enumerate(lines))


def _too_long(size: int, transcriber: Transcriber) -> str:
    return (
        f"That recording is too long for me ({_megabytes(size)}; I can transcribe up to "
        f"{_megabytes(transcriber.max_bytes)}). Please send a shorter one, or type it."
    )


def _says_nothing(message: InboundMessage) -> bool:
    """No words of the sender's own: empty, or Slack's stand-in "(shared NAME)"."""
    text = message.text.strip()
    if not text:
        return True
    names = ", ".join(a.name for a in message.attachments)
    return bool(message.attachments) and text == f"(shared {names})"


def _declares_picture(attachment: Attachment) -> bool:
    mime = attachment.mime_type.lower()
    return mime.startswith("image/") or attachment.name.lower().endswith(IMAGE_SUFFIXES)


def _maybe_picture(attachment: Attachment) -> bool:
    """Worth downloading to look at: declared a picture, or of no declared type at all."""
    return _declares_picture(attachment) or attachment.mime_type.lower() in ("", _UNKNOWN_TYPE)


def _file_line(attachment: Attachment) -> str:
    from bot.media.documents import size_text

    size = size_text(attachment.size)
    return f"[attached: {attachment.name} ({attachment.mime_type}, {size})]"


def _megabytes(size: int) -> str:
    """A size as people read it: ``640 KB``, ``12.5 MB``."""
    if size < 1024 * 1024:
        return f"{max(size, 1) / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _platform(message: InboundMessage) -> str:
    return message.channel.capitalize()
