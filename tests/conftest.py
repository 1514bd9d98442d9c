"""Shared fixtures: the fake LLM, Telegram and embeddings servers, and an httpx client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.adapter_harness import ScriptedInbox
from tests.fake_embeddings import FakeEmbeddings
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

# The web panel's fixtures (``panel``, ``browser``), for every module that tests a page.
pytest_plugins = ["tests.browser"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--update-screenshots``: the browser tests rewrite the README's docs/screenshots."""
    parser.addoption(
        "--update-screenshots",
        action="store_true",
        help="write the browser tests' screenshots to docs/screenshots (the README's pictures); "
        "without it they go to pytest's temporary folder and no tracked file changes",
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh home folder, so nothing reads or writes the real ~/.pinclaw."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """A fake LLM server on 127.0.0.1 speaking all four wire formats."""
    with FakeLLM.running() as server:
        yield server


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    """The fake Telegram Bot API on 127.0.0.1."""
    with FakeTelegram.running() as server:
        yield server


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """The real httpx client the providers send through."""
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def inbox() -> ScriptedInbox:
    """The core's inbox, scripted, for adapter tests that leave the core out."""
    return ScriptedInbox()


@pytest.fixture
def embedder_server() -> Iterator[FakeEmbeddings]:
    """A fake OpenAI-compatible embeddings server on 127.0.0.1 (384 dimensions)."""
    with FakeEmbeddings.running() as server:
        yield server
