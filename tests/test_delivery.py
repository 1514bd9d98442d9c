"""Delivery helpers: splitting at limits without losing text or breaking fences, retries, pacing.

Rendering goes through the Telegram HTML style, the platform where escaping grows text most.
"""

from __future__ import annotations

import asyncio
import html
import re

import pytest

from bot.core.channel import DeliveryError
from bot.core.delivery import Retry, send_with_retries, split_markdown, split_rendered
from bot.core.markdown import render
from bot.core.pacing import Pacer
from channels.telegram.format import TelegramHtml


def words(text: str) -> list[str]:
    return [w for w in re.split(r"\s+", text.replace("```", " ")) if w and not w.startswith("py")]


LONG = (
    "Intro paragraph.\n\n"
    + "```python\n"
    + "\n".join(f"print({i})  # line {i}" for i in range(120))
    + "\n```\n\n"
    + "\n".join(f"- item {i} with some words" for i in range(60))
    + "\n\nClosing words."
)


@pytest.mark.parametrize("limit", [200, 500, 2000, 4096])
def test_split_respects_the_limit_and_loses_nothing(limit: int) -> None:
    pieces = split_markdown(LONG, limit)
    assert all(len(p) <= limit for p in pieces)
    assert words(" ".join(pieces)) == words(LONG)


def test_a_cut_code_fence_is_closed_and_reopened() -> None:
    pieces = split_markdown(LONG, 500)
    fenced = [p for p in pieces if "print(" in p]
    assert len(fenced) > 1
    for piece in fenced:
        assert piece.count("```") % 2 == 0, piece
        assert "```python\n" in piece


def test_short_text_is_one_piece_and_paragraphs_stay_whole() -> None:
    assert split_markdown("hello", 100) == ["hello"]
    text = "a" * 60 + "\n\n" + "b" * 60 + "\n\n" + "c" * 60
    assert split_markdown(text, 130) == ["a" * 60 + "\n\n" + "b" * 60, "c" * 60]


def test_a_huge_word_is_cut_hard() -> None:
    pieces = split_markdown("x" * 250, 100)
    assert pieces == ["x" * 100, "x" * 100, "x" * 50]


def test_pieces_that_grow_when_rendered_are_split_again() -> None:
    text = "<&>" * 1000  # every character escapes to 4-5 characters
    rendered = split_rendered(text, 1000, lambda piece: render(piece, TelegramHtml()))
    assert all(len(piece) <= 1000 for piece in rendered)
    assert html.unescape("".join(rendered)) == text


def test_markdown_renders_through_a_style() -> None:
    text = (
        "# Title\nHello **bold _it_** and *it*, a<b & `x<y` [link](http://a?b=1&c=2)\n"
        "- item\n2*3*4 snake_case_name\n```py\nif a<b:\n```\nafter ~~gone~~"
    )
    assert render(text, TelegramHtml()).split("\n") == [
        "<b>Title</b>",
        "Hello <b>bold <i>it</i></b> and <i>it</i>, a&lt;b &amp; <code>x&lt;y</code> "
        '<a href="http://a?b=1&amp;c=2">link</a>',
        "• item",
        "2*3*4 snake_case_name",
        '<pre><code class="language-py">if a&lt;b:</code></pre>',
        "after <s>gone</s>",
    ]


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert render("```\ncode <here>", TelegramHtml()) == "<pre>code &lt;here&gt;</pre>"


class Flaky(Exception):
    pass


class Limited(Exception):
    def __init__(self, after: float) -> None:
        super().__init__(f"retry after {after}")
        self.after = after


def classify(exc: BaseException) -> Retry | None:
    if isinstance(exc, Limited):
        return Retry(exc.after)
    if isinstance(exc, Flaky):
        return Retry()
    return None


async def test_retries_honour_retry_after_and_back_off() -> None:
    failures: list[Exception] = [Limited(7), Flaky("reset"), Flaky("reset")]
    delays: list[float] = []

    async def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "sent"

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    assert await send_with_retries(attempt, classify, what="a reply", sleep=sleep) == "sent"
    assert delays[0] == 7  # the platform's retry_after, exactly
    assert 1.6 <= delays[1] <= 2.4  # then backoff doubling per attempt, with jitter
    assert 3.2 <= delays[2] <= 4.8


async def test_permanent_errors_and_giving_up_say_why() -> None:
    async def refused() -> None:
        raise ValueError("chat not found")

    async def no_sleep(seconds: float) -> None:
        pass

    with pytest.raises(DeliveryError, match="could not send a reply: ValueError: chat not found"):
        await send_with_retries(refused, classify, what="a reply", sleep=no_sleep)
    calls = 0

    async def always_flaky() -> None:
        nonlocal calls
        calls += 1
        raise Flaky("connection reset")

    with pytest.raises(DeliveryError, match="Flaky: connection reset"):
        await send_with_retries(always_flaky, classify, what="a reply", attempts=3, sleep=no_sleep)
    assert calls == 3


async def test_pacer_lets_a_burst_through_then_paces_each_chat_and_all_chats() -> None:
    now = [100.0]
    starts: list[float] = []

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    pacer = Pacer(
        per_chat_s=1.0, global_per_s=4.0, burst=2, global_burst=2, clock=lambda: now[0], sleep=sleep
    )
    for chat in ["a", "a", "a", "b", "c"]:
        async with pacer.slot(chat):
            starts.append(now[0])
    assert starts[:2] == [100.0, 100.0]  # a burst of two, within both limits
    assert starts[2] == pytest.approx(101.0)  # the third in a row waits for chat a's bucket
    assert starts[3] == pytest.approx(101.0)  # chat b is fresh and the global bucket refilled
    assert starts[4] == pytest.approx(101.25)  # overall: four per second once the burst is used
    now[0] += 10  # a quiet moment refills every bucket: the next reply goes at once
    quiet = now[0]
    async with pacer.slot("a"):
        assert now[0] == quiet


async def test_pacer_without_a_per_chat_limit_only_paces_globally() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    pacer = Pacer(
        per_chat_s=0, global_per_s=10.0, global_burst=1, clock=lambda: now[0], sleep=sleep
    )
    for _ in range(5):
        async with pacer.slot("a"):
            pass
    assert now[0] == pytest.approx(0.4)


async def test_concurrent_chats_share_the_global_rate() -> None:
    now = [0.0]
    starts: list[float] = []

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(0)
        now[0] = max(now[0], now[0] + seconds)

    pacer = Pacer(
        per_chat_s=1.0, global_per_s=10.0, global_burst=3, clock=lambda: now[0], sleep=sleep
    )

    async def send(chat: str) -> None:
        async with pacer.slot(chat):
            starts.append(now[0])

    await asyncio.gather(*(send(f"chat{i}") for i in range(6)))
    assert len(starts) == 6
    assert sorted(starts)[-1] >= 0.3 - 1e-9  # three in the burst, then one per 0.1 s
