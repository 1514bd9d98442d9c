"""Rules for lines that change variables which keep the workspace's settings switched off.

An unasked command gets ``shell.neutral``'s variables (git's overrides, pagers,
``LESSSECURE``...). A line that sets, unsets, unexports or shadows one of
them, or ``HOME``, or any ``GIT_*`` variable (``shell.neutral.protected``),
could undo them before a reading command runs, so it asks. Every way a shell
line names a variable is checked: assignments (``Walker.assign``), ``unset``,
``read``, ``getopts``, ``mapfile``, ``printf -v``, ``let``, ``export -n`` and
``declare``/``local`` (``shell.rules``), ``env -u``/``-i`` and ``exec -c``
(``Walker._unwrap``), a ``for`` loop's variable, ``$((NAME = ...))`` and
``${NAME:=...}``. A name only known when the line runs asks too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.security.shell.lexer import Op, Word
from bot.security.shell.neutral import protected
from bot.security.shell.rules import positional, rule
from bot.security.shell.tables import DANGEROUS_VARS

if TYPE_CHECKING:
    from bot.security.shell.call import Call, Walker

_ARITHMETIC = re.compile(r"\$\(\((.*?)\)\)", re.S)
_ASSIGNS = re.compile(r"(?<![=!<>])(?:[-+*/%&|^]|<<|>>)?=(?!=)")
_LVALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\]\s*)?(?:[-+*/%&|^]|<<|>>)?=(?!=)")
_DEFAULTING = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=")
_NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)")
_VALUES = {  # options whose value is not a variable's name
    "read": {"-d", "-i", "-n", "-N", "-p", "-t", "-u"},
    "mapfile": {"-d", "-n", "-O", "-s", "-u", "-C", "-c"},
    "readarray": {"-d", "-n", "-O", "-s", "-u", "-C", "-c"},
    "unset": set(),
}
DYNAMIC = "it sets or removes a variable whose name is only known when it runs"


def changes(w: Walker, name: str, *, setting: bool = True) -> None:
    """The line sets (or, ``setting`` False, removes or hides) the variable ``name``."""
    if setting and name in DANGEROUS_VARS:
        w.add("high", f"setting {name} changes which programs or code later commands run")
    if protected(name):
        w.add(
            "medium",
            f"changing {name} changes which settings git and other programs read, "
            "and so what they run",
        )


def name_word(w: Walker, word: Word, *, setting: bool = True) -> None:
    """A word that names a variable (``read WORD``; not ``setting``: ``unset WORD``)."""
    text = word.text
    match = _NAME.match(text)
    if word.expands or word.subs or match is None:
        if not text.startswith("-"):
            w.add("medium", DYNAMIC)
        return
    changes(w, match[1], setting=setting)


@rule("unset", "read", "mapfile", "readarray")
def _names(w: Walker, call: Call) -> None:
    values = _VALUES[call.name]
    args = list(call.args)
    words = iter(args)
    names: list[Word] = []
    for word in words:
        if word.text in values:
            next(words, None)
        elif word.text in ("-a", "-v") and call.name in ("read", "unset"):
            pass  # -a NAME: the next word is a name too; unset -v: variables
        elif word.text.startswith("-") and len(word.text) > 1 and not word.expands:
            continue
        else:
            names.append(word)
    if call.name in ("mapfile", "readarray"):
        names = names[-1:] or [Word("MAPFILE")]
    if call.name == "unset" and any(a.text == "-f" for a in args):
        names = []  # functions, not variables
    for word in names:
        name_word(w, word, setting=call.name != "unset")
    w.rate(call)


@rule("getopts")
def _getopts(w: Walker, call: Call) -> None:
    words = positional(call.args)
    if len(words) > 1:
        name_word(w, words[1])
    w.rate(call)


@rule("printf")
def _printf(w: Walker, call: Call) -> None:
    args = list(call.args)
    for at, word in enumerate(args[:-1]):
        if word.text == "-v":
            name_word(w, args[at + 1])
    w.rate(call)


@rule("let")
def _let(w: Walker, call: Call) -> None:
    for word in call.args:
        arithmetic(w, word.text, dynamic=word.expands)
    w.rate(call)


def arithmetic(w: Walker, body: str, *, dynamic: bool = False) -> None:
    """Arithmetic that may assign: ``NAME = 1``, or a name built when it runs (``$v = 1``)."""
    for match in _LVALUE.finditer(body):
        changes(w, match[1])
    if _ASSIGNS.search(body) and ("$" in body or dynamic):
        w.add("medium", DYNAMIC)


def tokens(w: Walker, found: Sequence[Word | Op]) -> None:
    """What a whole line's tokens assign that no command's rule sees: loops, expansions."""
    for at, token in enumerate(found):
        if isinstance(token, Op):
            if token.heredoc is not None:
                expansions(w, token.heredoc)
            continue
        if token.expands:
            expansions(w, token.text)
        loop = token.text in ("for", "select") and not token.quoted
        following = found[at + 1] if at + 1 < len(found) else None
        if loop and isinstance(following, Word):
            name_word(w, following)


def expansions(w: Walker, text: str) -> None:
    """``$((NAME = ...))`` and ``${NAME:=...}`` in a word or a here-document."""
    if "$" not in text:
        return
    for match in _ARITHMETIC.finditer(text):
        arithmetic(w, match[1])
    for match in _DEFAULTING.finditer(text):
        changes(w, match[1])
