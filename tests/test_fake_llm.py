"""The fake LLM server's ``Raw`` replies, read with a plain httpx client over a socket."""

from __future__ import annotations

import httpx
import pytest

from tests.fake_llm import FakeLLM, Raw, Stall

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
CHUNKS: list[bytes | str] = ["data: one\n\n", b"data: two\n\n"]


async def test_raw_body_status_and_headers_are_sent_as_given(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Raw(502, "<html>Bad gateway</html>", "text/html", headers={"X-Extra": "yes"}))
    response = await http_client.post(f"{llm.url}/v1/chat/completions", json=CHAT)
    assert (response.status_code, response.text) == (502, "<html>Bad gateway</html>")
    assert response.headers["content-type"] == "text/html"
    assert response.headers["x-extra"] == "yes"
    (record,) = llm.requests
    assert (record.wire, record.view.last_text) == ("openai", "hi")
    assert isinstance(record.reply, Raw)


async def test_chunks_then_a_proper_end(llm: FakeLLM, http_client: httpx.AsyncClient) -> None:
    llm.queue(Stall(0.1, Raw(chunks=CHUNKS, content_type="text/event-stream")))
    async with http_client.stream("POST", f"{llm.url}/api/chat", json=CHAT) as response:
        assert response.headers["transfer-encoding"] == "chunked"
        body = b"".join([piece async for piece in response.aiter_bytes()])
    assert body == b"data: one\n\ndata: two\n\n"
    assert llm.requests[0].wire == "ollama"


async def test_cut_breaks_the_stream_after_the_chunks(
    llm: FakeLLM, http_client: httpx.AsyncClient
) -> None:
    llm.queue(Raw(chunks=CHUNKS, cut=True))
    received: list[bytes] = []
    async with http_client.stream("POST", f"{llm.url}/v1/messages", json=CHAT) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
            async for piece in response.aiter_bytes():
                received.append(piece)
    assert b"".join(received) == b"data: one\n\ndata: two\n\n"
    # Only that connection was dropped: the server answers the next request.
    assert (await http_client.post(f"{llm.url}/v1/chat/completions", json=CHAT)).is_success
