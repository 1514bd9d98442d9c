"""``pinclaw triggers list | add | remove | history | test``: the installed command, run as a
person would, in a throw-away HOME, on a config with a door sensor (mock pins) and one
config trigger. What a running daemon does with them is in test_triggers_chat.py.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from bot.store.db import Database
from bot.triggers.spec import Trigger
from bot.triggers.store import TriggerStore
from tests.cli_helpers import one_line, run, write_config

CONFIG = """
[provider]
kind = "ollama"
model = "m"

[web]
listen = "127.0.0.1:18765"

[hardware]
pin_factory = "mock"

[hardware.gpio.door_sensor]
pin = 27
kind = "input"
pull_up = true

[hardware.gpio.porch_light]
pin = 17

[[triggers]]
name = "bell"
on = "webhook"
secret = "bell-secret-0123456789abcdef"
say = "Ding: {body}"
"""
DOOR = ("triggers", "add", "door", "--on", "gpio:door_sensor", "--say", "Door is {state}",
        "--when", "on", "--cooldown", "5m", "--to", "log")  # fmt: skip


@pytest.fixture
def config(home: Path) -> Path:
    return write_config(home, CONFIG)


def stored(home: Path) -> list[Trigger]:
    """The triggers in the database, read as the daemon reads them."""

    async def read() -> list[Trigger]:
        db = Database(home / ".pinclaw" / "pinclaw.db")
        await db.open()
        try:
            store = TriggerStore(db)
            await store.setup()
            return await store.triggers()
        finally:
            await db.close()

    return asyncio.run(read())


def test_add_list_and_remove_a_gpio_trigger(home: Path, config: Path) -> None:
    added = run(home, *DOOR)
    listed = run(home, "triggers", "list")
    [door] = stored(home)
    removed = run(home, "triggers", "remove", "door")
    after = run(home, "triggers", "list")
    whole = "door: on gpio:door_sensor, when on, say 'Door is {state}', to log, cooldown 5m"
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[0] == f"Added the trigger {whole}."
    assert listed.stdout.splitlines() == [
        f"bell: on webhook, say 'Ding: {{body}}', to owner  [config file {config}]",
        f"{whole}  [added with pinclaw triggers add]",
    ]
    assert (door.made_by, door.creator_id, door.cooldown_s) == ("cli", "owner", 300)
    assert removed.stdout == "Removed the trigger door.\n"
    assert "door" not in after.stdout and stored(home) == []


def test_a_webhook_gets_a_secret_shown_once_with_a_curl_line(home: Path, config: Path) -> None:
    added = run(home, "triggers", "add", "parcel", "--on", "webhook", "--say", "Parcel: {body}")
    listed = run(home, "triggers", "list")
    [parcel] = stored(home)
    assert added.returncode == 0, added.stderr
    shown = re.search(r"^Its secret \(shown only now\): (\S+)$", added.stdout, re.MULTILINE)
    assert shown is not None and shown[1] == parcel.secret and len(parcel.secret) >= 32
    curl = f"curl -X POST -H 'Authorization: Bearer {parcel.secret}' -d 'hello' "
    assert f"Try it: {curl}http://127.0.0.1:18765/hooks/parcel" in added.stdout
    assert parcel.secret not in listed.stdout
    assert run(home, "triggers", "add", "other", "--on", "webhook", "--say", "x").returncode == 0
    assert stored(home)[1].secret != parcel.secret  # a new secret for each hook


def test_a_given_secret_is_kept_and_not_printed(home: Path, config: Path) -> None:
    secret = "my-own-secret-0123456789"
    added = run(home, "triggers", "add", "hook", "--on", "webhook", "--say", "x",
                "--secret", secret, "--signature-header", "X-Signature")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "shown only now" not in added.stdout
    assert "HMAC-SHA256" in added.stdout and "X-Signature" in added.stdout
    [hook] = stored(home)
    assert (hook.secret, hook.signature_header) == (secret, "X-Signature")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--on", "gpio:garage", "--say", "x"), "there is no GPIO device 'garage'"),
        (("--on", "gpio:porch_light", "--say", "x"), "porch_light is an output"),
        (("--on", "gpio:door_sensor", "--say", "x", "--pattern", "a"), "pattern: only a serial"),
        (("--on", "gpio:door_sensor", "--say", "x", "--for", "soon"), "for: the duration 'soon'"),
        (("--on", "sensor:greenhouse.temperature", "--say", "x", "--when", "below 5"),
         "there is no sensor 'greenhouse'"),
        (("--on", "serial:arduino", "--say", "x", "--pattern", "x"),
         "there is no serial port 'arduino'"),
        (("--on", "ha:cover.garage", "--say", "x"), "Home Assistant is not configured"),
        (("--on", "gpio:door_sensor", "--say", "x", "--to", "discord:1"),
         "the channel 'discord' is not enabled"),
        (("--on", "doorbell", "--say", "x"), "'doorbell' is not an event source"),
    ],
    ids=["no-device", "output", "wrong-key", "duration", "sensor", "serial", "ha", "target", "on"],
)  # fmt: skip
def test_what_cannot_work_here_is_one_line_and_exit_1(
    home: Path, config: Path, argv: tuple[str, ...], says: str
) -> None:
    done = run(home, "triggers", "add", "probe", *argv)
    assert done.returncode == 1
    assert says in one_line(done.stderr)
    assert done.stdout == ""
    assert stored(home) == []


def test_names_are_unique_and_config_triggers_stay(home: Path, config: Path) -> None:
    assert run(home, *DOOR).returncode == 0
    twice = run(home, *DOOR)
    shadow = run(home, "triggers", "add", "bell", "--on", "gpio:door_sensor", "--say", "x")
    keep = run(home, "triggers", "remove", "bell")
    missing = run(home, "triggers", "remove", "nope")
    untested = run(home, "triggers", "test", "nope")
    assert (twice.returncode, shadow.returncode, keep.returncode) == (1, 1, 1)
    assert "already a trigger called 'door'" in one_line(twice.stderr)
    assert "'bell' is already a trigger of the config file" in one_line(shadow.stderr)
    assert f"'bell' is defined in the config file {config}" in one_line(keep.stderr)
    assert "there is no trigger called 'nope'" in one_line(missing.stderr)
    assert untested.returncode == 1 and "no trigger called 'nope'" in one_line(untested.stderr)
    assert [t.name for t in stored(home)] == ["door"]


def test_test_records_a_firing_the_daemon_will_send_and_history_shows_it(
    home: Path, config: Path
) -> None:
    assert run(home, *DOOR).returncode == 0
    empty = run(home, "triggers", "history")
    tested = run(home, "triggers", "test", "door")
    bell = run(home, "triggers", "test", "bell")
    history = run(home, "triggers", "history")
    only_door = run(home, "triggers", "history", "door")
    assert empty.stdout == "No firings yet.\n"
    assert tested.returncode == 0, tested.stderr
    assert tested.stdout.splitlines()[1:] == [
        "It says: Door is on",
        "To: log. A running PinClaw sends it within seconds; otherwise it is sent when "
        "PinClaw next starts.",
    ]
    assert "It says: Ding: " in bell.stdout and "pinclaw triggers test" in bell.stdout
    lines = history.stdout.splitlines()
    assert len(lines) == 2 and "  bell  test  pending  - " in lines[0]  # newest first
    assert "  door  test  pending  - door_sensor turned on" in lines[1]
    assert "pinclaw triggers test" in lines[1]
    assert only_door.stdout.splitlines() == lines[1:]
