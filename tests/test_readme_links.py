"""README is the front door: short, linking every page of the documentation site, no dead links.

The site's pages are the ``nav`` of mkdocs.yml, read with a small line parser
(mkdocs.yml carries a ``!!python/name:`` tag that a safe YAML loader refuses).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 260

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def nav_pages(mkdocs_yml: str) -> list[str]:
    """The Markdown files named in the ``nav:`` block, in order."""
    pages: list[str] = []
    in_nav = False
    for line in mkdocs_yml.splitlines():
        if re.match(r"^nav:\s*$", line):
            in_nav = True
            continue
        if in_nav and line and not line[0].isspace() and not line.startswith("-"):
            break  # the next top-level key
        if in_nav:
            found = re.match(r"^\s*-\s+(?:[^:]+:\s*)?(\S+\.md)\s*$", line)
            if found:
                pages.append(found.group(1))
    return pages


def links(markdown: str) -> list[str]:
    """Every inline link and image target, outside code fences."""
    return LINK.findall(FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """The anchor GitHub (and MkDocs' default toc, for plain headings) gives a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The anchors of a Markdown file's headings."""
    return {slug(h) for h in HEADING.findall(FENCE.sub("", markdown))}


def test_the_nav_parser_finds_every_page_and_each_exists() -> None:
    pages = nav_pages((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert "index.md" in pages
    assert "reference/configuration.md" in pages
    assert len(pages) == len(set(pages)) >= 10, pages
    missing = [page for page in pages if not (ROOT / "docs" / page).is_file()]
    assert missing == [], f"mkdocs.yml's nav names pages that do not exist: {missing}"


def test_the_parsers_on_a_sample() -> None:
    sample = (
        "site_name: x\nnav:\n  - Home: index.md\n  - Using it:\n      - a.md\n"
        "      - B page: sub/b.md\nmarkdown_extensions:\n  - c.md\n"
    )
    assert nav_pages(sample) == ["index.md", "a.md", "sub/b.md"]
    text = "\n".join(
        [
            "# T",
            "",
            '[a](x.md#y) ![i](p.png "t")',
            "",
            "```toml",
            "[t](no.md)",
            "```",
            "## The `x` page",
        ]
    )
    assert links(text) == ["x.md#y", "p.png"]
    assert anchors(text) == {"t", "the-x-page"}


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines; the front door stays under {MAX_LINES}: "
        "move the detail to a page under docs/"
    )


def test_readme_links_every_page_of_the_site() -> None:
    pages = nav_pages((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    targets = {target.split("#", 1)[0] for target in links(README.read_text(encoding="utf-8"))}
    unlinked = [page for page in pages if f"docs/{page}" not in targets]
    assert unlinked == [], f"README.md does not link these pages of the site: {unlinked}"


def test_every_relative_link_in_readme_reaches_a_file_and_heading() -> None:
    text = README.read_text(encoding="utf-8")
    broken: list[str] = []
    for target in links(text):
        if SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path if path else README
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text("utf-8")):
            broken.append(f"{target}: {file.name} has no heading #{anchor}")
    assert broken == [], "README.md has broken links:\n" + "\n".join(broken)
