"""The parts of pictures-in and voice-in: recognising pictures and recordings by their
bytes, which models see, each wire format's picture (over real HTTP to the fake model),
the transcription client against the fake server, and the intake's notes."""

from __future__ import annotations

import io
import wave
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.agent.history_trim import IMAGE_TOKENS, estimate_tokens
from bot.config import parse_config
from bot.config.media import MediaConfig, TranscriptionConfig, guess_vision
from bot.config.provider import ProviderSpec
from bot.core.channel import DeliveryError
from bot.core.conversation import BLIND_NOTE, ChatMessage, CompletionRequest, ImagePart
from bot.core.messages import Attachment, InboundMessage
from bot.media.audio import clock, duration_s, is_audio, upload_name
from bot.media.images import sniff_image
from bot.media.prepare import NO_TRANSCRIPTION, MediaIntake, quoted
from bot.media.transcribe import Transcriber, TranscriptionError
from bot.providers import build_provider
from tests.fake_llm import FakeLLM, Say
from tests.fake_transcription import FakeTranscription, Heard, Hold, Refuse
from tests.media_samples import decoded, jpeg, ogg_opus, png
from tests.provider_cases import Naps, closed_port, ignore

# -- pictures by their bytes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "mime", "size"),
    [
        (png(640, 480), "image/png", (640, 480)),
        (jpeg(1280, 960), "image/jpeg", (1280, 960)),
        (b"GIF89a" + bytes([0x40, 0x01, 0xF0, 0x00]) + bytes(20), "image/gif", (320, 240)),
    ],
)
def test_pictures_are_known_by_their_bytes_with_their_size(
    data: bytes, mime: str, size: tuple[int, int]
) -> None:
    picture = sniff_image(data)
    assert picture is not None
    assert (picture.mime_type, (picture.width, picture.height)) == (mime, size)


@pytest.mark.parametrize(
    ("fmt", "options", "mime"),
    [
        ("JPEG", {}, "image/jpeg"),
        ("JPEG", {"progressive": True, "quality": 70}, "image/jpeg"),
        ("PNG", {}, "image/png"),
        ("GIF", {}, "image/gif"),
        ("WEBP", {}, "image/webp"),
        ("WEBP", {"lossless": True}, "image/webp"),
        ("WEBP", {"exif": b"Exif\x00\x00MM"}, "image/webp"),  # extended (VP8X)
    ],
)
def test_pictures_a_real_encoder_wrote_are_read_right(
    fmt: str, options: dict[str, Any], mime: str
) -> None:
    image_module = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image_module.new("RGB", (321, 123), "teal").save(buffer, fmt, **options)
    picture = sniff_image(buffer.getvalue())
    assert picture is not None
    assert (picture.mime_type, picture.width, picture.height) == (mime, 321, 123)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello, I am text pretending to be photo.jpg",
        b"%PDF-1.7\n",
        b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00",  # an iPhone HEIC: no API takes it
        b"<svg xmlns='http://www.w3.org/2000/svg'/>",
        b"RIFF\x10\x00\x00\x00WAVEfmt ",
    ],
)
def test_anything_else_is_not_a_picture(data: bytes) -> None:
    assert sniff_image(data) is None


def test_a_picture_counts_towards_the_history_budget() -> None:
    plain = ChatMessage("user", "look")
    seeing = ChatMessage("user", "look", images=(ImagePart("image/png", png(2, 2)),))
    assert estimate_tokens(seeing) - estimate_tokens(plain) == IMAGE_TOKENS


def test_a_cut_off_header_still_tells_the_type_without_a_size() -> None:
    picture = sniff_image(b"\xff\xd8\xff\xe0\x00\x10JFIF")
    assert picture is not None
    assert (picture.mime_type, picture.size_text) == ("image/jpeg", "")


# -- recordings ------------------------------------------------------------------------------


def test_recordings_say_how_long_they_play() -> None:
    assert duration_s(ogg_opus(7.2)) == pytest.approx(7.2, abs=0.01)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(bytes(2 * 24_000))
    assert duration_s(buffer.getvalue()) == pytest.approx(1.5)
    assert duration_s(b"ID3\x04\x00" + bytes(100)) is None  # MP3: no length shown
    assert [clock(7.2), clock(754), clock(3723)] == ["0:07", "12:34", "1:02:03"]


def test_audio_is_recognised_by_type_or_name_and_uploaded_under_a_name_servers_read() -> None:
    voice = Attachment("voice.ogg", "audio/ogg", 100, "id")
    nameless = Attachment("audio", "audio/mpeg", 100, "id")
    assert is_audio(voice) and is_audio(nameless)
    assert is_audio(Attachment("memo.m4a", "application/octet-stream", 1, "x"))
    assert not is_audio(Attachment("clip.mp4", "video/mp4", 1, "x"))
    assert [upload_name(voice), upload_name(nameless)] == ["voice.ogg", "audio.mp3"]


def test_a_long_transcript_is_quoted_short_and_line_by_line() -> None:
    assert quoted("hello\nthere") == "> 🎤 hello\n> there"
    long = quoted("word " * 400)
    assert long.startswith("> 🎤 word") and long.endswith(" …") and len(long) < 620


# -- which models see ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o-mini",
        "gpt-4.1-nano",
        "gpt-5",
        "o4-mini",
        "claude-3-5-haiku-latest",
        "claude-sonnet-4-5",
        "gemini-2.5-flash",
        "models/gemini-2.0-flash",
        "llava:13b",
        "llama3.2-vision",
        "qwen2.5vl:7b",
        "Qwen/Qwen2.5-VL-72B-Instruct",
        "gemma3:4b",
        "minicpm-v",
        "meta-llama/llama-4-scout-17b-16e-instruct",
    ],
)
def test_models_known_to_see(model: str) -> None:
    assert guess_vision(model)


@pytest.mark.parametrize(
    "model", ["gpt-4", "gpt-3.5-turbo", "o3-mini", "claude-2.1", "llama3.1:8b", "qwen2.5:7b", "m"]
)
def test_models_taken_to_be_text_only(model: str) -> None:
    assert not guess_vision(model)


def test_the_config_can_say_either_way() -> None:
    def spec(**extra: Any) -> ProviderSpec:
        raw = {"provider": {"kind": "ollama", "model": "my-finetune", **extra}}
        return parse_config(raw, {}).provider

    assert not spec().sees_images
    assert spec(vision=True).sees_images
    assert not parse_config(
        {"provider": {"kind": "ollama", "model": "llava", "vision": False}}, {}
    ).provider.sees_images


# -- each wire format's picture --------------------------------------------------------------

PHOTO = png(64, 48)


def spec_for(llm: FakeLLM, kind: str, vision: bool) -> ProviderSpec:
    base = f"{llm.url}/v1" if kind == "openai" else llm.url
    return ProviderSpec(
        kind=kind,  # type: ignore[arg-type]
        model="some-model",
        base_url=base,
        api_key=SecretStr("k"),
        max_retries=0,
        vision=vision,
    )


def pictures_in(kind: str, body: dict[str, Any]) -> tuple[list[bytes], list[str]]:
    """The pictures (decoded) and texts of the last user message, read the wire's way."""
    if kind == "openai":
        content = body["messages"][-1]["content"]
        if isinstance(content, str):
            return [], [content]
        prefix = "data:image/png;base64,"
        urls = [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
        assert all(url.startswith(prefix) for url in urls)
        texts = [p["text"] for p in content if p["type"] == "text"]
        return [decoded(url.removeprefix(prefix)) for url in urls], texts
    if kind == "anthropic":
        blocks = body["messages"][-1]["content"]
        images = [b["source"] for b in blocks if b["type"] == "image"]
        assert all(s == {**s, "type": "base64", "media_type": "image/png"} for s in images)
        texts = [b["text"] for b in blocks if b["type"] == "text"]
        return [decoded(s["data"]) for s in images], texts
    if kind == "gemini":
        parts = body["contents"][-1]["parts"]
        inline = [p["inlineData"] for p in parts if "inlineData" in p]
        assert all(i["mimeType"] == "image/png" for i in inline)
        return [decoded(i["data"]) for i in inline], [p["text"] for p in parts if "text" in p]
    message = body["messages"][-1]
    return [decoded(i) for i in message.get("images", [])], [message["content"]]


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini", "ollama"])
@pytest.mark.parametrize("stream", [False, True])
async def test_each_wire_carries_the_exact_picture(
    llm: FakeLLM, http_client: httpx.AsyncClient, kind: str, stream: bool
) -> None:
    llm.queue(Say("A tiny picture."))
    provider = build_provider(spec_for(llm, kind, vision=True), http_client)
    image = ImagePart("image/png", PHOTO, "p.png, 64x48")
    message = ChatMessage("user", "what is it?\n[image: p.png, 64x48]", images=(image,))
    completion = await provider.complete(
        CompletionRequest("You are PinClaw.", (message,)), ignore if stream else None
    )
    assert completion.text == "A tiny picture."
    (request,) = llm.requests
    assert request.wire == kind
    assert pictures_in(kind, request.body) == ([PHOTO], ["what is it?\n[image: p.png, 64x48]"])


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini", "ollama"])
async def test_a_model_without_vision_reads_a_note_instead(
    llm: FakeLLM, http_client: httpx.AsyncClient, kind: str
) -> None:
    provider = build_provider(spec_for(llm, kind, vision=False), http_client)
    image = ImagePart("image/png", PHOTO, "p.png")
    message = ChatMessage("user", "what is it?", images=(image,))
    await provider.complete(CompletionRequest("You are PinClaw.", (message,)))
    assert pictures_in(kind, llm.requests[-1].body) == ([], [f"what is it?\n{BLIND_NOTE}"])


# -- the transcription client ----------------------------------------------------------------


def transcriber(
    server: FakeTranscription | str, client: httpx.AsyncClient, **extra: Any
) -> tuple[Transcriber, Naps]:
    base = server.base_url if isinstance(server, FakeTranscription) else server
    naps = Naps()
    config = TranscriptionConfig.model_validate({"base_url": base, **extra})
    return Transcriber(config, client, sleep=naps), naps


async def test_a_recording_is_uploaded_with_the_model_and_the_text_comes_back(
    http_client: httpx.AsyncClient,
) -> None:
    with FakeTranscription.running() as server:
        server.queue(Heard("  turn it off  ", duration=3.5))
        client, naps = transcriber(server, http_client, model="whisper-1")
        heard = await client.transcribe(b"OggS-bytes", "voice.ogg", "audio/ogg")
    assert (heard.text, heard.duration_s) == ("turn it off", 3.5)
    (upload,) = server.uploads
    assert (upload.model, upload.file_name, upload.content_type) == (
        "whisper-1",
        "voice.ogg",
        "audio/ogg",
    )
    assert upload.data == b"OggS-bytes" and upload.authorization == "" and naps.delays == []


@pytest.mark.parametrize("first", [Refuse(503), Hold(1.0)])
async def test_a_5xx_or_a_timeout_is_tried_once_more(
    http_client: httpx.AsyncClient, first: Refuse | Hold
) -> None:
    with FakeTranscription.running() as server:
        server.queue(first, Heard("second time lucky"))
        client, naps = transcriber(server, http_client, timeout_s=0.3)
        heard = await client.transcribe(b"x", "voice.ogg", "audio/ogg")
    assert heard.text == "second time lucky"
    assert len(server.uploads) == 2 and naps.delays == [1.0]


@pytest.mark.parametrize(
    ("answer", "person"),
    [
        (Refuse(401), "the transcription service did not accept PinClaw's API key"),
        (Refuse(400), "the transcription service refused the recording"),
        (Refuse(413), "the recording is too large for the transcription service"),
    ],
)
async def test_a_refusal_is_not_retried_and_is_explained(
    http_client: httpx.AsyncClient, answer: Refuse, person: str
) -> None:
    with FakeTranscription.running() as server:
        server.queue(answer)
        client, naps = transcriber(server, http_client, api_key="sk-t")
        with pytest.raises(TranscriptionError) as caught:
            await client.transcribe(b"x", "voice.ogg", "audio/ogg")
    assert caught.value.person == person
    assert f"HTTP {answer.status}" in str(caught.value) and "injected failure" in str(caught.value)
    assert len(server.uploads) == 1 and server.uploads[0].authorization == "Bearer sk-t"
    assert naps.delays == []


async def test_a_server_that_is_not_there_is_explained(http_client: httpx.AsyncClient) -> None:
    client, _ = transcriber(f"http://127.0.0.1:{closed_port()}/v1", http_client)
    with pytest.raises(TranscriptionError) as caught:
        await client.transcribe(b"x", "voice.ogg", "audio/ogg")
    assert caught.value.person == "the transcription service could not be reached"


async def test_an_unsupported_file_name_is_refused_by_the_server_as_openai_does(
    http_client: httpx.AsyncClient,
) -> None:
    with FakeTranscription.running() as server:
        client, _ = transcriber(server, http_client)
        with pytest.raises(TranscriptionError, match="Invalid file format"):
            await client.transcribe(b"x", "audio", "audio/mpeg")


# -- the intake ------------------------------------------------------------------------------


def inbound(text: str, *attachments: Attachment, chat: str = "c1") -> InboundMessage:
    return InboundMessage("test", chat, "ana", text, attachments=attachments)


class Files:
    """A channel's ``fetch``: bytes by ref; a missing ref fails as a download does."""

    def __init__(self, **files: bytes) -> None:
        self.files = files
        self.fetched: list[str] = []

    async def __call__(self, attachment: Attachment) -> bytes:
        self.fetched.append(attachment.ref)
        if attachment.ref not in self.files:
            raise DeliveryError(f"could not download {attachment.name}: HTTP 404")
        return self.files[attachment.ref]


def picture(name: str, ref: str, size: int = 100, mime: str = "image/png") -> Attachment:
    return Attachment(name, mime, size, ref)


async def test_messages_answered_together_keep_their_order_and_the_picture_cap() -> None:
    intake = MediaIntake(MediaConfig(max_images=1), vision=True, transcriber=None)
    files = Files(a=png(10, 10), b=png(20, 20))
    given = await intake.prepare(
        [inbound("first", picture("a.png", "a")), inbound("second", picture("b.png", "b"))],
        files,
    )
    assert given.text == (
        "first\n[image: a.png, 10x10]\n\nsecond\n[image: b.png, not shown: at most 1 per message]"
    )
    assert [i.data for i in given.images] == [png(10, 10)] and files.fetched == ["a"]
    assert given.notes == ("(I looked at the first 1 pictures only.)",)
    assert given.answer is None


async def test_a_failed_download_is_a_note_and_an_unknown_file_is_looked_at() -> None:
    intake = MediaIntake(MediaConfig(), vision=True, transcriber=None)
    files = Files(blob=jpeg(30, 20), doc=b"%PDF-1.7")
    given = await intake.prepare(
        [
            inbound(
                "see",
                picture("gone.png", "missing"),
                picture("blob", "blob", mime="application/octet-stream"),
                picture("doc.bin", "doc", mime="application/octet-stream"),
                Attachment("r.pdf", "application/pdf", 2048, "pdf"),
            )
        ],
        files,
    )
    assert given.text.splitlines() == [
        "see",
        "[image: gone.png, could not be downloaded]",
        "[image: blob, 30x20]",
        "[document: doc.bin (application/octet-stream, 8 bytes); "
        "not read: it could not be read as a PDF (it may be damaged)]",
        "[document: r.pdf (application/pdf, 2 KB), could not be downloaded from Test]",
    ]
    assert given.notes == ("(I could not download gone.png from Test, so I did not see it.)",)
    assert files.fetched == ["missing", "blob", "doc", "pdf"]  # doc.bin once, for both looks
    assert given.reply("Done.") == f"{given.notes[0]}\n\nDone."


async def test_a_voice_note_with_words_beside_it_still_reaches_the_model() -> None:
    intake = MediaIntake(MediaConfig(), vision=True, transcriber=None)
    voice = Attachment("voice.ogg", "audio/ogg", 10, "v")
    alone = await intake.prepare([inbound("", voice)], Files())
    assert alone.answer == NO_TRANSCRIPTION
    beside = await intake.prepare([inbound("also: lights off", voice)], Files())
    assert beside.answer is None
    assert beside.text == "also: lights off\n[voice message: not transcribed]"
    assert beside.reply("Done.") == f"{NO_TRANSCRIPTION}\n\nDone."
