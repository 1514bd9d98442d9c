"""PinClaw's markdown subset, rendered per platform through a ``Style``.

Replies are written in the markdown models produce: ``**bold**``, ``*italic*`` /
``_italic_``, ``~~strike~~``, ```code```, fenced code blocks, ``[text](url)``
links, ``#`` headings and ``-`` bullets. ``render`` walks that subset and asks a
``Style`` for each piece, so Telegram HTML and Slack mrkdwn are small classes in
their adapters and text is always escaped by the style, never twice.
"""

from __future__ import annotations

import re
from typing import Protocol

# The patterns the renderer reads markdown by; the splitter (bot.core.delivery) reads the
# same way, so it never cuts where the renderer sees a fence and the other way round.
FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+#.-]*)\s*$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
INLINE = re.compile(
    r"(?P<code>`(?P<ctext>[^`\n]+)`)"
    r"|(?P<link>\[(?P<ltext>[^\]\n]+)\]\((?P<url>[^)\s]+)\))"
    r"|(?P<bold>\*\*(?=\S)(?P<btext>.+?)(?<=\S)\*\*|__(?=\S)(?P<btext2>.+?)(?<=\S)__)"
    r"|(?P<strike>~~(?=\S)(?P<stext>.+?)(?<=\S)~~)"
    r"|(?P<italic>(?<![\w*])\*(?=[^\s*])(?P<itext>[^*\n]+?)(?<=\S)\*(?![\w*])"
    r"|(?<![\w_])_(?=[^\s_])(?P<itext2>[^_\n]+?)(?<=\S)_(?![\w_]))"
)


class Style(Protocol):
    """How one platform writes each element; ``text`` escapes plain text."""

    def text(self, raw: str) -> str: ...

    def bold(self, inner: str) -> str: ...

    def italic(self, inner: str) -> str: ...

    def strike(self, inner: str) -> str: ...

    def code(self, raw: str) -> str: ...

    def link(self, inner: str, url: str) -> str: ...

    def pre(self, raw: str, language: str) -> str: ...

    def heading(self, inner: str) -> str: ...


def render(text: str, style: Style) -> str:
    """Render markdown ``text`` with ``style``."""
    out: list[str] = []
    lines = text.replace("\r\n", "\n").split("\n")
    index = 0
    while index < len(lines):
        opener = FENCE_OPEN.match(lines[index])
        if opener:
            fence, language = opener.group(1), opener.group(2)
            body: list[str] = []
            index += 1
            while index < len(lines) and not closes_fence(lines[index], fence):
                body.append(lines[index])
                index += 1
            out.append(style.pre("\n".join(body), language))
            index += 1  # the closing fence (or the end of the text)
            continue
        out.append(_line(lines[index], style))
        index += 1
    return "\n".join(out)


def closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` ends the code block that ``fence`` opened."""
    stripped = line.strip()
    return stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0])


def _line(line: str, style: Style) -> str:
    heading = HEADING.match(line)
    if heading:
        return style.heading(inline(heading.group(1), style))
    bullet = BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {inline(bullet.group(2), style)}"
    return inline(line, style)


def inline(text: str, style: Style) -> str:
    """Render the inline elements of one line."""
    out: list[str] = []
    position = 0
    for match in INLINE.finditer(text):
        out.append(style.text(text[position : match.start()]))
        position = match.end()
        if match.group("code"):
            out.append(style.code(match.group("ctext")))
        elif match.group("link"):
            out.append(style.link(inline(match.group("ltext"), style), match.group("url")))
        elif match.group("bold"):
            out.append(style.bold(inline(match.group("btext") or match.group("btext2"), style)))
        elif match.group("strike"):
            out.append(style.strike(inline(match.group("stext"), style)))
        else:
            inner = match.group("itext") or match.group("itext2")
            out.append(style.italic(inline(inner, style)))
    out.append(style.text(text[position:]))
    return "".join(out)
