"""Voice notes and audio files: which attachments they are, and how long they play.

Whether an attachment is audio is decided before it is downloaded (from its
declared type or name), since a message that is only a voice note may be
answered without downloading anything. The length is read from Ogg pages (the
voice notes of Telegram and Discord are Ogg Opus) or a WAV header; other
formats simply have no length shown.
"""

from __future__ import annotations

from bot.core.messages import Attachment

AUDIO_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".mpga", ".m4a", ".wav", ".flac", ".aac")

# The file name suffix transcription servers use to tell the format, by declared type.
_SUFFIX_FOR_TYPE = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/mp4": ".m4a",
    "audio/x-m4a": ".m4a",
    "audio/m4a": ".m4a",
    "audio/aac": ".m4a",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/webm": ".webm",
    "audio/flac": ".flac",
    "audio/x-flac": ".flac",
}
_KNOWN_SUFFIXES = {*AUDIO_SUFFIXES, ".webm", ".mp4", ".mpeg"}


def is_audio(attachment: Attachment) -> bool:
    """A voice note or audio file, going by its declared type or its name."""
    mime = attachment.mime_type.lower().split(";")[0].strip()
    return mime.startswith("audio/") or attachment.name.lower().endswith(AUDIO_SUFFIXES)


def is_voice_note(attachment: Attachment) -> bool:
    """A recorded voice message (Telegram's voice.ogg, Discord's voice-message.ogg)."""
    return attachment.name.lower().startswith("voice")


def upload_name(attachment: Attachment) -> str:
    """The file name to upload under: servers read the format from its suffix."""
    name = attachment.name or "audio"
    if any(name.lower().endswith(suffix) for suffix in _KNOWN_SUFFIXES):
        return name
    mime = attachment.mime_type.lower().split(";")[0].strip()
    return name + _SUFFIX_FOR_TYPE.get(mime, ".ogg")


def duration_s(data: bytes) -> float | None:
    """How many seconds the recording plays, when its format says (Ogg, WAV)."""
    if data.startswith(b"OggS"):
        return _ogg_duration(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return _wav_duration(data)
    return None


def clock(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def _ogg_duration(data: bytes) -> float | None:
    """The last page's granule position over the codec's rate (Opus: 48 kHz minus pre-skip)."""
    if len(data) < 27:
        return None
    first = 27 + data[26]
    packet = data[first : first + 19]
    if packet.startswith(b"OpusHead") and len(packet) >= 12:
        rate, skip = 48_000, int.from_bytes(packet[10:12], "little")
    elif packet.startswith(b"\x01vorbis") and len(packet) >= 16:
        rate, skip = int.from_bytes(packet[12:16], "little"), 0
    else:
        return None
    end = len(data)
    while (page := data.rfind(b"OggS", 0, end)) > 0:
        if len(data) >= page + 14 and data[page + 4] == 0:
            granule = int.from_bytes(data[page + 6 : page + 14], "little", signed=True)
            if granule >= 0 and rate:
                return max(granule - skip, 0) / rate
        end = page
    return None


def _wav_duration(data: bytes) -> float | None:
    index, byte_rate = 12, 0
    while index + 8 <= len(data):
        chunk, size = data[index : index + 4], int.from_bytes(data[index + 4 : index + 8], "little")
        if chunk == b"fmt " and index + 20 <= len(data):
            byte_rate = int.from_bytes(data[index + 16 : index + 20], "little")
        elif chunk == b"data":
            return size / byte_rate if byte_rate else None
        index += 8 + size + (size & 1)
    return None
