"""Replies as Telegram HTML: the ``Style`` for ``bot.core.markdown.render``, and splitting at 4096.

Telegram's HTML needs only ``<``, ``>`` and ``&`` escaped in text (``"`` too in
attribute values); it knows ``<b> <i> <s> <code> <pre> <a href>`` and nothing
for headings, so headings become bold.

Splitting measures what Telegram counts: the UTF-16 length of the *visible*
text after parsing (``visible_text`` inverts this module's own HTML exactly,
since every ``<``, ``>`` and ``&`` in text is escaped). Measuring the HTML
instead would be needlessly cautious: ``&&`` costs 10 characters as HTML and 2
on screen, so code-heavy replies would arrive in two or three times as many
messages, each paced a second apart. A piece must also fit as its markdown
source, because that is what is sent in plain text when Telegram refuses the
markup (a link's source carries its URL, which the visible text does not), so
the measure is the longer of the two.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from bot.core.delivery import split_rendered
from bot.core.markdown import render

MAX_TEXT = 4096
_SAFE_URL = re.compile(r"^(https?|tg|mailto):", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's limits and offsets.

    A lone surrogate (JSON can carry one) counts as the one unit it is, not an error.
    """
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class TelegramHtml:
    """How Telegram's ``parse_mode=HTML`` writes each markdown element."""

    def text(self, raw: str) -> str:
        """Plain text, with ``&``, ``<`` and ``>`` escaped."""
        return html.escape(raw, quote=False)

    def bold(self, inner: str) -> str:
        """Bold."""
        return f"<b>{inner}</b>"

    def italic(self, inner: str) -> str:
        """Italic."""
        return f"<i>{inner}</i>"

    def strike(self, inner: str) -> str:
        """Strikethrough."""
        return f"<s>{inner}</s>"

    def code(self, raw: str) -> str:
        """Inline code."""
        return f"<code>{html.escape(raw, quote=False)}</code>"

    def link(self, inner: str, url: str) -> str:
        """A link; an address Telegram would not open is shown after the text instead."""
        if not _SAFE_URL.match(url):
            return f"{inner} ({html.escape(url, quote=False)})"
        return f'<a href="{html.escape(url, quote=True)}">{inner}</a>'

    def pre(self, raw: str, language: str) -> str:
        """A code block, with its language where one was given."""
        body = html.escape(raw, quote=False)
        if not language:
            return f"<pre>{body}</pre>"
        return f'<pre><code class="language-{html.escape(language)}">{body}</code></pre>'

    def heading(self, inner: str) -> str:
        """Telegram has no headings: bold stands in."""
        return f"<b>{inner}</b>"


STYLE = TelegramHtml()


def to_html(markdown: str) -> str:
    """Render PinClaw markdown as Telegram HTML."""
    return render(markdown, STYLE)


@dataclass(frozen=True, slots=True)
class Piece:
    """One message of a reply: its HTML, and the markdown it came from (the plain fallback)."""

    html: str
    source: str


def visible_text(rendered: str) -> str:
    """The text Telegram shows for HTML made by ``to_html`` (tags dropped, escapes decoded)."""
    return html.unescape(_TAG.sub("", rendered))


def measure(markdown: str) -> int:
    """A piece's size for Telegram: UTF-16 length of its visible text or its source, the longer."""
    return max(utf16_len(markdown), utf16_len(visible_text(to_html(markdown))))


def split_reply(text: str, limit: int = MAX_TEXT) -> list[Piece]:
    """Cut a markdown reply into pieces that fit one Telegram message each, as HTML or plain."""
    # split_rendered renders to measure; rendering is the identity here so that each
    # piece keeps its source, and ``measure`` does the real rendering.
    sources = split_rendered(text, limit, measure=measure, size=utf16_len)
    return [Piece(to_html(s), s) for s in sources if s.strip()]
