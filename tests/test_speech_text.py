"""What a spoken reply says (``bot.media.speech.speakable``), and that the daemon loads
no speech code while ``[speech]`` is off."""

from __future__ import annotations

import subprocess
import sys

from bot.media.speech import speakable


def test_markdown_becomes_plain_words_to_say() -> None:
    reply = (
        "# Porch\n\n"
        "The **light** is _on_; see [the log](https://home.example/log) or "
        "https://home.example/cam/1.\n"
        "- `porch`: on\n"
        "> quoted\n\n"
        "```sh\nlights --porch off\n```\n"
        "| room | state |\n|---|---|\n| porch | on |\n"
        "---\n"
        "![a photo](https://x.example/p.jpg) Done ~~maybe~~."
    )
    assert speakable(reply) == (
        "Porch\n"
        "The light is on; see the log or home.example.\n"
        "porch: on\n"
        "quoted\n"
        "room, state\n"
        "porch, on\n"
        "a photo Done maybe."
    )
    assert speakable("```\nonly code\n```") == ""


def test_the_daemon_loads_no_speech_code_until_speech_is_set_up() -> None:
    probe = (
        "import sys, bot.daemon.main, bot.daemon.router, bot.daemon.app\n"
        "print(sorted(m for m in ('bot.daemon.voice', 'bot.media.speech') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
