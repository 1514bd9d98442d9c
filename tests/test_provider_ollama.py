"""The Ollama provider against the fake server's Ollama wire over real HTTP (``Raw``
replies where a test needs a body no well-behaved server would send)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from bot.config.provider import ProviderSpec
from bot.core.conversation import ChatMessage, CompletionRequest, ToolCall
from bot.core.errors import (
    ProviderAuthError,
    ProviderRequestError,
    ProviderResponseError,
    ProviderUnavailable,
    ProviderUnreachable,
)
from bot.providers import build_provider
from bot.providers.http import ProviderHttp, RetryPolicy
from bot.providers.ollama import OllamaProvider
from bot.providers.schema import clean_schema
from tests.fake_llm import CallTools, Fail, FakeLLM, Raw, Say, Stall
from tests.provider_cases import CALCULATOR, CLOCK, Naps, closed_port, ignore

ASK = CompletionRequest(
    system="You are terse.", messages=(ChatMessage("user", "hi"),), tools=(CALCULATOR, CLOCK)
)


def make_spec(base_url: str, **extra: Any) -> ProviderSpec:
    """A spec for the fake (or any) Ollama server."""
    return ProviderSpec(kind="ollama", model="llama3.2", base_url=base_url, **extra)


def provider_for(llm: FakeLLM, client: httpx.AsyncClient, **extra: Any) -> OllamaProvider:
    provider = build_provider(make_spec(llm.url, **extra), client)
    assert isinstance(provider, OllamaProvider)
    return provider


@pytest.mark.parametrize("streaming", [False, True])
async def test_text_reply(llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool) -> None:
    llm.queue(Say("Why is the sky blue? Rayleigh scattering."))
    pieces: list[str] = []
    provider = provider_for(llm, http_client, max_tokens=512, temperature=0.3)
    done = await provider.complete(ASK, pieces.append if streaming else None)
    assert done.text == "Why is the sky blue? Rayleigh scattering."
    assert (done.tool_calls, done.stop_reason, done.provider) == ((), "end_turn", "ollama:llama3.2")
    seen = llm.requests[0]
    assert seen.path == "/api/chat"
    assert seen.body["stream"] is streaming
    assert seen.body["options"] == {"num_predict": 512, "temperature": 0.3}
    assert seen.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert done.usage.input_tokens == len(json.dumps(seen.body)) // 4
    assert done.usage.output_tokens > 0
    if streaming:
        assert len(pieces) > 1
        assert "".join(pieces) == done.text


@pytest.mark.parametrize("streaming", [False, True])
async def test_two_tool_calls(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    llm.queue(CallTools([("calculator", {"expression": "6 * 7"}), ("clock", {})]))
    done = await provider_for(llm, http_client).complete(ASK, ignore if streaming else None)
    assert [(c.name, dict(c.arguments), c.error) for c in done.tool_calls] == [
        ("calculator", {"expression": "6 * 7"}, None),
        ("clock", {}, None),
    ]
    assert len({c.id for c in done.tool_calls}) == 2
    assert all(c.id for c in done.tool_calls)
    assert done.stop_reason == "tool_use"


async def test_generated_ids_are_stable_per_answer(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    """The same answer read twice gives the same ids; another answer gives new ones."""
    answer = {
        "model": "llama3.2",
        "created_at": "2024-07-22T20:33:28.123648Z",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "clock", "arguments": {}}}],
        },
        "done": True,
    }
    llm.queue(Raw(body=json.dumps(answer)), Raw(body=json.dumps(answer)))
    provider = provider_for(llm, http_client)
    first, again = [await provider.complete(ASK) for _ in range(2)]
    assert first.tool_calls[0].id == again.tool_calls[0].id
    llm.queue(CallTools([("clock", {})]), CallTools([("clock", {})]))
    other, another = [await provider.complete(ASK) for _ in range(2)]
    assert len({first.tool_calls[0].id, other.tool_calls[0].id, another.tool_calls[0].id}) == 3


@pytest.mark.parametrize(
    ("raw", "arguments", "has_error"),
    [
        ('{"expression": "1+1"}', {"expression": "1+1"}, False),
        ('{"expression": "1+', {}, True),
    ],
)
async def test_string_arguments_are_tolerated(
    llm: FakeLLM,
    http_client: httpx.AsyncClient,
    raw: str,
    arguments: dict[str, Any],
    has_error: bool,
) -> None:
    llm.queue(CallTools([("calculator", raw)]))
    (call,) = (await provider_for(llm, http_client).complete(ASK)).tool_calls
    assert (call.name, dict(call.arguments), call.error is not None) == (
        "calculator",
        arguments,
        has_error,
    )


async def test_tool_round_wire_shape(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    calls = (ToolCall("call_a", "calculator", {"expression": "2+2"}), ToolCall("call_b", "clock"))
    request = CompletionRequest(
        system="Be brief.",
        messages=(
            ChatMessage("user", "what is 2+2, and the time?"),
            ChatMessage("assistant", "Let me see.", tool_calls=calls),
            ChatMessage("tool", "4", tool_call_id="call_a", tool_name="calculator"),
            ChatMessage("tool", "12:00", tool_call_id="call_b"),  # name found from the call
        ),
        tools=(CALCULATOR, CLOCK),
    )
    done = await provider_for(llm, http_client).complete(request)
    assert done.text == "The tool said: 12:00"
    body = llm.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "what is 2+2, and the time?"},
        {
            "role": "assistant",
            "content": "Let me see.",
            "tool_calls": [
                {"function": {"name": "calculator", "arguments": {"expression": "2+2"}}},
                {"function": {"name": "clock", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": "4", "tool_name": "calculator"},
        {"role": "tool", "content": "12:00", "tool_name": "clock"},
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
    assert "temperature" not in body["options"]


async def test_auth_header_only_with_a_key(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    await provider_for(llm, http_client, api_key="ollama-key").complete(ASK)
    await provider_for(llm, http_client).complete(ASK)
    with_key, without_key = llm.requests
    assert with_key.headers["authorization"] == "Bearer ollama-key"
    assert "authorization" not in without_key.headers


async def test_401_is_an_auth_error_without_retry(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Fail(401, "unauthorized"))
    with pytest.raises(ProviderAuthError, match="unauthorized"):
        await provider_for(llm, http_client).complete(ASK)
    assert len(llm.requests) == 1


async def test_unknown_model_message_reaches_the_person(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Fail(404, "model 'llama3.2' not found, try pulling it first"))
    with pytest.raises(ProviderRequestError, match="try pulling it first"):
        await provider_for(llm, http_client).complete(ASK, ignore)


async def test_429_waits_retry_after(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(429, retry_after=1), Say("finally"))
    done = await provider_for(llm, http_client, max_retries=1).complete(ASK)
    assert done.text == "finally"
    first, second = llm.requests
    assert second.arrived - first.arrived >= 0.9


async def test_500_retries_then_gives_up(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Fail(500), Fail(500), Say("recovered"), Fail(500, "boom"), Fail(500, "boom"))
    spec = make_spec(llm.url)
    naps = Naps()
    http = ProviderHttp(http_client, spec.label, policy=RetryPolicy(max_retries=2), sleep=naps)
    assert (await OllamaProvider(spec, http).complete(ASK, ignore)).text == "recovered"
    assert (len(llm.requests), len(naps.delays)) == (3, 2)
    http = ProviderHttp(http_client, spec.label, policy=RetryPolicy(max_retries=1), sleep=naps)
    with pytest.raises(ProviderUnavailable, match="boom"):
        await OllamaProvider(spec, http).complete(ASK)
    assert len(llm.requests) == 5


async def test_connection_refused(http_client: httpx.AsyncClient) -> None:
    spec = make_spec(f"http://127.0.0.1:{closed_port()}", max_retries=0)
    provider = build_provider(spec, http_client)
    with pytest.raises(ProviderUnreachable, match="cannot reach"):
        await provider.complete(ASK)


async def test_stalled_server_times_out(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Stall(2))
    provider = provider_for(llm, http_client, timeout_s=0.5, max_retries=0)
    with pytest.raises(ProviderUnreachable):
        await provider.complete(ASK, ignore)


def ndjson(body: bytes) -> Raw:
    """A streamed NDJSON answer, one chunk per line."""
    return Raw(chunks=list(body.splitlines(keepends=True)), content_type="application/x-ndjson")


@pytest.mark.parametrize(
    ("body", "streaming"),
    [
        (b"not json at all", False),
        (b'{"done": false}', False),
        (b'{"message": "hi", "done": true}', False),
        (b'{"message": {"content": 7}, "done": true}', False),
        (b'{"message": {"content": "Hel"}, "done": false}\n', True),
        (b'{"message": {"content": "Hel"}, "done": false}\n{"error": "out of memory"}\n', True),
        (b"{broken\n", True),
    ],
)
async def test_malformed_200_body(
    llm: FakeLLM, http_client: httpx.AsyncClient, body: bytes, streaming: bool
) -> None:
    llm.queue(ndjson(body) if streaming else Raw(body=body))
    with pytest.raises(ProviderResponseError, match=r"^ollama:llama3\.2 "):
        await provider_for(llm, http_client).complete(ASK, ignore if streaming else None)


@pytest.mark.parametrize("streaming", [False, True])
async def test_connection_dropped_mid_answer_is_unreachable(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    chunk = b'{"message": {"content": "Hel"}, "done": false}\n' if streaming else b'{"messa'
    llm.queue(Raw(chunks=[chunk], cut=True))
    provider = provider_for(llm, http_client, max_retries=0)
    with pytest.raises(ProviderUnreachable, match="broke mid-answer"):
        await provider.complete(ASK, ignore if streaming else None)


@pytest.mark.parametrize("streaming", [False, True])
async def test_length_cut_off_is_max_tokens(
    llm: FakeLLM, http_client: httpx.AsyncClient, streaming: bool
) -> None:
    final = {"done": True, "done_reason": "length", "prompt_eval_count": 9, "eval_count": 3}
    if streaming:
        line = {"message": {"role": "assistant", "content": "Once upon a"}, "done": False}
        llm.queue(ndjson(f"{json.dumps(line)}\n{json.dumps(final)}\n".encode()))
    else:
        message = {"role": "assistant", "content": "Once upon a"}
        llm.queue(Raw(body=json.dumps({"message": message, **final})))
    done = await provider_for(llm, http_client).complete(ASK, ignore if streaming else None)
    assert (done.text, done.stop_reason, done.usage.output_tokens) == (
        "Once upon a",
        "max_tokens",
        3,
    )
