"""The Anthropic provider against the fake Messages API over real HTTP (``Raw`` replies
where a test needs a body no well-behaved server would send)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.config.provider import ProviderSpec
from bot.core.conversation import ChatMessage, CompletionRequest, ToolCall
from bot.core.errors import (
    ProviderAuthError,
    ProviderError,
    ProviderRequestError,
    ProviderResponseError,
    ProviderUnreachable,
)
from bot.providers import build_provider
from bot.providers.anthropic import AnthropicProvider
from bot.providers.http import ProviderHttp
from bot.providers.schema import clean_schema
from tests.fake_llm import CallTools, Fail, FakeLLM, Raw, Say
from tests.provider_cases import CALCULATOR, CLOCK, Naps, ignore

KEY = "sk-ant-test"


def make_spec(base_url: str, **extra: Any) -> ProviderSpec:
    """An Anthropic spec pointing at ``base_url``."""
    return ProviderSpec(
        kind="anthropic", model="claude-test", base_url=base_url, api_key=SecretStr(KEY), **extra
    )


def ask(text: str = "What is 2+2?", system: str = "You are PinClaw.") -> CompletionRequest:
    """A one-message request offering both tools."""
    return CompletionRequest(
        system=system, messages=(ChatMessage("user", text),), tools=(CALCULATOR, CLOCK)
    )


def provider_for(llm: FakeLLM, client: httpx.AsyncClient, **extra: Any) -> AnthropicProvider:
    """A provider built through the factory, as the app builds it."""
    provider = build_provider(make_spec(llm.url, **extra), client)
    assert isinstance(provider, AnthropicProvider)
    return provider


async def test_text_reply(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Say("Four, as always."))
    completion = await provider_for(llm, http_client).complete(ask())
    assert completion.text == "Four, as always."
    assert completion.tool_calls == ()
    assert completion.stop_reason == "end_turn"
    assert completion.provider == "anthropic:claude-test"
    (record,) = llm.requests
    assert record.path == "/v1/messages"
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
    assert record.body["stream"] is True
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
    assert completion.stop_reason == "tool_use"
    first, second = completion.tool_calls
    assert (first.name, dict(first.arguments), first.error) == (
        "calculator",
        {"expression": "2+2"},
        None,
    )
    assert (second.name, dict(second.arguments), second.error) == ("clock", {}, None)
    assert first.id and second.id and first.id != second.id
    assert "".join(pieces) == ("Checking." if streaming else "")


@pytest.mark.parametrize("streaming", [False, True])
async def test_unreadable_tool_arguments_become_a_call_error(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(CallTools([("calculator", '{"expression": "2+')]))
    on_text = ignore if streaming else None
    completion = await provider_for(llm, http_client).complete(ask(), on_text=on_text)
    (call,) = completion.tool_calls
    assert call.name == "calculator"
    assert call.arguments == {}
    assert call.error is not None and "not valid JSON" in call.error


async def test_request_body_and_headers(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    provider = provider_for(llm, http_client, temperature=0.3, headers={"x-team": "pinclaw"})
    await provider.complete(ask())
    (record,) = llm.requests
    assert record.headers["x-api-key"] == KEY
    assert record.headers["anthropic-version"] == "2023-06-01"
    assert record.headers["content-type"].startswith("application/json")
    assert record.headers["x-team"] == "pinclaw"
    body = record.body
    assert body["model"] == "claude-test"
    assert body["system"] == "You are PinClaw."
    assert body["max_tokens"] == 4096
    assert body["temperature"] == 0.3
    assert "stream" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]}
    ]
    assert body["tools"] == [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": clean_schema(tool.parameters, "anthropic"),
        }
        for tool in (CALCULATOR, CLOCK)
    ]


async def test_empty_system_is_left_out(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    await provider_for(llm, http_client).complete(ask(system=""))
    assert "system" not in llm.requests[0].body
    assert "temperature" not in llm.requests[0].body


async def test_base_url_ending_in_v1_is_not_doubled(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    provider = build_provider(make_spec(f"{llm.url}/v1"), http_client)
    await provider.complete(ask())
    assert llm.requests[0].path == "/v1/messages"


async def test_tool_round_trip_alternates_roles(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    calls = (
        ToolCall("toolu_a1", "calculator", {"expression": "2+2"}),
        ToolCall("call:b/2", "clock"),
    )
    messages = (
        ChatMessage("user", "What is 2+2, and what time is it?"),
        ChatMessage("assistant", "", tool_calls=calls),
        ChatMessage("tool", "4", tool_call_id="toolu_a1", tool_name="calculator"),
        ChatMessage(
            "tool", "clock unplugged", tool_call_id="call:b/2", tool_name="clock", is_error=True
        ),
        ChatMessage("user", "Also, hello."),
    )
    request = CompletionRequest(system="Be brief.", messages=messages, tools=(CALCULATOR, CLOCK))
    completion = await provider_for(llm, http_client).complete(request)
    assert completion.text == "You said: Also, hello."  # the fake accepted the conversation
    sent = llm.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_a1",
            "name": "calculator",
            "input": {"expression": "2+2"},
        },
        {"type": "tool_use", "id": "call_b_2", "name": "clock", "input": {}},
    ]
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a1", "content": "4", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "call_b_2",
            "content": "clock unplugged",
            "is_error": True,
        },
        {"type": "text", "text": "Also, hello."},
    ]


async def test_fake_rejects_roles_that_do_not_alternate(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    body = {
        "model": "claude-test",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    }
    response = await http_client.post(f"{llm.url}/v1/messages", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_bad_key_is_an_auth_error_without_retries(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Fail(401, "invalid x-api-key"))
    with pytest.raises(ProviderAuthError, match="invalid x-api-key"):
        await provider_for(llm, http_client).complete(ask())
    assert len(llm.requests) == 1


async def test_bad_request_is_not_retried(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(400, "max_tokens: too large"))
    with pytest.raises(ProviderRequestError, match="max_tokens: too large"):
        await provider_for(llm, http_client).complete(ask())
    assert len(llm.requests) == 1


async def test_rate_limit_honours_retry_after(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(429, "slow down", retry_after=1), Say("Back again."))
    completion = await provider_for(llm, http_client).complete(ask())
    assert completion.text == "Back again."
    first, second = llm.requests
    assert second.arrived - first.arrived >= 0.9


async def test_overloaded_is_retried_with_backoff(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    naps = Naps()
    spec = make_spec(llm.url)
    provider = AnthropicProvider(spec, ProviderHttp(http_client, spec.label, sleep=naps))
    llm.queue(Fail(529, "Overloaded"), Say("Made it."))
    completion = await provider.complete(ask(), on_text=ignore)
    assert completion.text == "Made it."
    assert len(naps.delays) == 1 and naps.delays[0] > 0
    assert len(llm.requests) == 2


def sse(*events: dict[str, Any]) -> str:
    """An Anthropic event stream, each event named after its ``type``."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def streamed(*events: dict[str, Any], cut: bool = False) -> Raw:
    """A 200 event stream sent one event per chunk."""
    return Raw(chunks=[sse(e) for e in events], content_type="text/event-stream", cut=cut)


MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
START = {"type": "message_start", "message": MESSAGE}
TEXT_START = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
HEL = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}


async def test_error_event_mid_stream_raises(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    llm.queue(streamed(START, {"type": "ping"}, TEXT_START, HEL, error))
    pieces: list[str] = []
    with pytest.raises(ProviderError, match="overloaded_error: Overloaded") as caught:
        await provider_for(llm, http_client).complete(ask(), on_text=pieces.append)
    assert caught.value.retryable
    assert pieces == ["Hel"]


@pytest.mark.parametrize(
    ("cut", "message"),
    [(False, "closed mid-answer"), (True, "broke mid-answer .*RemoteProtocolError")],
)
async def test_stream_cut_short_is_unreachable(
    llm: FakeLLM, http_client: httpx.AsyncClient, cut: bool, message: str
) -> None:
    """The body ends (properly or with the connection dropped) before ``message_stop``."""
    llm.queue(streamed(START, TEXT_START, HEL, cut=cut))
    provider = provider_for(llm, http_client, max_retries=0)
    with pytest.raises(ProviderUnreachable, match=message):
        await provider.complete(ask(), on_text=ignore)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"id": "msg_1", "type": "message"}', "without a list of content blocks"),
        (b'{"content": [{"type": "tool_use", "id": "t1", "input": {}}]}', "without naming it"),
        (b"<html>gateway</html>", "not JSON"),
    ],
)
async def test_malformed_answer_is_a_response_error(
    llm: FakeLLM, http_client: httpx.AsyncClient, content: bytes, message: str
) -> None:
    llm.queue(Raw(body=content))
    with pytest.raises(ProviderResponseError, match=message):
        await provider_for(llm, http_client).complete(ask())


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("raw", "neutral"),
    [
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "end_turn"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
async def test_stop_reasons_are_neutral(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool, raw: str, neutral: str
) -> None:
    if streaming:
        delta = {"type": "message_delta", "delta": {"stop_reason": raw}, "usage": {}}
        stop = {"type": "content_block_stop", "index": 0}
        llm.queue(streamed(START, TEXT_START, HEL, stop, delta, {"type": "message_stop"}))
    else:
        text = {"type": "text", "text": "Hel"}
        llm.queue(Raw(body=json.dumps({**MESSAGE, "content": [text], "stop_reason": raw})))
    on_text = ignore if streaming else None
    completion = await provider_for(llm, http_client).complete(ask(), on_text=on_text)
    assert (completion.text, completion.stop_reason) == ("Hel", neutral)
