"""Telegram HTML rendering and splitting, checked with the fake's rebuild of Telegram's parser."""

from __future__ import annotations

import pytest

from channels.telegram.format import MAX_TEXT, measure, split_reply, to_html, visible_text
from tests.fake_telegram import parse_html, utf16_len

SAMPLES = [
    "plain text",
    "AT&T <b>not bold</b> 1 > 0 &amp; &lt;",
    "**bold** *italic* _also italic_ ~~gone~~ `x < y && z`",
    '**bold with `code` and [a link](https://example.org/?a=1&b="2")**',
    "[not a web address](javascript:alert(1)) and [mail](mailto:ada@example.org)",
    "# Heading with <angle> & amp\n## Second *level*",
    "- item one\n- item **two**\n  - nested & <deep>",
    "```python\nif a < b and b > c:\n    print('&')\n```",
    "```\nno language\n```\ntext after",
    "emoji 😀🎉 before **bold 😀** and `👍`",
    "quotes \"double\" and 'single' stay",
]


@pytest.mark.parametrize("markdown", SAMPLES)
def test_telegram_accepts_every_rendering_and_shows_what_visible_text_says(
    markdown: str,
) -> None:
    rendered = to_html(markdown)
    assert parse_html(rendered).text == visible_text(rendered)


def test_each_element_becomes_the_tag_telegram_knows() -> None:
    rendered = to_html("# Title\n**b** *i* ~~s~~ `c<` [l](https://x.org/?q=1&r=2)")
    assert rendered == (
        "<b>Title</b>\n<b>b</b> <i>i</i> <s>s</s> <code>c&lt;</code> "
        '<a href="https://x.org/?q=1&amp;r=2">l</a>'
    )
    parsed = parse_html(rendered)
    assert [e["type"] for e in parsed.entities] == [
        "bold",
        "bold",
        "italic",
        "strikethrough",
        "code",
        "text_link",
    ]
    assert parsed.entities[-1]["url"] == "https://x.org/?q=1&r=2"


def test_code_blocks_keep_their_language_and_unsafe_links_show_their_address() -> None:
    block = parse_html(to_html("```rust\nlet x = a < b;\n```"))
    assert block.text == "let x = a < b;"
    assert block.entities == [{"type": "pre", "offset": 0, "length": 14, "language": "rust"}]
    assert to_html("[x](javascript:run)") == "x (javascript:run)"


def test_a_long_escape_heavy_reply_is_split_within_the_limit_with_balanced_fences() -> None:
    prose = "\n\n".join(f"Note n{i:03d}: a < b && c > d." for i in range(200))
    code = "\n".join(f"if (a{i:03d} < b && c > d) {{ x <<= 1; }} // c{i:03d}" for i in range(250))
    text = f"{prose}\n\n```cpp\n{code}\n```\n\nThe end & goodbye."
    pieces = split_reply(text)
    assert len(pieces) >= 4
    shown = []
    for piece in pieces:
        parsed = parse_html(piece.html)  # balanced tags, or this raises
        assert utf16_len(parsed.text) <= MAX_TEXT  # what Telegram counts
        assert utf16_len(piece.source) <= MAX_TEXT  # the plain-text fallback fits too
        assert piece.source.count("```") % 2 == 0  # a cut fence is closed and reopened
        assert piece.html == to_html(piece.source)
        shown.append(parsed.text)
    everything = "\n".join(shown)
    for i in range(200):
        assert everything.count(f"n{i:03d}:") == 1
    for i in range(250):
        assert everything.count(f"// c{i:03d}") == 1
    assert everything.endswith("The end & goodbye.")
    code_pieces = [p for p in pieces if "// c" in p.source]
    assert len(code_pieces) >= 2 and all(p.source.startswith("```cpp") for p in code_pieces[1:])


def test_escaping_does_not_count_against_the_limit() -> None:
    text = "```\n" + "&&<<" * 1000 + "\n```"
    (piece,) = split_reply(text)  # 4,000 characters shown...
    assert utf16_len(piece.html) > 4 * MAX_TEXT  # ...from HTML four times the limit
    assert parse_html(piece.html).text == "&&<<" * 1000


def test_limits_count_utf16_units() -> None:
    pieces = split_reply(" ".join(["😀"] * 3000))  # 8,999 UTF-16 units
    assert len(pieces) == 3
    assert all(utf16_len(parse_html(p.html).text) <= MAX_TEXT for p in pieces)
    assert sum(p.source.count("😀") for p in pieces) == 3000


def test_the_plain_fallback_fits_even_when_links_hide_long_addresses() -> None:
    link = "[doc](https://example.org/" + "x" * 80 + ")"
    pieces = split_reply("\n".join([link] * 200))
    assert all(measure(p.source) == utf16_len(p.source) <= MAX_TEXT for p in pieces)
    assert sum(parse_html(p.html).text.count("doc") for p in pieces) == 200


def test_an_empty_reply_has_no_pieces() -> None:
    assert split_reply("") == [] and split_reply(" \n\n ") == []
