"""Simple commands from shell tokens: split on ``;``, ``&&``, ``||``, ``|``, ``&``, newlines.

Each simple command keeps its words, its redirections, whether a pipe feeds it
(and which commands are upstream), and the function whose body it is in, so a
function calling itself (``:(){ :|:& };:``) can be told apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.security.shell.lexer import REDIRECT_OPS, Op, Word
from bot.security.shell.tables import normalise

_RESERVED = frozenset({"!", "if", "then", "elif", "else", "while", "until", "do", "fi", "done"})
_NON_COMMANDS = frozenset({"for", "case", "select", "esac", "in"})
_UPSTREAM_KEPT = 32  # enough to see `curl ... | ... | sh`; copying more is quadratic


@dataclass(slots=True)
class SimpleCommand:
    """One command of a line: words, redirections and what feeds its stdin."""

    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[Op, Word | None]] = field(default_factory=list)
    piped_in: bool = False
    upstream: tuple[str, ...] = ()
    function: str | None = None


def split_commands(tokens: Sequence[Word | Op]) -> tuple[list[SimpleCommand], set[str]]:
    """The simple commands in a token list (pipes and function bodies noted) and functions."""
    splitter = _Splitter(tokens)
    splitter.run()
    return splitter.simples, splitter.defined


class _Splitter:
    def __init__(self, tokens: Sequence[Word | Op]) -> None:
        self.tokens = tokens
        self.simples: list[SimpleCommand] = []
        self.current = SimpleCommand()
        self.pipeline: list[str] = []
        self.functions: list[tuple[str, int]] = []  # open bodies: (name, depth outside)
        self.defined: set[str] = set()
        self.depth = 0

    def run(self) -> None:
        tokens, index = self.tokens, 0
        while index < len(tokens):
            token = tokens[index]
            nxt = tokens[index + 1] if index + 1 < len(tokens) else None
            if isinstance(token, Op) and token.text in REDIRECT_OPS:
                target = nxt if token.heredoc is None and isinstance(nxt, Word) else None
                self.current.redirects.append((token, target))
                index += 1 if target is None else 2
            elif isinstance(token, Op):
                self.control(token)
                index += 1
            else:
                index = self.word(token, index)
        self.finish()

    def word(self, token: Word, index: int) -> int:
        """Take the word at ``index``; return the index of the next token to read."""
        words, plain = self.current.words, not token.quoted
        if not words and token.text == "function" and index + 1 < len(self.tokens):
            after = index + 2 + 2 * self.empty_parens(index + 2)
            return self.define(self.tokens[index + 1].text, after)
        if not words and plain and self.empty_parens(index + 1):
            return self.define(token.text, index + 3)
        if not words and plain and token.text in ("{", "}"):
            self.depth = self.depth + 1 if token.text == "{" else max(0, self.depth - 1)
            self.close_functions(keep_equal=token.text == "{")
            self.current.function = self.inside()
        elif not words and plain and token.text in _NON_COMMANDS:
            words.append(Word(":"))
            return index + (2 if token.text in ("for", "select") else 1)  # skip the loop variable
        elif words or not plain or token.text not in _RESERVED:
            words.append(token)
        return index + 1

    def control(self, token: Op) -> None:
        piped = token.text in ("|", "|&")
        if piped:
            words = self.current.words
            self.pipeline.append(normalise(words[0].text) if words else "")
        else:
            self.pipeline = []
        self.finish()
        if token.text == "(":
            self.depth += 1
        elif token.text == ")":
            self.depth = max(0, self.depth - 1)
            self.close_functions(keep_equal=False)
        upstream = tuple(self.pipeline[-_UPSTREAM_KEPT:])
        self.current = SimpleCommand(piped_in=piped, upstream=upstream, function=self.inside())

    def define(self, name: str, after: int) -> int:
        self.functions.append((name, self.depth))
        self.defined.add(name)
        return after

    def empty_parens(self, at: int) -> bool:
        pair = self.tokens[at : at + 2]
        return [t.text if isinstance(t, Op) else "" for t in pair] == ["(", ")"]

    def close_functions(self, *, keep_equal: bool) -> None:
        self.functions = [f for f in self.functions if f[1] < self.depth or keep_equal]

    def inside(self) -> str | None:
        """The function whose body is open here, if any."""
        if self.functions and self.functions[-1][1] < self.depth:
            return self.functions[-1][0]
        return None

    def finish(self) -> None:
        if self.current.words or self.current.redirects:
            self.simples.append(self.current)
        self.current = SimpleCommand()
