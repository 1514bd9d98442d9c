"""Telegram's ``parse_mode=HTML`` parser, rebuilt from TDLib's behaviour for the fake server.

``parse_html`` turns a message in Telegram's HTML subset into the visible text and
its entities, or raises ``HtmlParseError`` with the message Telegram gives (the
server prefixes it with ``Bad Request: can't parse entities:``). Byte offsets in
the errors count UTF-8 bytes of the raw text, entity offsets count UTF-16 code
units of the visible text, as Telegram does.

Like TDLib, an ``&`` that does not start ``&lt; &gt; &amp; &quot;`` or a numeric
reference is kept as a literal ``&`` (Telegram does not reject it), a lone ``>``
is kept too, and a ``<`` always starts a tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ALLOWED_TAGS = frozenset(
    {
        "a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins",
        "tg-spoiler", "tg-emoji", "span", "pre", "code", "blockquote",
    }
)  # fmt: skip
_SIMPLE = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic",
    "u": "underline", "ins": "underline", "s": "strikethrough", "strike": "strikethrough",
    "del": "strikethrough", "tg-spoiler": "spoiler", "span": "spoiler",
}  # fmt: skip
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SPACE = " \t\r\n\v\0"
_NUMERIC = re.compile(r"#(x[0-9a-fA-F]*|[0-9]*)")
_ALPHA = re.compile(r"[A-Za-z]*")
_TOKEN = re.compile(r"[A-Za-z0-9.\-]*")


class HtmlParseError(ValueError):
    """The HTML is not what Telegram accepts; ``str(error)`` is Telegram's wording."""


@dataclass(slots=True)
class ParsedText:
    """The visible text and its entities (Bot API ``MessageEntity`` dicts)."""

    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _Open:
    tag: str
    argument: str
    offset: int
    piece: int  # index into the output pieces where the tag's text starts


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's offsets and limits."""
    return len(text.encode("utf-16-le")) // 2


def parse_html(raw: str) -> ParsedText:
    """Parse Telegram HTML into visible text and entities, or raise ``HtmlParseError``."""
    return _Parser(raw).run()


class _Parser:
    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.i = 0
        self.out: list[str] = []
        self.offset = 0  # UTF-16 units emitted so far
        self.stack: list[_Open] = []
        self.entities: list[dict[str, Any]] = []

    def at(self, index: int) -> str:
        """The character at ``index``, or NUL past the end (TDLib reads a C string)."""
        return self.raw[index] if index < len(self.raw) else "\0"

    def byte_offset(self, index: int) -> int:
        return len(self.raw[:index].encode())

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.offset += utf16_len(text)

    def run(self) -> ParsedText:
        while self.i < len(self.raw):
            char = self.raw[self.i]
            if char == "&":
                decoded = self.entity(self.i)
                if decoded is not None:
                    self.emit(decoded[0])
                    self.i = decoded[1]
                    continue
            if char != "<":
                self.emit(char)
                self.i += 1
                continue
            if self.at(self.i + 1) == "/":
                self.end_tag()
            else:
                self.start_tag()
        if self.stack:
            tag = self.stack[-1].tag
            raise HtmlParseError(f'Can\'t find end tag corresponding to start tag "{tag}"')
        for entity in self.entities:
            entity.pop("_language", None)
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return ParsedText("".join(self.out), self.entities)

    def entity(self, start: int) -> tuple[str, int] | None:
        """Decode ``&...;`` at ``start``: (character, next index), or None to keep ``&``."""
        numeric = _NUMERIC.match(self.raw, start + 1)
        if numeric:
            body = numeric.group(1)
            digits = body[1:] if body.startswith("x") else body
            base = 16 if body.startswith("x") else 10
            code = int(digits, base) if digits else 0
            end = numeric.end()
            if code == 0 or code >= 0x10FFFF or end - start >= 10:
                return None
            if 0xD800 <= code <= 0xDFFF:
                raise HtmlParseError(
                    "Text contains invalid Unicode characters after decoding HTML entities, "
                    "check for unmatched surrogate code units"
                )
            char = chr(code)
        else:
            name = _ALPHA.match(self.raw, start + 1)
            assert name is not None
            end = name.end()
            if name.group() not in _NAMED:
                return None
            char = _NAMED[name.group()]
        return char, end + 1 if self.at(end) == ";" else end

    def skip_spaces(self) -> None:
        while self.i < len(self.raw) and self.raw[self.i] in _SPACE:
            self.i += 1

    def start_tag(self) -> None:
        begin = self.i
        self.i += 1
        while self.at(self.i) not in _SPACE and self.at(self.i) != ">":
            self.i += 1
        if self.i >= len(self.raw):
            raise HtmlParseError(f"Unclosed start tag at byte offset {self.byte_offset(begin)}")
        tag = self.raw[begin + 1 : self.i].lower()
        where = f"at byte offset {self.byte_offset(begin)}"
        if tag not in ALLOWED_TAGS:
            raise HtmlParseError(f'Unsupported start tag "{tag}" {where}')
        argument = ""
        while self.at(self.i) != ">":
            self.skip_spaces()
            if self.at(self.i) == ">":
                break
            name_start = self.i
            while self.at(self.i) not in _SPACE and self.at(self.i) not in "=>/\"'":
                self.i += 1
            name = self.raw[name_start : self.i]
            if not name:
                raise HtmlParseError(f'Empty attribute name in the tag "{tag}" {where}')
            self.skip_spaces()
            if self.at(self.i) != "=":
                if self.i >= len(self.raw):
                    raise HtmlParseError(f'Unclosed start tag "{tag}" {where}')
                if tag == "blockquote" and name == "expandable":
                    argument = "1"
                continue
            self.i += 1
            self.skip_spaces()
            if self.i >= len(self.raw):
                raise HtmlParseError(f'Unclosed start tag "{tag}" {where}')
            value = self.attribute_value()
            if self.i >= len(self.raw):
                raise HtmlParseError(f"Unclosed start tag {where}")
            argument = _argument(tag, name, value, argument)
        if tag == "span" and argument != "spoiler":
            raise HtmlParseError(f'Tag "span" must have class "tg-spoiler" {where}')
        self.stack.append(_Open(tag, argument, self.offset, len(self.out)))
        self.i += 1

    def attribute_value(self) -> str:
        quote = self.at(self.i)
        if quote not in "\"'":
            token = _TOKEN.match(self.raw, self.i)
            assert token is not None
            self.i = token.end()
            if self.at(self.i) not in _SPACE and self.at(self.i) != ">":
                offset = self.byte_offset(token.start())
                raise HtmlParseError(f"Unexpected end of name token at byte offset {offset}")
            return token.group().lower()
        self.i += 1
        value: list[str] = []
        while self.i < len(self.raw) and self.raw[self.i] != quote:
            decoded = self.entity(self.i) if self.raw[self.i] == "&" else None
            if decoded is not None:
                value.append(decoded[0])
                self.i = decoded[1]
            else:
                value.append(self.raw[self.i])
                self.i += 1
        if self.at(self.i) == quote:
            self.i += 1
        return "".join(value)

    def end_tag(self) -> None:
        begin = self.i
        if not self.stack:
            raise HtmlParseError(f"Unexpected end tag at byte offset {self.byte_offset(begin)}")
        self.i += 2
        while self.at(self.i) not in _SPACE and self.at(self.i) != ">":
            self.i += 1
        name = self.raw[begin + 2 : self.i].lower()
        self.skip_spaces()
        if self.at(self.i) != ">":
            raise HtmlParseError(f"Unclosed end tag at byte offset {self.byte_offset(begin)}")
        self.i += 1
        opened = self.stack.pop()
        if name and name != opened.tag:
            raise HtmlParseError(
                f"Unmatched end tag at byte offset {self.byte_offset(begin)}, "
                f'expected "</{opened.tag}>", found "</{name}>"'
            )
        if self.offset > opened.offset:
            self.close(opened)

    def close(self, opened: _Open) -> None:
        """Turn a closed tag into its entity (empty tags make none, as in Telegram)."""
        span = {"offset": opened.offset, "length": self.offset - opened.offset}
        last = self.entities[-1] if self.entities else None
        if last is not None and (last["offset"], last["length"]) != (
            span["offset"],
            span["length"],
        ):
            last = None  # only an entity over exactly the same text can merge with this one
        tag = opened.tag
        if tag in _SIMPLE:
            self.entities.append({"type": _SIMPLE[tag], **span})
        elif tag == "tg-emoji":
            if not opened.argument.isdigit() or int(opened.argument) == 0:
                raise HtmlParseError("Invalid custom emoji identifier specified")
            self.entities.append(
                {"type": "custom_emoji", **span, "custom_emoji_id": opened.argument}
            )
        elif tag == "a":
            url = opened.argument or "".join(self.out[opened.piece :])
            self.entities.append({"type": "text_link", **span, "url": url})
        elif tag == "blockquote":
            kind = "expandable_blockquote" if opened.argument else "blockquote"
            self.entities.append({"type": kind, **span})
        elif tag == "pre":
            if last is not None and last["type"] == "code" and last.get("_language"):
                last.update(type="pre", language=last.pop("_language"))
            else:
                self.entities.append({"type": "pre", **span})
        elif last is not None and last["type"] == "pre" and opened.argument:
            last["language"] = opened.argument
        else:
            # <code class="language-x"> names a language only directly inside <pre>.
            self.entities.append({"type": "code", **span, "_language": opened.argument})


def _argument(tag: str, name: str, value: str, current: str) -> str:
    """The attribute that matters for ``tag`` (href, language, spoiler class, emoji id)."""
    if tag == "a" and name == "href":
        return value
    if tag == "code" and name == "class" and value.startswith("language-"):
        return value.removeprefix("language-")
    if tag == "span" and name == "class" and value.startswith("tg-"):
        return value.removeprefix("tg-")
    if tag == "tg-emoji" and name == "emoji-id":
        return value
    if tag == "blockquote" and name == "expandable":
        return "1"
    return current
