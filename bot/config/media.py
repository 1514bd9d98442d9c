"""``[media]`` (pictures and documents people send), ``[transcription]`` (voice messages),
``[speech]`` (answers by voice), and which models can see pictures."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from bot.config.base import Section, check_url, empty_is_none

MIB = 1024 * 1024


class MediaConfig(Section):
    """How pictures that people send reach the model.

    A picture larger than ``max_image_bytes`` is not downloaded (the person is
    told); at most ``max_images`` pictures of one turn are shown to the model.
    """

    max_image_bytes: int = Field(default=10 * MIB, ge=1024)
    max_images: int = Field(default=4, ge=1, le=20)
    max_document_bytes: int = Field(default=20 * MIB, ge=1024)
    """Documents larger than this are not downloaded (the model is told their size)."""
    document_text_bytes: int = Field(default=40 * 1024, ge=1024)
    """How much of a document's text the model reads; the rest is left out, and it is told so."""
    inbox_dir: str = "inbox"
    """Where documents people send are saved, relative to the workspace."""


class AudioEndpoint(Section):
    """An OpenAI-compatible audio endpoint: where it is, its key, how long to wait; off
    while ``base_url`` is empty."""

    base_url: str = ""
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=60.0, gt=0)

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
    """An OpenAI-compatible ``/audio/transcriptions`` endpoint for voice messages.

    Off while ``base_url`` is empty: voice messages are then answered with a
    sentence saying how to turn transcription on.
    """

    model: str = Field(default="whisper-1", min_length=1)
    max_audio_bytes: int = Field(default=25 * MIB, ge=1024)


class SpeechConfig(AudioEndpoint):
    """An OpenAI-compatible ``/audio/speech`` endpoint for answers by voice.

    Off while ``base_url`` is empty. ``reply_with_voice`` says when a reply is also
    spoken: ``when_spoken_to`` (the person sent a voice note), ``always`` or ``never``.
    """

    model: str = Field(default="gpt-4o-mini-tts", min_length=1)
    voice: str = Field(default="alloy", min_length=1)
    reply_with_voice: Literal["when_spoken_to", "always", "never"] = "when_spoken_to"
    max_chars: int = Field(default=4000, ge=100, le=100_000)
    """Replies longer than this are sent as text only."""


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
