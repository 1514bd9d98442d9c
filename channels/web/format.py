"""Replies as HTML for the chat page: the ``Style`` for ``bot.core.markdown.render``.

Every piece of text is escaped here, attribute values included, so the HTML
can go into the page as it is (server-side, and by the page's script from the
event stream). Links open only for http(s) and mailto addresses; any other
scheme is shown as text after the link's words.
"""

from __future__ import annotations

import html
import re

from bot.core.markdown import render

_SAFE_URL = re.compile(r"^(https?|mailto):", re.IGNORECASE)
_LANGUAGE = re.compile(r"[^\w+#.-]")


class WebHtml:
    """How the chat page writes each markdown element."""

    def text(self, raw: str) -> str:
        """Plain text, escaped."""
        return html.escape(raw, quote=True)

    def bold(self, inner: str) -> str:
        """Bold."""
        return f"<strong>{inner}</strong>"

    def italic(self, inner: str) -> str:
        """Italic."""
        return f"<em>{inner}</em>"

    def strike(self, inner: str) -> str:
        """Strikethrough."""
        return f"<s>{inner}</s>"

    def code(self, raw: str) -> str:
        """Inline code."""
        return f"<code>{html.escape(raw, quote=True)}</code>"

    def link(self, inner: str, url: str) -> str:
        """A link that opens in a new tab; other schemes are shown, not linked."""
        if not _SAFE_URL.match(url):
            return f"{inner} ({html.escape(url, quote=True)})"
        href = html.escape(url, quote=True)
        return f'<a href="{href}" rel="noopener noreferrer nofollow" target="_blank">{inner}</a>'

    def pre(self, raw: str, language: str) -> str:
        """A code block, with its language as a class where one was given."""
        body = html.escape(raw, quote=True)
        language = _LANGUAGE.sub("", language)
        if not language:
            return f"<pre><code>{body}</code></pre>"
        return f'<pre><code class="language-{language}">{body}</code></pre>'

    def heading(self, inner: str) -> str:
        """A heading inside a message is a bold line."""
        return f"<strong>{inner}</strong>"


STYLE = WebHtml()


def to_html(markdown: str) -> str:
    """Render PinClaw markdown as HTML for the chat page (lines keep their breaks: the
    page shows message text with ``white-space: pre-wrap``)."""
    return render(markdown, STYLE)
