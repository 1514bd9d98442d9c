"""``[media]`` (pictures and documents people send), ``[transcription]`` (voice messages),
``[speech]`` (answers by voice), and which models can see pictures."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from bot.config.base import Section, check_url, empty_is_none

MIB = 1024 * 1024


class MediaConfig(Section):
    """Pictures and documents people send in chats: how large they may be, how much of them
    the model sees, and where documents are saved."""

    max_image_bytes: int = Field(
        default=10 * MIB,
        ge=1024,
        description=(
            "The largest picture downloaded, in bytes; a larger one is not downloaded and "
            "the person is told."
        ),
    )
    max_images: int = Field(
        default=4,
        ge=1,
        le=20,
        description=(
            "The most pictures of one message shown to the model; the person is told that "
            "only the first ones were looked at."
        ),
    )
    max_document_bytes: int = Field(
        default=20 * MIB,
        ge=1024,
        description=(
            "The largest document downloaded, in bytes; for a larger one the model is told "
            "its size instead. Telegram lets bots download at most 20 MB whatever this says."
        ),
    )
    document_text_bytes: int = Field(
        default=40 * 1024,
        ge=1024,
        description=(
            "How much of a document's text the model reads, in bytes; the rest is left out "
            "and the model is told so. The whole file stays in the inbox for its file tools."
        ),
    )
    inbox_dir: str = Field(
        default="inbox",
        description=(
            "The folder documents are saved in, relative to the workspace (an absolute path "
            "works too), as `inbox/2026-11-28-list.txt`; nothing there is overwritten."
        ),
    )


class AudioEndpoint(Section):
    """An OpenAI-compatible audio endpoint: where it is, its key, how long to wait; off
    while ``base_url`` is empty."""

    base_url: str = Field(
        default="",
        description=(
            "The API root of an OpenAI-compatible server, with its `/v1`, like "
            "`https://api.openai.com/v1` or a local server's `http://localhost:8000/v1`. "
            "Empty turns the feature off."
        ),
    )
    api_key: SecretStr | None = Field(
        default=None,
        description=(
            'The server\'s API key, like `"${OPENAI_API_KEY}"`. Not set: no key is sent '
            "(a local server may need none)."
        ),
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds to wait for the server's answer; a timeout is tried once more.",
    )

    _check_url = field_validator("base_url")(check_url)
    _empty_key_is_none = field_validator("api_key", mode="before")(empty_is_none)

    @property
    def configured(self) -> bool:
        """Whether the endpoint is set up."""
        return bool(self.base_url)

    def key(self) -> str:
        """The API key, or "" for a server that needs none."""
        return self.api_key.get_secret_value() if self.api_key else ""


class TranscriptionConfig(AudioEndpoint):
    """Voice messages turned into text by an OpenAI-compatible ``/audio/transcriptions``
    endpoint, then answered like typed text.

    Off while ``base_url`` is empty: voice messages are then answered with a
    sentence saying how to turn transcription on.
    """

    model: str = Field(
        default="whisper-1",
        min_length=1,
        description=(
            "The transcription model as the server names it, like `whisper-1` (OpenAI) or "
            "`whisper-large-v3-turbo` (Groq)."
        ),
    )
    max_audio_bytes: int = Field(
        default=25 * MIB,
        ge=1024,
        description=(
            "The largest recording sent to be transcribed, in bytes (25 MiB is OpenAI's and "
            "Groq's limit); for a larger one the person is asked for a shorter recording."
        ),
    )


class SpeechConfig(AudioEndpoint):
    """Answers spoken aloud by an OpenAI-compatible ``/audio/speech`` endpoint: the text
    reply goes out first, the voice message follows it.

    Off while ``base_url`` is empty.
    """

    model: str = Field(
        default="gpt-4o-mini-tts",
        min_length=1,
        description=(
            "The text-to-speech model as the server names it, like `gpt-4o-mini-tts` or "
            "`tts-1` (OpenAI)."
        ),
    )
    voice: str = Field(
        default="alloy",
        min_length=1,
        description="The voice as the server names it, like `alloy` (OpenAI).",
    )
    reply_with_voice: Literal["when_spoken_to", "always", "never"] = Field(
        default="when_spoken_to",
        description=(
            "When a chat reply is also spoken: `when_spoken_to` (the person sent a voice "
            "note or an audio file, which needs `[transcription]`), `always`, or `never`. "
            "Scheduled jobs, the heartbeat, triggers and chat commands stay text."
        ),
    )
    max_chars: int = Field(
        default=4000,
        ge=100,
        le=100_000,
        description=(
            "Replies longer than this, in characters once markdown and code are taken out, "
            "are sent as text only."
        ),
    )


# Model names (after any "vendor/" prefix, lower case) of models known to take
# pictures. Anything else is taken to be text-only unless ``vision = true``.
_SEEING = re.compile(
    r"^(?:"
    r"gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-4-vision|gpt-5"
    r"|o1(?:-\d|$)|o3(?:-\d|-pro|$)|o4"
    r"|claude-3|claude-(?:opus|sonnet|haiku)-[4-9]|claude-[4-9]"
    r"|gemini-(?!1\.0)|gemma-?3"
    r"|llava|bakllava|llama3\.2-vision|llama-3\.2-\d+b-vision|llama-?4"
    r"|minicpm-v|moondream|pixtral|mistral-small-?3\.[12]|mistral-medium"
    r")"
    r"|vision|-vl\b|\dvl\b|qwen[\d.]*-?vl"
)


def guess_vision(model: str) -> bool:
    """Whether a model of this name is known to see pictures (the ``vision`` default)."""
    name = model.lower().rsplit("/", 1)[-1]
    return _SEEING.search(name) is not None
