"""Readable text from a web page for ``web_fetch`` (``tools/web.py``), with the
standard library's ``html.parser``: loaded the first time a page is read."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin

_SKIP = frozenset(
    {"script", "style", "noscript", "template", "svg", "nav", "footer", "aside", "iframe", "select"}
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCKS = _HEADINGS | {
    "p", "div", "section", "article", "main", "header", "ul", "ol", "li", "table", "tr",
    "blockquote", "pre", "br", "hr", "dl", "dt", "dd", "figure", "figcaption", "address",
    "details", "summary", "form", "body",
}  # fmt: skip


class PageText(HTMLParser):
    """Readable text from HTML: blocks on their own lines, links as ``text (url)``."""

    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.title = ""
        self.lines: list[str] = []
        self._line: list[str] = []
        self._links: list[tuple[str, int]] = []  # href, where its text starts in _line
        self._skipping = 0
        self._in_title = False
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Open a block, heading, list item, link or skipped section."""
        if tag in _SKIP:
            self._skipping += 1
        if self._skipping:
            return
        if tag == "title":
            self._in_title = True
        if tag in _BLOCKS:
            self._end_line()
        if tag in _HEADINGS:
            if self.lines and self.lines[-1]:
                self.lines.append("")
            self._line.append("#" * int(tag[1]) + " ")
        elif tag == "li":
            self._line.append("- ")
        elif tag in ("td", "th"):
            self._line.append(" ")
        elif tag == "pre":
            self._pre += 1
        elif tag == "a":
            self._links.append((dict(attrs).get("href") or "", len(self._line)))

    def handle_endtag(self, tag: str) -> None:
        """Close what ``handle_starttag`` opened."""
        if tag in _SKIP:
            self._skipping = max(0, self._skipping - 1)
            return
        if self._skipping:
            return
        if tag in _BLOCKS:
            self._end_line()  # before leaving <pre>, so its last line keeps its indentation
        if tag == "title":
            self._in_title = False
        elif tag == "a" and self._links:
            self._close_link(*self._links.pop())
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)

    def handle_data(self, data: str) -> None:
        """Collect text, whitespace tidied outside ``<pre>``."""
        if self._skipping:
            return
        if self._in_title:
            self.title = " ".join((self.title + " " + data).split())
        elif self._pre:
            first, *rest = data.split("\n")
            self._line.append(first)
            for line in rest:
                self._end_line()
                self._line.append(line)
        else:
            self._line.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        """Everything read so far, one block per line."""
        self._end_line()
        return "\n".join(self.lines).strip() or "[the page has no readable text]"

    def _close_link(self, href: str, start: int) -> None:
        text = "".join(self._line[start:]).strip()
        url = urljoin(self.base_url, href.strip())
        same_page = urldefrag(url).url == urldefrag(self.base_url).url
        if text and text != url and url.startswith(("http://", "https://")) and not same_page:
            self._line.append(f" ({url})")

    def _end_line(self) -> None:
        text = "".join(self._line).rstrip()
        if not self._pre:
            text = " ".join(text.split())
        if text.strip():
            self.lines.append(text)
        self._line = []
        self._links = [(href, 0) for href, _ in self._links]
