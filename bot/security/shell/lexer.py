"""A small POSIX shell lexer for risk classification: words, operators, substitutions.

``shlex`` is not enough here: it forgets which parts of a word were quoted (so
``'$X'`` and ``$X`` look alike), does not know ``$(...)``, backticks, ``${...}``,
process substitution, ``2>``/``&>`` redirections or here-documents, and splits
``$(echo rm)`` into pieces. This lexer keeps exactly what the classifier needs:
each word after quote removal (expansions left as written), whether it expands
or globs at run time, the bodies of command substitutions found in it, and the
operators between words. It never runs or expands anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

CONTROL_OPS = frozenset({";", "&&", "||", "|", "|&", "&", "\n", "(", ")"})
REDIRECT_OPS = frozenset({"<", ">", ">>", ">|", "<>", ">&", "<&", "&>", "&>>", "<<", "<<-", "<<<"})
_OPERATORS = sorted(CONTROL_OPS | REDIRECT_OPS | {";;"}, key=len, reverse=True)
_METACHARS = frozenset(" \t\n;&|()<>")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "v": "\v"}
MAX_NESTING = 64
_ANSI_C = re.compile(r"\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|[0-7]{1,3}|.)", re.S)


class ShellSyntaxError(ValueError):
    """The command line is not complete shell syntax (an unclosed quote or bracket)."""


@dataclass(frozen=True, slots=True)
class Word:
    """A shell word after quote removal; ``$``-expansions are kept as written."""

    text: str
    expands: bool = False
    glob: bool = False
    quoted: bool = False
    subs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Op:
    """A control or redirection operator; ``fd`` is a redirection's explicit descriptor."""

    text: str
    fd: str = ""
    heredoc: str | None = None
    subs: tuple[str, ...] = ()


Token = Word | Op


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into words and operators; raise ``ShellSyntaxError`` if unbalanced."""
    return _Lexer(source).run(nested=False)


def shape(source: str) -> list[list[object]]:
    """The words and operators of ``source`` as plain data: two lines with the same shape
    run the same argv (``ls  -la`` and ``ls -la``); quoting, expansions and every
    operator, newlines included, count. Raises ``ShellSyntaxError`` like ``tokenize``."""
    return [
        ["word", t.text, t.expands, t.glob, t.quoted]
        if isinstance(t, Word)
        else ["op", t.text, t.fd, t.heredoc]
        for t in tokenize(source)
    ]


def expansion_subs(text: str, nesting: int = 0) -> tuple[str, ...]:
    """The command substitutions inside ``text`` read like an unquoted here-document."""
    _, _, subs = _Lexer(text, nesting=nesting).double_quoted(closed_by=None)
    return tuple(subs)


class _Lexer:
    def __init__(self, src: str, pos: int = 0, *, nesting: int = 0) -> None:
        if nesting > MAX_NESTING:
            raise ShellSyntaxError("substitutions are nested too deeply to read")
        self.src = src
        self.pos = pos
        self.nesting = nesting
        self.closed_at = -1

    def peek(self, n: int = 1) -> str:
        return self.src[self.pos : self.pos + n]

    def run(self, *, nested: bool) -> list[Token]:
        """Read tokens to the end, or (``nested``) to the ``)`` closing a substitution."""
        tokens: list[Token] = []
        pending: list[tuple[int, str, bool, bool]] = []  # heredocs awaiting their body
        depth = 0
        while self.pos < len(self.src):
            char = self.src[self.pos]
            if char in " \t":
                self.pos += 1
            elif self.peek(2) == "\\\n":
                self.pos += 2
            elif char == "#":
                while self.pos < len(self.src) and self.src[self.pos] != "\n":
                    self.pos += 1
            elif self.peek(2) in ("<(", ">("):
                tokens.append(self.word())
            elif char in _METACHARS:
                op = self.operator()
                if op.text == "(":
                    depth += 1
                elif op.text == ")":
                    if nested and depth == 0:
                        self.closed_at = self.pos - 1
                        return tokens
                    depth -= 1
                if op.text in ("<<", "<<-"):
                    pending.append(self.heredoc_start(tokens, op))
                    continue
                tokens.append(op)
                if op.text == "\n" and pending:
                    self.heredoc_bodies(tokens, pending)
                    pending.clear()
            else:
                word = self.word()
                if word.text.isdigit() and not word.quoted and self.peek() in ("<", ">"):
                    op = self.operator()
                    if op.text in ("<<", "<<-"):
                        pending.append(self.heredoc_start(tokens, op))
                    else:
                        tokens.append(replace(op, fd=word.text))
                    continue
                tokens.append(word)
        if nested:
            raise ShellSyntaxError("a command substitution is not closed")
        if pending:
            self.heredoc_bodies(tokens, pending)
        return tokens

    def operator(self) -> Op:
        for text in _OPERATORS:
            if self.src.startswith(text, self.pos):
                self.pos += len(text)
                return Op(";" if text == ";;" else text)
        raise AssertionError("unreachable: every metacharacter starts an operator")

    def heredoc_start(self, tokens: list[Token], op: Op) -> tuple[int, str, bool, bool]:
        while self.peek() in (" ", "\t"):
            self.pos += 1
        delimiter = self.word()
        if not delimiter.text and not delimiter.quoted:
            raise ShellSyntaxError("a here-document has no end marker")
        tokens.append(op)
        return len(tokens) - 1, delimiter.text, delimiter.quoted, op.text == "<<-"

    def heredoc_bodies(
        self, tokens: list[Token], pending: list[tuple[int, str, bool, bool]]
    ) -> None:
        for index, delimiter, quoted, strip_tabs in pending:
            lines: list[str] = []
            while self.pos < len(self.src):
                end = self.src.find("\n", self.pos)
                end = len(self.src) if end < 0 else end
                line = self.src[self.pos : end]
                self.pos = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            body = "\n".join(lines)
            op = tokens[index]
            assert isinstance(op, Op)
            # With an unquoted delimiter the body is expanded, so its $(...) run.
            subs = () if quoted else expansion_subs(body, self.nesting + 1)
            tokens[index] = replace(op, heredoc=body, subs=subs)
        self.pos = min(self.pos, len(self.src))

    def word(self) -> Word:
        """Read one word (quotes removed, expansions kept as written) or a ``<(...)``."""
        text: list[str] = []
        subs: list[str] = []
        expands = glob = quoted = brace = bracket = False
        start = self.pos
        if self.peek(2) in ("<(", ">("):
            self.pos += 2
            inner = self.substitution()
            return Word(self.src[start : self.pos], expands=True, subs=(inner,))
        while self.pos < len(self.src):
            char = self.src[self.pos]
            if char in _METACHARS:
                break
            if char == "\\":
                quoted = True
                nxt = self.src[self.pos + 1 : self.pos + 2]
                if nxt != "\n":
                    text.append(nxt)
                self.pos += 2
            elif char == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0:
                    raise ShellSyntaxError("a single quote is not closed")
                text.append(self.src[self.pos + 1 : end])
                quoted, self.pos = True, end + 1
            elif char == '"':
                self.pos += 1
                part, part_expands, part_subs = self.double_quoted()
                text.append(part)
                subs.extend(part_subs)
                quoted, expands = True, expands or part_expands
            elif char == "$" and self.peek(2) == "$'":
                text.append(self.ansi_c())
                quoted = True
            elif char in "$`":
                part, part_subs = self.expansion()
                text.append(part)
                subs.extend(part_subs)
                expands = expands or part != "$"
            else:
                # Unquoted {a,b} is brace expansion in bash (`bash -c '{rm,-rf,x}'`);
                # [ is a pattern only when a ] follows (a lone `[` is the test command).
                brace, bracket = brace or char == "{", bracket or char == "["
                glob = glob or char in "*?" or (brace and char == ",") or (bracket and char == "]")
                text.append(char)
                self.pos += 1
        joined = "".join(text)
        return Word(joined, expands=expands, glob=glob, quoted=quoted, subs=tuple(subs))

    def double_quoted(self, closed_by: str | None = '"') -> tuple[str, bool, list[str]]:
        """A double-quoted string's text (opening quote read), or to the end of the source."""
        text: list[str] = []
        subs: list[str] = []
        expands = False
        escapable = ("\\", "$", "`") + ((closed_by,) if closed_by else ())
        while self.pos < len(self.src):
            char = self.src[self.pos]
            if char == closed_by:
                self.pos += 1
                return "".join(text), expands, subs
            if char == "\\" and self.src[self.pos + 1 : self.pos + 2] in escapable:
                text.append(self.src[self.pos + 1])
                self.pos += 2
            elif self.peek(2) == "\\\n":
                self.pos += 2
            elif char in "$`":
                part, part_subs = self.expansion()
                text.append(part)
                subs.extend(part_subs)
                expands = expands or part != "$"
            else:
                text.append(char)
                self.pos += 1
        if closed_by is None:
            return "".join(text), expands, subs
        raise ShellSyntaxError("a double quote is not closed")

    def expansion(self) -> tuple[str, list[str]]:
        """Read ``$name``, ``${...}``, ``$(...)``, ``$((...))`` or a backtick substitution."""
        start = self.pos
        if self.src[self.pos] == "`":
            end, body = self.pos + 1, []
            while end < len(self.src) and self.src[end] != "`":
                if self.src[end] == "\\" and self.src[end + 1 : end + 2] in ("`", "\\", "$"):
                    end += 1
                body.append(self.src[end])
                end += 1
            if end >= len(self.src):
                raise ShellSyntaxError("a backtick substitution is not closed")
            self.pos = end + 1
            return self.src[start : self.pos], ["".join(body)]
        nxt = self.src[self.pos + 1 : self.pos + 2]
        if self.src.startswith("$((", self.pos):
            self.pos += 3
            return self.closing("((", "))", start)
        if nxt == "(":
            self.pos += 2
            inner = self.substitution()
            return self.src[start : self.pos], [inner]
        if nxt == "{":
            self.pos += 2
            return self.closing("{", "}", start)
        match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]").match(self.src, self.pos + 1)
        if match is None:
            self.pos += 1
            return "$", []
        self.pos = match.end()
        return self.src[start : self.pos], []

    def closing(self, opener: str, closer: str, start: int) -> tuple[str, list[str]]:
        """Skip to ``closer`` (nesting on ``opener``); substitutions inside are kept."""
        depth, pos = 1, self.pos
        while pos < len(self.src):
            if self.src.startswith(closer, pos):
                depth -= 1
                if depth == 0:
                    inner = self.src[self.pos : pos]
                    self.pos = pos + len(closer)
                    subs = expansion_subs(inner, self.nesting + 1)
                    return self.src[start : self.pos], list(subs)
                pos += len(closer)
            elif self.src.startswith(opener, pos):
                depth, pos = depth + 1, pos + len(opener)
            else:
                pos += 1
        raise ShellSyntaxError(f"a '{opener}' expansion is not closed")

    def substitution(self) -> str:
        """Read to the ``)`` that closes ``$(`` or ``<(`` (already read); return the body."""
        start = self.pos
        inner = _Lexer(self.src, self.pos, nesting=self.nesting + 1)
        inner.run(nested=True)
        self.pos = inner.pos
        return self.src[start : inner.closed_at]

    def ansi_c(self) -> str:
        """Decode a bash ``$'...'`` string (used to spell command names in escapes)."""
        end = self.pos + 2
        while end < len(self.src) and self.src[end] != "'":
            end += 2 if self.src[end] == "\\" else 1
        if end >= len(self.src):
            raise ShellSyntaxError("a $'...' string is not closed")
        body = self.src[self.pos + 2 : end]
        self.pos = end + 1
        return _ANSI_C.sub(_decode_escape, body)


def _decode_escape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "xu" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code[0] in "01234567":
        return chr(int(code, 8) & 0xFF)
    return _ESCAPES.get(code, code)
