"""How a question becomes a safe keyword search: FTS5 terms and substring terms.

Used by the store (which runs the search) and by recall (which merges its hits
with vector hits), so neither has to import the other.
"""

from __future__ import annotations

import re

_FTS_TERMS = 16
_LIKE_TERMS = 3
# Words too common to say what a question is about.
_STOP_TEXT = """
a about am an and any are as at be been but by can could did do does for from had has have he
her him his how i if in is it its me my no not of on or our she so that the their them then there
these they this to us was we were what when where which who why will with would you your
"""
_STOP_WORDS = frozenset(_STOP_TEXT.split())
# Runs of letters and digits, as the unicode61 tokenizer splits text ("_" separates too).
_WORD = re.compile(r"[^\W_]+")


def _words(query: str) -> list[str]:
    """The query's distinct words worth searching for, longest first."""
    words: dict[str, str] = {}
    for word in _WORD.findall(query):
        folded = word.casefold()
        # One letter says little, except in scripts where one character is a word.
        short = len(folded) < 2 and folded.isascii()
        if not short and folded not in _STOP_WORDS:
            words.setdefault(folded, word)
    return sorted(words.values(), key=len, reverse=True)


def fts_query(query: str) -> str:
    """An FTS5 query matching any word of ``query`` in key or content; "" if none.

    Every word becomes a quoted string, so no user text can be read as FTS5
    syntax (operators, column filters, NEAR, quotes). Words of four letters or
    more also match as prefixes ("coffee" finds "coffees"). Only the longest 16
    words are kept, so a pasted page cannot make one search scan the whole index.
    """
    terms = []
    for word in _words(query)[:_FTS_TERMS]:
        quoted = '"' + word.replace('"', '""') + '"'
        terms.append(quoted + "*" if len(word) >= 4 else quoted)
    # The category column is there for filtering, not for matching what people say.
    return "{key content} : (" + " OR ".join(terms) + ")" if terms else ""


def like_terms(query: str) -> list[str]:
    """What a substring search looks for: the longest words, or the bare text if it has none."""
    words = _words(query)[:_LIKE_TERMS]
    if words:
        return words
    text = query.strip()[:100]
    # Text without letters or digits (emoji, say) is looked for as it is; punctuation is not.
    return [text] if text and not text.isascii() and not _WORD.search(text) else []
