"""Reply splitting, as property tests: every piece fits, nothing is lost, nothing raises.

Random replies mix words, newlines, fences (also openers far longer than a message),
emoji, combining marks, lone surrogates, lines up to three times the limit, markdown
markup and HTML-special characters, and go through the functions the channels call
before sending: ``split_reply`` (Telegram), ``pieces`` (Discord), ``split_for_slack``.

"Nothing lost" is checked in the source where the pieces keep it (Telegram's
``Piece.source``, Discord's text): every non-space character of the reply appears, in
order, in the pieces. And on screen (Telegram, Slack): what the whole reply would show,
rendered with the platform's own style, appears in order in what the pieces show,
counting letters, digits, emoji and link addresses but not punctuation or ASCII
symbols, because a markdown delimiter (``*``, a backtick, a bracket) legitimately turns
literal when the span it opened is cut between two messages.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from channels.discord.send import MESSAGE_LIMIT as DISCORD_LIMIT
from channels.discord.send import pieces, utf16_length
from channels.slack.format import MESSAGE_LIMIT as SLACK_LIMIT
from channels.slack.format import split_for_slack, to_mrkdwn
from channels.telegram.format import MAX_TEXT, measure, split_reply, to_html, utf16_len
from channels.telegram.format import visible_text as telegram_visible
from tests.fake_telegram import parse_html

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_OPENER = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+#.-]*)\s*$")  # bot.core.markdown's fence opener

WORD = st.text(string.ascii_letters + string.digits + "éßж中", min_size=1, max_size=10)
SHORT = st.one_of(
    WORD,
    st.sampled_from(["*", "**", "_", "__", "`", "~", "~~", "*x*", "**bold text**", "_it_"]),
    st.sampled_from(["`code`", "~~gone~~", "[link](http://x)", "[two words](http://x/?a=1&b=2)"]),
    st.sampled_from(["- ", "* ", "# ", "<", ">", "&", "a<b", "&amp;", "<b>x</b>", "AT&T"]),
    st.sampled_from(
        ["😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "e\u0301", "a\u0308\u0323", "\u200d", "𝔘", "\ud800"]
    ),
    st.sampled_from(["```", "```json", "``` python", "~~~", "````", "`````", "`", "``"]),
)
SEPARATOR = st.sampled_from([" ", " ", " ", "", "\n", "\n\n", "\r\n", "\t"])
MARKS = "`*_~[]()#-+<>& \n"  # what markdown and HTML read as more than text
SHORTS = st.lists(st.tuples(SHORT, SEPARATOR).map("".join), max_size=40).map("".join)


def long_token(limit: int) -> st.SearchStrategy[str]:
    """A line up to three times ``limit``: one long word, many words, or a long fence opener."""
    n = st.integers(limit // 3, 3 * limit)
    return st.one_of(
        st.builds(lambda c, k: c * k, st.sampled_from(["x", "😀", "&", "<", "`", "e\u0301"]), n),
        st.builds(lambda w, k: (w + " ") * (k // (len(w) + 1)), SHORT, n),
        st.builds(lambda k: "```" + "x" * k, n),  # a fence opener no message can hold
        st.builds(lambda k: '```{"ids": [' + ", ".join(map(str, range(k // 6))) + "]}", n),
    )


@st.composite
def replies(draw: st.DrawFn, limit: int) -> str:
    """A reply: short tokens with up to three long lines (or long words) among them."""
    parts = [draw(SHORTS) for _ in range(3)]
    for _ in range(draw(st.integers(0, 3))):
        token = draw(st.tuples(SEPARATOR, long_token(limit), SEPARATOR).map("".join))
        parts.insert(draw(st.integers(0, len(parts))), token)
    return "".join(parts)


def kept(text: str) -> list[str]:
    """The characters that must survive a split: all but whitespace."""
    return [c for c in text if not c.isspace()]


def legible(text: str) -> list[str]:
    """What a reader must find on screen: not whitespace, punctuation, ASCII symbols, U+200B."""
    return [
        c
        for c in text
        if not c.isspace()
        and c not in string.punctuation
        and c != "\u200b"
        and not unicodedata.category(c).startswith("P")
    ]


def in_order(needles: list[str], haystack: list[str]) -> bool:
    """Whether ``needles`` is a subsequence of ``haystack``."""
    remaining = iter(haystack)
    return all(any(c == h for h in remaining) for c in needles)


def diverges(text: str, limit: int) -> bool:
    """Whether a fence opener may be long enough for the splitter to read it as text.

    The renderer takes such a line as a fence whose "language" is the long word; the
    splitter sends it as text on purpose, so the whole reply and its pieces show
    different things. The splitter does so above half its budget, and Slack's second
    split (after escaping) can bring the budget to about a sixth of the limit.
    """
    return any(_OPENER.match(line) and 16 * len(line) > limit for line in text.split("\n"))


def telegram_shown(rendered: str) -> str:
    """Telegram's visible text, plus what it shows beside it: link addresses, code languages."""
    rendered = re.sub(r'<a href="([^"]*)">(.*?)</a>', r"\2 \1", rendered)
    rendered = re.sub(r'<code class="language-([^"]*)">', r"\1 ", rendered)
    return telegram_visible(rendered)


def slack_shown(mrkdwn: str) -> str:
    """What Slack shows for mrkdwn: ``<url|text>`` as text and address, escapes undone."""
    mrkdwn = re.sub(r"<([^<>|]*)\|([^<>]*)>", lambda m: f"{m[2]} {m[1]}", mrkdwn)
    return html.unescape(mrkdwn.replace("%7C", "|"))


@PROPERTY
@given(replies(MAX_TEXT))
def test_telegram_pieces_fit_and_lose_nothing(text: str) -> None:
    result = split_reply(text)
    for piece in result:
        assert measure(piece.source) <= MAX_TEXT
        assert utf16_len(telegram_visible(piece.html)) <= MAX_TEXT
        assert piece.html == to_html(piece.source)
        if not _LONE_SURROGATE.search(piece.html):  # the fake parser counts UTF-16 strictly
            assert utf16_len(parse_html(piece.html).text) <= MAX_TEXT
    assert in_order(kept(text), kept("".join(p.source for p in result)))
    if not diverges(text, MAX_TEXT):
        shown = legible("".join(telegram_shown(p.html) for p in result))
        assert in_order(legible(telegram_shown(to_html(text))), shown)


@PROPERTY
@given(replies(DISCORD_LIMIT))
def test_discord_pieces_fit_and_lose_nothing(text: str) -> None:
    result = pieces(text)
    assert result, "Discord refuses empty messages"
    assert all(utf16_length(piece) <= DISCORD_LIMIT for piece in result)
    assert in_order(kept(text), kept("".join(result)))


@PROPERTY
@given(replies(SLACK_LIMIT))
def test_slack_pieces_fit_and_lose_nothing(text: str) -> None:
    result = split_for_slack(text)
    assert all(len(piece) <= SLACK_LIMIT for piece in result)
    if not diverges(text, SLACK_LIMIT):
        shown = legible("".join(slack_shown(piece) for piece in result))
        assert in_order(legible(slack_shown(to_mrkdwn(text))), shown)


@PROPERTY
@given(st.text(st.characters() | st.characters(categories=["Cs"]) | st.sampled_from(MARKS)))
def test_any_text_splits_at_small_limits(text: str) -> None:
    result = split_reply(text, 64)
    assert all(measure(piece.source) <= 64 for piece in result)
    assert in_order(kept(text), kept("".join(p.source for p in result)))
    if not diverges(text, 64):
        shown = legible("".join(telegram_shown(p.html) for p in result))
        assert in_order(legible(telegram_shown(to_html(text))), shown)
    assert all(len(piece) <= 200 for piece in split_for_slack(text, 200))
    assert pieces(text)


def test_an_empty_reply() -> None:
    assert split_reply("") == [] and split_for_slack(" \n ") == [] and pieces("") == ["…"]


def test_a_fence_opener_longer_than_a_telegram_message_is_sent_as_text() -> None:
    text = "```" + "x" * 5000 + "\n...\n```"
    result = split_reply(text)
    assert len(result) == 2
    assert all(measure(p.source) <= MAX_TEXT for p in result)
    assert all(utf16_len(parse_html(p.html).text) <= MAX_TEXT for p in result)
    shown = [parse_html(p.html).text for p in result]
    assert "".join(shown).count("x") == 5000 and "..." in shown[1]
    assert shown[0].startswith("\u200b```x")  # text, not a code block with a 5000-x language
    assert "<pre" not in result[0].html


def test_a_fenced_line_longer_than_a_discord_message_is_cut_inside_closed_fences() -> None:
    text = "Here:\n\n```\n" + "y" * 2100 + "\n```"
    result = pieces(text)
    assert [utf16_length(p) for p in result] == [5, 2000, 116]
    assert result[0] == "Here:"
    for piece in result[1:]:
        assert piece.startswith("```\n") and piece.endswith("\n```")
    assert "".join(result).count("y") == 2100


def test_a_long_word_after_a_fence_marker_reaches_discord_whole() -> None:
    result = pieces("```" + "y" * 2100 + "\n```")  # used to arrive as a lone "…"
    assert all(utf16_length(p) <= DISCORD_LIMIT for p in result)
    assert "".join(result).count("y") == 2100


def test_a_cut_code_line_never_closes_its_fence_early() -> None:
    text = "```\n" + "`" * 5000 + " end\n```"  # its first part alone would close the fence
    result = split_reply(text)
    assert len(result) == 2
    shown = [parse_html(p.html).text for p in result]
    assert all(p.html.count("<pre>") == 1 for p in result)
    assert all(utf16_len(seen) <= MAX_TEXT for seen in shown)
    assert "".join(shown).count("`") == 5000 and shown[1].endswith("end")


def test_a_long_line_is_cut_outside_links_and_never_starts_a_bullet() -> None:
    link = "[the docs](http://example.org) then "  # the cut nearest 2000 falls inside it
    text = "w " * 995 + link + "v " * 982 + "- tail"  # then before "- tail"
    assert pieces(text) == [
        ("w " * 995).strip(),
        (link + "v " * 982).strip(),
        "\u200b- tail",  # a zero-width space keeps it a line of text, not a bullet
    ]
