"""The OpenAI-compatible provider against the fake server's OpenAI wire over real HTTP
(``Raw`` replies where a test needs a body no well-behaved server would send)."""

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
    ProviderResponseError,
    ProviderUnavailable,
    ProviderUnreachable,
)
from bot.providers import build_provider
from bot.providers.http import ProviderHttp, RetryPolicy
from bot.providers.openai import OpenAIProvider
from bot.providers.schema import clean_schema
from tests.fake_llm import CallTools, Fail, FakeLLM, Raw, Say, Stall
from tests.provider_cases import CALCULATOR, CLOCK, Naps, closed_port, ignore

ASK = CompletionRequest(
    system="You are terse.", messages=(ChatMessage("user", "hi"),), tools=(CALCULATOR, CLOCK)
)


def make_spec(base_url: str, **extra: Any) -> ProviderSpec:
    """A spec for the fake (or any) OpenAI-compatible server."""
    return ProviderSpec(kind="openai", model="gpt-test", base_url=base_url, **extra)


def provider_for(llm: FakeLLM, client: httpx.AsyncClient, **extra: Any) -> OpenAIProvider:
    provider = build_provider(make_spec(f"{llm.url}/v1", **extra), client)
    assert isinstance(provider, OpenAIProvider)
    return provider


@pytest.mark.parametrize("streaming", [False, True])
async def test_text_reply(llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool) -> None:
    llm.queue(Say("The quick brown fox jumps over the lazy dog."))
    pieces: list[str] = []
    provider = provider_for(llm, http_client)
    done = await provider.complete(ASK, pieces.append if streaming else None)
    assert done.text == "The quick brown fox jumps over the lazy dog."
    assert (done.tool_calls, done.stop_reason, done.provider) == ((), "end_turn", "openai:gpt-test")
    seen = llm.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert seen.body["max_tokens"] == 4096
    assert "max_completion_tokens" not in seen.body
    assert done.usage.input_tokens == len(json.dumps(seen.body)) // 4
    assert done.usage.output_tokens > 0
    if streaming:
        assert len(pieces) > 1
        assert "".join(pieces) == done.text
        assert seen.body["stream"] is True
        assert seen.body["stream_options"] == {"include_usage": True}
    else:
        assert "stream" not in seen.body


@pytest.mark.parametrize("streaming", [False, True])
async def test_two_tool_calls(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(
        CallTools(
            [("calculator", {"expression": "6 * 7", "precise": True}), ("clock", {})],
            text="Checking.",
        )
    )
    pieces: list[str] = []
    done = await provider_for(llm, http_client).complete(ASK, pieces.append if streaming else None)
    assert done.text == "Checking."
    assert [(c.name, dict(c.arguments), c.error) for c in done.tool_calls] == [
        ("calculator", {"expression": "6 * 7", "precise": True}, None),
        ("clock", {}, None),
    ]
    assert len({c.id for c in done.tool_calls}) == 2
    assert all(c.id for c in done.tool_calls)
    assert done.stop_reason == "tool_use"
    assert done.usage.output_tokens > 0


@pytest.mark.parametrize("streaming", [False, True])
async def test_arguments_that_are_not_json_set_error(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(CallTools([("calculator", '{"expression": "1+')]))
    done = await provider_for(llm, http_client).complete(ASK, ignore if streaming else None)
    (call,) = done.tool_calls
    assert call.name == "calculator"
    assert call.arguments == {}
    assert call.error is not None and "not valid JSON" in call.error


async def test_tool_round_wire_shape(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    calls = (ToolCall("call_1", "calculator", {"expression": "2+2"}), ToolCall("call_2", "clock"))
    request = CompletionRequest(
        system="Be brief.",
        messages=(
            ChatMessage("user", "what is 2+2, and the time?"),
            ChatMessage("assistant", "", tool_calls=calls),
            ChatMessage("tool", "4", tool_call_id="call_1", tool_name="calculator"),
            ChatMessage("tool", "12:00", tool_call_id="call_2", tool_name="clock"),
        ),
        tools=(CALCULATOR, CLOCK),
        temperature=0.2,
    )
    done = await provider_for(llm, http_client).complete(request)
    assert done.text == "The tool said: 12:00"  # the fake accepted it and saw the last result
    body = llm.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "what is 2+2, and the time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": clean_schema(t.parameters, "conservative"),
            },
        }
        for t in (CALCULATOR, CLOCK)
    ]
    assert body["temperature"] == 0.2
    assert llm.requests[0].view.message_count == 4


async def test_empty_system_prompt_is_omitted(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    await provider_for(llm, http_client).complete(
        CompletionRequest(system="", messages=(ChatMessage("user", "hi"),))
    )
    body = llm.requests[0].body
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "tools" not in body


async def test_auth_and_extra_headers(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    keyed = provider_for(llm, http_client, api_key="sk-test", headers={"X-Title": "PinClaw"})
    await keyed.complete(ASK)
    await provider_for(llm, http_client).complete(ASK)
    with_key, without_key = llm.requests
    assert with_key.headers["authorization"] == "Bearer sk-test"
    assert with_key.headers["x-title"] == "PinClaw"
    assert "authorization" not in without_key.headers


async def test_401_is_an_auth_error_without_retry(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Fail(401, "Incorrect API key provided"))
    with pytest.raises(ProviderAuthError, match="Incorrect API key provided"):
        await provider_for(llm, http_client, api_key="sk-bad").complete(ASK)
    assert len(llm.requests) == 1


async def test_429_waits_retry_after(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(429, retry_after=1), Say("finally"))
    done = await provider_for(llm, http_client, max_retries=1).complete(ASK)
    assert done.text == "finally"
    first, second = llm.requests
    assert second.arrived - first.arrived >= 0.9


async def test_500_twice_then_success(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(500), Fail(503), Say("recovered"))
    spec = make_spec(f"{llm.url}/v1")
    naps = Naps()
    http = ProviderHttp(http_client, spec.label, policy=RetryPolicy(max_retries=2), sleep=naps)
    done = await OpenAIProvider(spec, http).complete(ASK, ignore)
    assert done.text == "recovered"
    assert len(llm.requests) == 3
    assert len(naps.delays) == 2


async def test_persistent_500_gives_up(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(500, "boom"), Fail(500, "boom"), Fail(500, "boom"))
    spec = make_spec(f"{llm.url}/v1")
    http = ProviderHttp(http_client, spec.label, policy=RetryPolicy(max_retries=1), sleep=Naps())
    with pytest.raises(ProviderUnavailable, match="boom"):
        await OpenAIProvider(spec, http).complete(ASK)
    assert len(llm.requests) == 2


async def test_connection_refused(http_client: httpx.AsyncClient) -> None:
    spec = make_spec(f"http://127.0.0.1:{closed_port()}/v1", max_retries=0)
    with pytest.raises(ProviderUnreachable):
        await build_provider(spec, http_client).complete(ASK)


async def test_stalled_server_times_out(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Stall(2))
    provider = provider_for(llm, http_client, timeout_s=0.5, max_retries=0)
    with pytest.raises(ProviderUnreachable):
        await provider.complete(ASK)


async def test_error_object_in_a_200_body(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(200, "upstream model overloaded"))
    with pytest.raises(ProviderResponseError, match="upstream model overloaded"):
        await provider_for(llm, http_client).complete(ASK)


def sse(*events: str) -> str:
    """An OpenAI-style event stream of the given ``data:`` payloads."""
    return "".join(f"data: {event}\n\n" for event in events)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>Bad gateway</html>",
        b"[1, 2]",
        b'{"choices": []}',
        b'{"choices": [{"message": "hello"}]}',
        b'{"choices": [{"message": {"content": 42}}]}',
        b'{"choices": [{"message": {"content": null, "tool_calls": [{"id": "x"}]}}]}',
    ],
)
async def test_malformed_200_body(
    llm: FakeLLM, http_client: httpx.AsyncClient, body: bytes
) -> None:
    llm.queue(Raw(body=body))
    with pytest.raises(ProviderResponseError, match=r"^openai:gpt-test "):
        await provider_for(llm, http_client).complete(ASK)


@pytest.mark.parametrize(
    "events",
    [
        ['{"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]}'],
        ['{"error": {"message": "overloaded mid-answer"}}'],
        ["not json"],
    ],
)
async def test_broken_streams(
    llm: FakeLLM, http_client: httpx.AsyncClient, events: list[str]
) -> None:
    llm.queue(Raw(body=sse(*events), content_type="text/event-stream"))
    with pytest.raises(ProviderResponseError):
        await provider_for(llm, http_client).complete(ASK, ignore)


@pytest.mark.parametrize("streaming", [False, True])
async def test_connection_dropped_mid_answer_is_unreachable(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    first = '{"choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]}'
    chunk = sse(first) if streaming else '{"choices": [{"message": {"content": "Hel'
    llm.queue(Raw(chunks=[chunk], cut=True))
    provider = provider_for(llm, http_client, max_retries=0)
    with pytest.raises(ProviderUnreachable, match=r"broke mid-answer.*RemoteProtocolError"):
        await provider.complete(ASK, ignore if streaming else None)


async def test_fragments_without_index_or_ids(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    """Some compatible servers send whole calls without ``index`` or ``id``."""
    call = '{"function": {"name": "clock", "arguments": "{}"}}'
    events = [
        f'{{"choices": [{{"index": 0, "delta": {{"tool_calls": [{call}, {call}]}}}}]}}',
        '{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}',
    ]
    llm.queue(Raw(chunks=[sse(e) for e in events], content_type="text/event-stream"))
    done = await provider_for(llm, http_client).complete(ASK, ignore)
    assert [c.name for c in done.tool_calls] == ["clock", "clock"]
    assert len({c.id for c in done.tool_calls}) == 2


@pytest.mark.parametrize("streaming", [False, True])
async def test_length_cut_off_is_max_tokens(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    if streaming:
        events = [
            '{"choices": [{"index": 0, "delta": {"content": "Once upon a"}}]}',
            '{"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}',
            "[DONE]",
        ]
        llm.queue(Raw(chunks=[sse(e) for e in events], content_type="text/event-stream"))
    else:
        message = {"role": "assistant", "content": "Once upon a"}
        answer = {"choices": [{"index": 0, "message": message, "finish_reason": "length"}]}
        llm.queue(Raw(body=json.dumps(answer)))
    done = await provider_for(llm, http_client).complete(ASK, ignore if streaming else None)
    assert (done.text, done.stop_reason) == ("Once upon a", "max_tokens")


async def test_api_openai_com_gets_its_own_schema_and_token_field() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        reply = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        return httpx.Response(200, json=reply)

    # The host name is the subject here and cannot point at 127.0.0.1, so the
    # network boundary is faked with MockTransport instead of the fake server.
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        spec = ProviderSpec(kind="openai", model="gpt-test", api_key=SecretStr("sk-real"))
        provider = build_provider(spec, client)
        assert isinstance(provider, OpenAIProvider)
        assert provider.schema_strategy == "openai"
        done = await provider.complete(ASK)
    assert done.text == "ok"
    assert done.usage.input_tokens == 0
    (request,) = seen
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    body = json.loads(request.content)
    assert body["max_completion_tokens"] == 4096
    assert "max_tokens" not in body
    assert body["tools"][0]["function"]["parameters"] == clean_schema(
        CALCULATOR.parameters, "openai"
    )
