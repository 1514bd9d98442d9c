"""The Gemini provider against the fake generateContent API over real HTTP (``Raw``
replies where a test needs a body no well-behaved server would send)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.config.provider import ProviderSpec
from bot.core.conversation import ChatMessage, CompletionRequest, ToolCall
from bot.core.errors import (
    ProviderAuthError,
    ProviderResponseError,
    ProviderUnreachable,
)
from bot.providers import build_provider
from bot.providers.gemini import GENERATED_ID_PREFIX, REPLAY_SIGNATURE, GeminiProvider
from bot.providers.http import ProviderHttp
from bot.providers.schema import clean_schema
from tests.fake_llm import CallTools, Fail, FakeLLM, Raw, Say
from tests.fake_llm.gemini_wire import GeminiWire
from tests.provider_cases import CALCULATOR, CLOCK, Naps, ignore

KEY = "gemini-test-key"


def make_spec(base_url: str, model: str = "gemini-test", **extra: Any) -> ProviderSpec:
    """A Gemini spec pointing at ``base_url``."""
    return ProviderSpec(
        kind="gemini", model=model, base_url=base_url, api_key=SecretStr(KEY), **extra
    )


def ask(text: str = "What is 2+2?", system: str = "You are PinClaw.") -> CompletionRequest:
    """A one-message request offering both tools."""
    return CompletionRequest(
        system=system, messages=(ChatMessage("user", text),), tools=(CALCULATOR, CLOCK)
    )


def provider_for(llm: FakeLLM, client: httpx.AsyncClient, **extra: Any) -> GeminiProvider:
    """A provider built through the factory, as the app builds it."""
    provider = build_provider(make_spec(llm.url, **extra), client)
    assert isinstance(provider, GeminiProvider)
    return provider


@pytest.fixture
def gemini3() -> Iterator[FakeLLM]:
    """A fake speaking only Gemini, the way Gemini 3 models answer (call ids, signatures)."""
    server = FakeLLM(wires=[GeminiWire(gemini3=True)])
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_text_reply(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Say("Four, as always."))
    completion = await provider_for(llm, http_client).complete(ask())
    assert completion.text == "Four, as always."
    assert completion.tool_calls == ()
    assert completion.stop_reason == "end_turn"
    assert completion.provider == "gemini:gemini-test"
    (record,) = llm.requests
    assert record.path == "/v1beta/models/gemini-test:generateContent"
    assert completion.usage.input_tokens == record.size // 4
    assert completion.usage.output_tokens > 0


async def test_streamed_text_arrives_in_pieces(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Say("Streaming works in several pieces."))
    pieces: list[str] = []
    completion = await provider_for(llm, http_client).complete(ask(), on_text=pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == completion.text == "Streaming works in several pieces."
    (record,) = llm.requests
    assert record.path == "/v1beta/models/gemini-test:streamGenerateContent"
    assert record.view.stream
    assert completion.usage.input_tokens == record.size // 4
    assert completion.usage.output_tokens > 0
    assert completion.stop_reason == "end_turn"


@pytest.mark.parametrize("streaming", [False, True])
async def test_two_tool_calls(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(CallTools([("calculator", {"expression": "2+2"}), ("clock", {})], text="Checking."))
    pieces: list[str] = []
    on_text = pieces.append if streaming else None
    completion = await provider_for(llm, http_client).complete(ask(), on_text=on_text)
    assert completion.text == "Checking."
    assert completion.stop_reason == "tool_use"  # Gemini itself says STOP
    first, second = completion.tool_calls
    assert (first.name, dict(first.arguments), first.error) == (
        "calculator",
        {"expression": "2+2"},
        None,
    )
    assert (second.name, dict(second.arguments), second.error) == ("clock", {}, None)
    assert first.id.startswith(GENERATED_ID_PREFIX) and first.id != second.id
    assert "".join(pieces) == ("Checking." if streaming else "")


@pytest.mark.parametrize("streaming", [False, True])
async def test_unreadable_tool_arguments_become_a_call_error(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(CallTools([("calculator", '{"expression": "2+')]))
    on_text = ignore if streaming else None
    completion = await provider_for(llm, http_client).complete(ask(), on_text=on_text)
    (call,) = completion.tool_calls
    assert call.arguments == {}
    assert call.error is not None and "not valid JSON" in call.error


async def test_request_body_and_headers(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    provider = provider_for(llm, http_client, temperature=0.3, headers={"x-team": "pinclaw"})
    await provider.complete(ask())
    (record,) = llm.requests
    assert record.headers["x-goog-api-key"] == KEY
    assert record.headers["x-team"] == "pinclaw"
    assert record.body == {
        "systemInstruction": {"parts": [{"text": "You are PinClaw."}]},
        "contents": [{"role": "user", "parts": [{"text": "What is 2+2?"}]}],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "calculator",
                        "description": CALCULATOR.description,
                        "parameters": clean_schema(CALCULATOR.parameters, "gemini"),
                    },
                    # A tool without arguments is declared without parameters.
                    {"name": "clock", "description": CLOCK.description},
                ]
            }
        ],
        "generationConfig": {"maxOutputTokens": 4096, "temperature": 0.3},
    }


async def test_empty_system_is_left_out(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    await provider_for(llm, http_client).complete(ask(system=""))
    assert "systemInstruction" not in llm.requests[0].body
    assert llm.requests[0].body["generationConfig"] == {"maxOutputTokens": 4096}


async def test_base_url_ending_in_v1beta_is_not_doubled(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    spec = make_spec(f"{llm.url}/v1beta", model="models/gemini-test")
    await build_provider(spec, http_client).complete(ask())
    assert llm.requests[0].path == "/v1beta/models/gemini-test:generateContent"


async def test_tool_round_trip_merges_contents(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    generated = f"{GENERATED_ID_PREFIX}abc"
    calls = (ToolCall(generated, "calculator", {"expression": "2+2"}), ToolCall("fc7", "clock"))
    messages = (
        ChatMessage("user", "What is 2+2, and what time is it?"),
        ChatMessage("assistant", "Let me check.", tool_calls=calls),
        ChatMessage("tool", "4", tool_call_id=generated, tool_name="calculator"),
        ChatMessage("tool", "clock unplugged", tool_call_id="fc7", is_error=True),
        ChatMessage("user", "Also, hello."),
    )
    request = CompletionRequest(system="Be brief.", messages=messages, tools=(CALCULATOR, CLOCK))
    completion = await provider_for(llm, http_client).complete(request)
    assert completion.text == "You said: Also, hello."  # the fake accepted the conversation
    contents = llm.requests[0].body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] == [
        {"text": "Let me check."},
        {
            "functionCall": {"name": "calculator", "args": {"expression": "2+2"}},
            "thoughtSignature": REPLAY_SIGNATURE,
        },
        {"functionCall": {"name": "clock", "args": {}, "id": "fc7"}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "calculator", "response": {"result": "4"}}},
        {
            "functionResponse": {
                "name": "clock",
                "response": {"error": "clock unplugged"},
                "id": "fc7",
            }
        },
        {"text": "Also, hello."},
    ]


async def test_call_ids_from_gemini_are_echoed(
    gemini3: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    provider = provider_for(gemini3, http_client)
    gemini3.queue(CallTools([("clock", {})]), Say("It is noon."))
    first = await provider.complete(ask("What time is it?"))
    (call,) = first.tool_calls
    assert not call.id.startswith(GENERATED_ID_PREFIX)
    history = (
        ChatMessage("user", "What time is it?"),
        ChatMessage("assistant", tool_calls=first.tool_calls),
        ChatMessage("tool", "12:00", tool_call_id=call.id, tool_name="clock"),
    )
    second = await provider.complete(CompletionRequest("", history, (CLOCK,)))
    assert second.text == "It is noon."
    model, results = gemini3.requests[1].body["contents"][1:]
    assert model["parts"][0]["functionCall"]["id"] == call.id
    assert results["parts"][0]["functionResponse"]["id"] == call.id


async def test_fake_rejects_missing_function_responses(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    call = {"functionCall": {"name": "clock", "args": {}}}
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "time?"}]},
            {"role": "model", "parts": [call, call]},
            {"role": "user", "parts": [{"functionResponse": {"name": "clock", "response": {}}}]},
        ]
    }
    response = await http_client.post(f"{llm.url}/v1beta/models/m:generateContent", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("status", "message"),
    [(401, "Request had invalid authentication credentials."), (400, "API key not valid.")],
)
async def test_bad_key_is_an_auth_error_without_retries(
    llm: FakeLLM, http_client: httpx.AsyncClient, status: int, message: str
) -> None:
    llm.queue(Fail(status, message))
    with pytest.raises(ProviderAuthError, match="API key"):
        await provider_for(llm, http_client).complete(ask())
    assert len(llm.requests) == 1


async def test_rate_limit_honours_retry_after(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(429, "Resource has been exhausted", retry_after=1), Say("Back again."))
    completion = await provider_for(llm, http_client).complete(ask())
    assert completion.text == "Back again."
    first, second = llm.requests
    assert second.arrived - first.arrived >= 0.9


async def test_unavailable_is_retried_with_backoff(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    naps = Naps()
    spec = make_spec(llm.url)
    provider = GeminiProvider(spec, ProviderHttp(http_client, spec.label, sleep=naps))
    llm.queue(Fail(503, "The model is overloaded."), Say("Made it."))
    completion = await provider.complete(ask(), on_text=ignore)
    assert completion.text == "Made it."
    assert len(naps.delays) == 1 and naps.delays[0] > 0
    assert len(llm.requests) == 2


def streamed(*chunks: Any, cut: bool = False) -> Raw:
    """A 200 ``alt=sse`` stream sent one chunk at a time."""
    events: list[bytes | str] = [f"data: {json.dumps(c)}\r\n\r\n" for c in chunks]
    return Raw(chunks=events, content_type="text/event-stream", cut=cut)


BLOCKED = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {}}
HEL = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}


@pytest.mark.parametrize("streaming", [False, True])
async def test_blocked_prompt_names_the_reason(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(streamed(BLOCKED) if streaming else Raw(body=json.dumps(BLOCKED)))
    on_text = ignore if streaming else None
    with pytest.raises(ProviderResponseError, match="block reason: PROHIBITED_CONTENT"):
        await provider_for(llm, http_client).complete(ask(), on_text=on_text)


@pytest.mark.parametrize(
    ("cut", "message"),
    [(False, "closed mid-answer"), (True, "broke mid-answer .*RemoteProtocolError")],
)
async def test_stream_cut_short_is_unreachable(
    llm: FakeLLM, http_client: httpx.AsyncClient, cut: bool, message: str
) -> None:
    """The body ends (properly or with the connection dropped) before a finish reason."""
    llm.queue(streamed(HEL, cut=cut))
    provider = provider_for(llm, http_client, max_retries=0)
    with pytest.raises(ProviderUnreachable, match=message):
        await provider.complete(ask(), on_text=ignore)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"candidates": [{"finishReason": "SAFETY"}]}, "finish reason: SAFETY"),
        ({"usageMetadata": {"promptTokenCount": 3}}, "without any candidates"),
        ({"candidates": ["text"]}, "candidate that is not a JSON object"),
        ({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}, "without naming it"),
        ([1, 2], "other than a JSON object"),
    ],
)
async def test_malformed_answer_is_a_response_error(
    llm: FakeLLM, http_client: httpx.AsyncClient, answer: Any, message: str
) -> None:
    llm.queue(Raw(body=json.dumps(answer)))
    with pytest.raises(ProviderResponseError, match=message):
        await provider_for(llm, http_client).complete(ask())


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("raw", "neutral"),
    [("MAX_TOKENS", "max_tokens"), ("SAFETY", "content_filter"), ("OTHER", "OTHER")],
)
async def test_stop_reasons_are_neutral(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool, raw: str, neutral: str
) -> None:
    if streaming:
        llm.queue(streamed(HEL, {"candidates": [{"finishReason": raw}]}))
    else:
        (candidate,) = HEL["candidates"]
        llm.queue(Raw(body=json.dumps({"candidates": [{**candidate, "finishReason": raw}]})))
    on_text = ignore if streaming else None
    completion = await provider_for(llm, http_client).complete(ask(), on_text=on_text)
    assert (completion.text, completion.stop_reason) == ("Hel", neutral)
