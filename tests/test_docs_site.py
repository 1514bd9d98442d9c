"""The documentation site: it builds strictly, every page of its nav is real, and
search leads a reader from "garage" or "home_assistant allow" to the key.

The site is built once per module with the installed MkDocs (the ``docs`` extra),
into a temporary folder, never into the checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_readme_links import nav_pages

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


Built = tuple[subprocess.CompletedProcess[str], Path]
"""The finished ``mkdocs build`` run and the folder it built the site in."""


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Run ``mkdocs build --strict`` once for the module."""
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"]
    run = subprocess.run(
        [*command, "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return run, site


def search_entries(build: Built) -> list[dict[str, Any]]:
    run, site = build
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    entries: list[dict[str, Any]] = index["docs"]
    return entries


def test_the_site_builds_strictly(build: Built) -> None:
    run, site = build
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    assert (site / "index.html").is_file()
    assert (site / "tools-and-security" / "index.html").is_file()


@pytest.mark.parametrize(
    "page", ["reference/configuration/", "tools-and-security/"], ids=["reference", "security"]
)
def test_search_finds_the_garage_switch_key_on_the_page(build: Built, page: str) -> None:
    """A search for "garage" or "home_assistant allow" reaches the key on both pages."""
    hits = []
    for entry in search_entries(build):
        if not entry["location"].startswith(page):
            continue
        text = f"{entry['title']} {entry['text']}"
        names_key = "[home_assistant] allow" in text or (
            "home_assistant" in text and re.search(r"\ballow\b", text) is not None
        )
        if names_key and "garage" in text.lower():
            hits.append(entry["location"])
    assert hits, f"no search entry of {page} names [home_assistant] allow and the garage"


def test_every_nav_page_exists_and_has_content() -> None:
    pages = nav_pages((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert "tools-and-security.md" in pages and "reference/configuration.md" in pages, pages
    for page in pages:
        path = DOCS / page
        assert path.is_file(), f"mkdocs.yml's nav names {page}, which is not in docs/"
        body = [
            line
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        ]
        assert len(" ".join(body)) > 200, f"docs/{page} is a placeholder: a heading and no text"
