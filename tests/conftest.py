"""Shared fixtures: the fake LLM server and an httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.fake_llm import FakeLLM


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """A fake LLM server on 127.0.0.1 speaking all four wire formats."""
    with FakeLLM.running() as server:
        yield server


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """The real httpx client the providers send through."""
    async with httpx.AsyncClient() as client:
        yield client
