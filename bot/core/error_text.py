"""One-line reasons for failures from outside: platform errors and the error pages of proxies.

A chat platform (or the proxy in front of it) answers an outage with an HTML page
("502 Bad Gateway"), and client libraries put that whole page into their exception
texts. ``short_text`` makes one short line of any such text for the log: the text
before an HTML page (a library's status line) or else the page's title, then the
first line only, at most ``MAX_CHARS`` characters. The full text stays available
at debug level, where the caller logs the exception itself.
"""

from __future__ import annotations

import re

MAX_CHARS = 200
PAGE = "an HTML error page"
_HTML = re.compile(r"<\s*(?:!doctype|html|head|body|title|center|h1)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def short_text(text: str) -> str:
    """``text`` as one short line, an HTML page reduced to what names it."""
    page = _HTML.search(text)
    if page is not None:
        before = text[: page.start()].rstrip(" \t\r\n:.,;-'\"(b")
        title = _TITLE.search(text)
        name = " ".join(_TAG.sub(" ", title.group(1)).split()) if title else ""
        text = f"{before or name} ({PAGE})" if before or name else PAGE
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1].rstrip() + "…"


def short_reason(exc: BaseException) -> str:
    """What went wrong, in one short line: the exception's text, or its type's name."""
    return short_text(str(exc)) or type(exc).__name__
