"""The browser behind the browser tools: the system's Chromium, driven by Playwright.

``chromium`` finds the executable and the flags it runs with, ``service`` owns
the one browser process (launched on first use, closed when idle or on stop,
its memory watched), ``processes`` measures Chromium's process tree from
``/proc``, and ``reading`` turns a rendered page into text for the model.
Playwright itself is imported only when a browser tool first runs.
"""
