"""Reading one git config file the way git 2.39 does, without running git.

``parse_config`` gives the ``(key, value)`` pairs of a file in order, keys as
git names them: section and variable lower-cased, a quoted subsection as
written (``diff.MyDriver.textconv``); a variable without ``=`` has the value
None (true). It follows git's own parser (``config.c``): comments, quoting,
escapes, continuation lines, ``[section "sub"]`` and ``[section.sub]``
headers, a key on the header's line, a leading byte order mark. Where git
would stop ("bad config line"), ``ConfigError`` is raised; so is a NUL byte,
which git reads past while printing up to it. Includes are the caller's.
"""

from __future__ import annotations

_SPACE = frozenset(b" \t\n\r")  # git's isspace(): not \v or \f
_BOM = b"\xef\xbb\xbf"


class ConfigError(ValueError):
    """The file is not config git would read."""


def _keychar(c: int) -> bool:
    return 0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or c == 0x2D


def _alpha(c: int) -> bool:
    return 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A


def _lower(c: int) -> str:
    return chr(c + 32) if 0x41 <= c <= 0x5A else chr(c)


class _Source:
    """The file as git's ``get_next_char`` sees it: CRLF is LF, the end is a last LF."""

    def __init__(self, data: bytes) -> None:
        if b"\0" in data:
            raise ConfigError("the file holds a NUL byte")
        self.data = data[len(_BOM) :] if data.startswith(_BOM) else data
        self.pos = 0
        self.eof = False

    def next(self) -> int:
        data, pos = self.data, self.pos
        if pos >= len(data):
            self.eof = True
            return 0x0A
        c = data[pos]
        self.pos = pos + 1
        if c == 0x0D and data[pos + 1 : pos + 2] == b"\n":
            self.pos = pos + 2
            return 0x0A
        return c


def parse_config(data: bytes) -> list[tuple[str, str | None]]:
    """The ``(key, value)`` pairs of a config file's bytes, in order."""
    source = _Source(data)
    found: list[tuple[str, str | None]] = []
    base = ""
    comment = False
    while True:
        c = source.next()
        if c == 0x0A:
            if source.eof:
                return found
            comment = False
            continue
        if comment or c in _SPACE:
            continue
        if c in (0x23, 0x3B):  # '#' ';'
            comment = True
            continue
        if c == 0x5B:  # '['
            base = _section(source) + "."
            continue
        if not _alpha(c):
            raise ConfigError("a line starts with neither a section nor a name")
        found.append(_variable(source, base, c))


def _section(source: _Source) -> str:
    name: list[str] = []
    while True:
        c = source.next()
        if source.eof:
            raise ConfigError("a section header is not closed")
        if c == 0x5D:  # ']'
            break
        if c in _SPACE:
            return _subsection(source, "".join(name), c)
        if not _keychar(c) and c != 0x2E:
            raise ConfigError("a section name holds a character git does not allow")
        name.append(_lower(c))
    if not name:
        raise ConfigError("a section has no name")
    return "".join(name)


def _subsection(source: _Source, name: str, c: int) -> str:
    while c in _SPACE:
        if c == 0x0A:
            raise ConfigError("a section header is not closed")
        c = source.next()
    if c != 0x22:  # '"'
        raise ConfigError("a subsection is not quoted")
    sub = bytearray()
    while True:
        c = source.next()
        if c == 0x0A:
            raise ConfigError("a subsection is not closed")
        if c == 0x22:
            break
        if c == 0x5C:  # '\\'
            c = source.next()
            if c == 0x0A:
                raise ConfigError("a subsection is not closed")
        sub.append(c)
    if source.next() != 0x5D:
        raise ConfigError("a subsection is not followed by ]")
    if not name:
        raise ConfigError("a section has no name")
    return f"{name}.{sub.decode('utf-8', 'surrogateescape')}"


def _variable(source: _Source, base: str, first: int) -> tuple[str, str | None]:
    name = [_lower(first)]
    while True:
        c = source.next()
        if source.eof or not _keychar(c):
            break
        name.append(_lower(c))
    while c in (0x20, 0x09):
        c = source.next()
    key = base + "".join(name)
    if c == 0x0A:
        return key, None
    if c != 0x3D:  # '='
        raise ConfigError("a name is followed by neither = nor the end of the line")
    return key, _value(source)


_ESCAPED = {0x74: 0x09, 0x62: 0x08, 0x6E: 0x0A, 0x5C: 0x5C, 0x22: 0x22}


def _value(source: _Source) -> str:
    value = bytearray()
    quote = comment = False
    spaces = 0
    while True:
        c = source.next()
        if c == 0x0A:
            if quote:
                raise ConfigError("a value has an unclosed quote")
            return value.decode("utf-8", "surrogateescape")
        if comment:
            continue
        if c in _SPACE and not quote:
            spaces += bool(value)
            continue
        if not quote and c in (0x23, 0x3B):
            comment = True
            continue
        value.extend(b" " * spaces)
        spaces = 0
        if c == 0x5C:
            c = source.next()
            if c == 0x0A:
                continue  # a continuation line
            if c not in _ESCAPED:
                raise ConfigError("a value has an escape git does not know")
            value.append(_ESCAPED[c])
        elif c == 0x22:
            quote = not quote
        else:
            value.append(c)
