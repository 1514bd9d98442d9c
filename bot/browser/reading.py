"""A rendered page as text for the model: title, where it is, its visible text, its links.

The text is what the page shows (``innerText`` of its main part, or of the
whole body): text the page hides with CSS is left out, as a person would not
see it either. Links are numbered ``[1] text → url`` so the model can open
one by its address; only http(s) links that are on screen and have a label
are listed, each once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINKS = 100
MAX_LABEL = 120

READ_PAGE = """
([maxLinks, maxLabel]) => {
  const main = document.querySelector("main, [role=main]");
  const root = main && main.innerText.trim() ? main : document.body;
  const text = root ? root.innerText : "";
  const links = [];
  const seen = new Set();
  for (const a of document.querySelectorAll("a[href]")) {
    if (links.length >= maxLinks) break;
    const href = a.href;
    if (!/^https?:/i.test(href) || !a.getClientRects().length) continue;
    const label = (a.innerText || a.getAttribute("aria-label") || a.title || "")
      .replace(/\\s+/g, " ").trim().slice(0, maxLabel);
    const key = label + "\\u0000" + href;
    if (!label || seen.has(key)) continue;
    seen.add(key);
    links.push([label, href]);
  }
  return { text, links };
}
"""


@dataclass(frozen=True, slots=True)
class PageReading:
    """What ``READ_PAGE`` found on a page."""

    text: str
    links: list[tuple[str, str]]


def parse_reading(found: object) -> PageReading:
    """``READ_PAGE``'s answer, checked (a page cannot make it something else)."""
    text, links = "", []
    if isinstance(found, dict):
        raw_text = found.get("text")
        text = raw_text if isinstance(raw_text, str) else ""
        for item in found.get("links") or []:
            if (
                isinstance(item, list)
                and len(item) == 2
                and all(isinstance(part, str) for part in item)
            ):
                links.append((item[0], item[1]))
    return PageReading(text, links)


def tidy(text: str, max_chars: int) -> tuple[str, bool]:
    """Lines stripped of trailing space, at most one empty line in a row; cut at
    ``max_chars`` (and whether it was)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    joined = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if len(joined) <= max_chars:
        return joined, False
    return joined[:max_chars], True


def page_text(
    *,
    title: str,
    url: str,
    redirects: int,
    reading: PageReading,
    refused: list[str],
    max_chars: int,
) -> str:
    """The whole result of ``browser_open``."""
    head = [f"Title: {' '.join(title.split())}"] if title.strip() else []
    after = f" (after {redirects} redirect(s))" if redirects else ""
    head.append(f"URL: {url}{after}")
    text, cut = tidy(reading.text, max_chars)
    if cut:
        head.append(f"[cut: only the first {max_chars} characters of the text are shown]")
    if refused:
        head.append(
            f"[the network policy refused {len(refused)} request(s) of this page: "
            + "; ".join(refused[:5])
            + ("; …" if len(refused) > 5 else "")
            + "]"
        )
    parts = ["\n".join(head), text or "[the page shows no text]"]
    if reading.links:
        numbered = [f"[{n}] {label} → {href}" for n, (label, href) in enumerate(reading.links, 1)]
        parts.append("Links:\n" + "\n".join(numbered))
    return "\n\n".join(parts)
