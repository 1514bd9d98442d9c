"""What an idle ``pinclaw run`` has loaded: nothing a configuration does not use.

The daemon's idle memory is mostly code, so a module that only a rare path or an
unused table needs is loaded when that path runs. This runs the real
``pinclaw run`` on the fake Telegram with a configuration without hardware, and
reads the process's ``sys.modules`` once it is connected and idle (through a
``sitecustomize`` of the test's own, which writes them when asked).
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.daemon_harness import DaemonProcess, telegram_run_config
from tests.fake_llm import FakeLLM
from tests.fake_telegram import FakeTelegram

OWNER = 7001
# Loaded by a configuration with [hardware] tables, a sensor chart, a config error
# with a typo, or a file_edit whose snippet does not match; never by an idle start.
NOT_AT_IDLE = (
    "bot.hardware",
    "bot.hardware.gpio",
    "bot.hardware.i2c",
    "bot.hardware.sensors",
    "bot.hardware.history",
    "bot.hardware.chart",
    "statistics",
    "difflib",
)

SITECUSTOMIZE = """
import os, sys, threading, time
def _dump():
    ask = os.environ["IDLE_MODULES_ASK"]
    while not os.path.exists(ask):
        time.sleep(0.05)
    with open(ask + ".out", "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
threading.Thread(target=_dump, daemon=True).start()
"""


def test_an_idle_daemon_without_hardware_loads_no_hardware_module(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    ask = tmp_path / "ask"
    env = {"PYTHONPATH": str(hook), "IDLE_MODULES_ASK": str(ask)}
    daemon = DaemonProcess(tmp_path / "home", telegram_run_config(llm, telegram, OWNER), env)
    daemon.start()
    try:
        daemon.wait_log("running with telegram", timeout=60)
        daemon.wait_log("telegram connected", timeout=30)
        ask.touch()
        out = Path(f"{ask}.out")
        deadline = time.monotonic() + 20
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        loaded = set(out.read_text().split())
    finally:
        daemon.terminate()
    assert "bot.daemon.main" in loaded and "tools.files" in loaded  # the hook saw the daemon
    assert sorted(m for m in NOT_AT_IDLE if m in loaded) == []
