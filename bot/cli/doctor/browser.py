"""The browser check: which Chromium the browser tools would drive, or why they are off.

Nothing is launched: the executable is found as the tools find it, asked for
its version (``--version``), and Playwright's presence is looked up without
importing it. The browser is optional, so its absence is information, not a
failure; a configured executable that is not there is one.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import re

from bot.browser.chromium import EXTRA_HINT, INSTALL_HINT, find_chromium, has_playwright
from bot.cli.doctor.findings import Finding, command_output
from bot.config.browser import BrowserConfig

VERSION_TIMEOUT_S = 10.0
_VERSION = re.compile(r"(Chrom\w*) (\d+[\d.]*)")


async def browser(config: BrowserConfig) -> Finding:
    """Whether the browser tools are offered, and with which Chromium."""
    if not config.enabled:
        return Finding("browser", "info", "browser tools: off ([browser] enabled = false)")
    found = find_chromium(config)
    playwright = has_playwright()
    if found.path is None:
        if config.executable:
            return Finding("browser", "fail", f"browser tools: {found.problem}", INSTALL_HINT)
        if not playwright:
            return Finding(
                "browser",
                "info",
                "browser tools: not installed (optional)",
                f"{EXTRA_HINT} and {INSTALL_HINT}",
            )
        return Finding("browser", "warn", f"browser tools: off, {found.problem}", INSTALL_HINT)
    version = await _version(found.path)
    chromium = f"{version} ({found.path})" if version else found.path
    if not playwright:
        text = f"browser tools: off, Playwright is not installed ({chromium} is)"
        return Finding("browser", "info", text, EXTRA_HINT)
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        chromium += f", Playwright {importlib.metadata.version('playwright')}"
    return Finding(
        "browser",
        "ok",
        f"browser tools: {chromium}; at most {config.max_memory_mib} MiB, "
        f"closed after {config.idle_s:g} s unused",
    )


async def _version(path: str) -> str:
    """``Chromium 150.0.7871.100`` from ``path --version``, or "" when it does not say."""
    match = _VERSION.search(await command_output([path, "--version"], VERSION_TIMEOUT_S))
    return f"{match.group(1)} {match.group(2)}" if match else ""
