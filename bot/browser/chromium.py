"""Which Chromium the browser tools run, and the switches it runs with.

PinClaw never downloads a browser (no ``playwright install``): it drives the
system's, Debian's ``chromium`` or Raspberry Pi OS's ``chromium-browser``, or
the one ``[browser] executable`` names. Only the standard library is imported
here, so ``pinclaw doctor`` and the tool set can ask cheaply.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass

from bot.config.browser import BrowserConfig

NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = "sudo apt install chromium (on Raspberry Pi OS before Bookworm: chromium-browser)"
EXTRA_HINT = "pip install 'pinclaw[browser]'"


@dataclass(frozen=True, slots=True)
class Found:
    """The Chromium to run (``path``), or why there is none (``problem``, a sentence)."""

    path: str | None
    problem: str = ""
    configured: bool = False


def find_chromium(config: BrowserConfig) -> Found:
    """The configured executable if it can run, else the first of ``NAMES`` on the PATH."""
    if config.executable:
        path = os.path.expanduser(config.executable)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return Found(path, configured=True)
        located = shutil.which(path)
        if located is not None:
            return Found(located, configured=True)
        return Found(None, f"[browser] executable {config.executable} is not a program")
    for name in NAMES:
        located = shutil.which(name)
        if located is not None:
            return Found(located)
    return Found(None, "no Chromium found (chromium or chromium-browser on the PATH)")


def has_playwright() -> bool:
    """Whether Playwright for Python is installed (without importing it)."""
    return importlib.util.find_spec("playwright") is not None


def writable_code_refused() -> bool:
    """Whether this process may not map memory both writable and executable, as under
    systemd's ``MemoryDenyWriteExecute=yes`` (PinClaw's unit sets it) or the kernel's
    ``PR_SET_MDWE``: JavaScript engines must then run without their compiler (JIT)."""
    import mmap

    try:
        block = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except OSError:
        return True
    block.close()
    return False


def switches(config: BrowserConfig, browser_id: str, *, jitless: bool = False) -> list[str]:
    """Chromium's command-line switches beyond Playwright's own.

    Memory: V8's heap in each renderer is held to half of ``max_memory_mib`` and
    at most two renderer processes run, so a page cannot multiply itself; the
    hard cap is the service's watch over the whole process tree. ``jitless``:
    V8 interprets JavaScript instead of compiling it (slower, no WebAssembly),
    for a process that may not make memory executable. Network: nothing may
    leave outside the proxy: WebRTC may not send UDP on its own, QUIC is off
    (it would not use the proxy), and nothing is looked up ahead.
    """
    from bot.browser.processes import marker

    heap = max(64, config.max_memory_mib // 2)
    return [
        marker(browser_id),
        f"--js-flags=--max-old-space-size={heap}" + (" --jitless" if jitless else ""),
        "--renderer-process-limit=2",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--dns-prefetch-disable",
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        "--disable-background-networking",
        "--no-first-run",
        "--no-default-browser-check",
        "--mute-audio",
    ]
