"""``pinclaw doctor``: run as a person runs it, against the fake model and the fake platforms.

The command runs as a subprocess with a throw-away HOME (and its own
``XDG_CONFIG_HOME``, so no real systemd unit is seen); the channel checks are
also called on their own against the fake Slack and Discord, through the real
slack_sdk and httpx.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.doctor import files, host, remote
from bot.core.version import pinclaw_version
from bot.store.db import Database
from channels.discord.settings import DiscordSettings
from channels.slack.settings import SlackSettings
from tests.cli_helpers import run, write_config
from tests.daemon_harness import DaemonProcess
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM
from tests.fake_slack import FakeSlack
from tests.fake_telegram import FakeTelegram
from tests.provider_cases import closed_port

DAEMON_PORT = closed_port()  # nothing answers there: "no daemon running", whatever else runs


def doctor_config(
    home: Path,
    llm_url: str,
    telegram: FakeTelegram | None = None,
    *,
    token: str = "",
    extra: str = "",
    web_port: int = DAEMON_PORT,
) -> Path:
    """A config as ``pinclaw onboard`` leaves it (folder 0700, file 0600) for the fakes."""
    body = (
        f'[provider]\nkind = "openai"\nmodel = "local-model"\nbase_url = "{llm_url}/v1"\n\n'
        f'[web]\nlisten = "127.0.0.1:{web_port}"\n{extra}'
    )
    if telegram is not None:
        body += (
            f'\n[channels.telegram]\ntoken = "{token or telegram.token}"\n'
            f'api_base_url = "{telegram.url}"\n'
        )
    path = write_config(home, body)
    path.parent.chmod(0o700)
    path.chmod(0o600)
    return path


def doctor(
    home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {"XDG_CONFIG_HOME": str(home / ".config"), **(env or {})}
    return run(home, "doctor", *args, env=environment)


def line(done: subprocess.CompletedProcess[str], start: str) -> str:
    """The one report line whose text (after its mark) starts with ``start``."""
    found = [
        row for row in done.stdout.splitlines() if row.partition(" ")[2].lstrip().startswith(start)
    ]
    assert len(found) == 1, done.stdout
    return found[0]


def test_everything_in_place_passes(llm: FakeLLM, telegram: FakeTelegram, home: Path) -> None:
    config = doctor_config(home, llm.url, telegram)
    done = doctor(home)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0] == f"✓ config {config} is valid"
    assert re.fullmatch(r"✓ provider openai:local-model answered in \d+ ms", line(done, "provider"))
    assert line(done, "telegram") == "✓ telegram: signed in as @pinclaw_bot"
    assert line(done, "data folder") == f"✓ data folder {config.parent}: writable, private"
    assert line(done, "daemon") == (
        f"– daemon: no daemon running (nothing answers at http://127.0.0.1:{DAEMON_PORT}) "
        "— start it with `pinclaw run`, or `pinclaw service install` to run it as a service"
    )
    assert [row for row in lines if row.startswith("✗")] == []
    assert lines[-1].startswith("All checks passed")
    (ping,) = llm.requests  # one tiny request, not retried
    assert ping.body["max_tokens"] == 1
    assert ping.view.last_text == "ping"
    assert [call.method for call in telegram.calls()] == ["getMe"]  # the daemon was not started


def test_a_stopped_model_fails_the_provider_line_with_the_fix(
    telegram: FakeTelegram, home: Path
) -> None:
    llm = FakeLLM()
    llm.start()
    url = llm.url
    llm.stop()
    doctor_config(home, url, telegram)
    done = doctor(home)
    assert done.returncode == 1, done.stdout
    provider = line(done, "provider")
    assert provider.startswith(f"✗ provider: cannot reach openai:local-model at {url} (")
    assert provider.endswith(" — check provider.base_url and that the server runs")
    assert line(done, "telegram").startswith("✓ ")
    assert done.stdout.splitlines()[-1] == "1 check failed."
    assert "Traceback" not in done.stderr


def test_beside_a_running_daemon_and_then_without_its_model(
    telegram: FakeTelegram, home: Path
) -> None:
    llm = FakeLLM()
    llm.start()
    running = True
    port = closed_port()
    config = doctor_config(
        home, llm.url, telegram, web_port=port, extra="\n[daemon]\nshutdown_grace_s = 0.5\n"
    )
    daemon = DaemonProcess(home, config.read_text()).start()
    try:
        daemon.wait_log("telegram connected as @pinclaw_bot")
        daemon.wait_log("status endpoint on")
        done = doctor(home)
        assert done.returncode == 0, done.stdout
        assert line(done, "daemon") == (
            f"– daemon: PinClaw {pinclaw_version()} running, healthy (at http://127.0.0.1:{port})"
        )
        assert line(done, "telegram") == "✓ telegram: signed in as @pinclaw_bot"
        assert line(done, "database").startswith("✓ database ")  # read while the daemon writes
        llm.stop()
        running = False
        stopped = doctor(home)
        assert stopped.returncode == 1, stopped.stdout
        assert line(stopped, "provider").startswith("✗ provider: cannot reach openai:local-model")
    finally:
        assert daemon.terminate() == 0, daemon.log()
        if running:
            llm.stop()


def test_a_rejected_telegram_token_fails_with_the_fix(
    llm: FakeLLM, telegram: FakeTelegram, home: Path
) -> None:
    doctor_config(home, llm.url, telegram, token="123456:REVOKED")
    done = doctor(home)
    assert done.returncode == 1
    assert line(done, "telegram") == (
        "✗ telegram: Telegram rejected the bot token (Unauthorized) — check "
        "channels.telegram.token; @BotFather shows your bot's token (/mybots, then API Token)"
    )
    assert line(done, "provider").startswith("✓ ")
    assert "REVOKED" not in done.stdout + done.stderr


def test_a_broken_config_is_one_failed_line_naming_the_key(home: Path) -> None:
    config = write_config(home, '[provider]\nkind = "openai"\nmodle = "gpt-4o-mini"\n')
    done = doctor(home)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"✗ config: {config}: provider.modle: unknown key")
    assert lines[0].endswith(" — correct it in the file; pinclaw.example.toml documents every key")
    assert [row for row in lines if row.startswith("✗")] == [lines[0]]
    assert line(done, "clock").startswith("✓ clock: ")  # what needs no config still runs
    assert lines[-1] == "1 check failed. The other checks need a config that loads."


def test_a_terminal_without_unicode_gets_plain_marks(home: Path) -> None:
    write_config(home, '[provider]\nkind = "openai"\nmodle = "gpt-4o-mini"\n')
    done = doctor(home, env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 1
    first = done.stdout.splitlines()[0]
    assert first.startswith("FAIL config: ")
    assert first.endswith(" - correct it in the file; pinclaw.example.toml documents every key")
    assert line(done, "clock").startswith("OK   clock: ")


def test_json_report_for_scripts(llm: FakeLLM, telegram: FakeTelegram, home: Path) -> None:
    doctor_config(home, llm.url, telegram)
    done = doctor(home, "--json")
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert (report["ok"], report["failed"]) == (True, 0)
    checks = {entry["check"]: entry for entry in report["checks"]}
    assert list(checks)[:5] == ["config", "version", "data_dir", "database", "provider"]
    assert checks["version"]["status"] == "info"
    assert checks["version"]["text"].startswith(f"version: PinClaw {pinclaw_version()} (Python ")
    assert checks["telegram"] == {
        "check": "telegram",
        "status": "ok",
        "text": "telegram: signed in as @pinclaw_bot",
        "fix": "",
    }
    assert isinstance(checks["provider"]["latency_ms"], int)
    assert {entry["status"] for entry in report["checks"]} <= {"ok", "warn", "info"}
    assert {"sandbox", "service", "clock", "disk", "daemon"} <= set(checks)


@pytest.mark.parametrize(
    ("mode", "code", "mark"), [("required", 1, "✗"), ("auto", 0, "!")], ids=["required", "auto"]
)
def test_a_missing_sandbox_fails_only_when_required(
    llm: FakeLLM, home: Path, mode: str, code: int, mark: str
) -> None:
    doctor_config(home, llm.url, extra=f'\n[security]\nshell_sandbox = "{mode}"\n')
    done = doctor(home, env={"PATH": str(home / "empty")})  # no bwrap, no systemctl
    assert done.returncode == code, done.stdout
    sandbox = line(done, "shell sandbox")
    assert sandbox.startswith(f"{mark} shell sandbox: ")
    assert "bubblewrap is not installed" in sandbox
    assert "sudo apt install bubblewrap" in sandbox


def test_only_the_enabled_channels_libraries_are_loaded(
    llm: FakeLLM, telegram: FakeTelegram, home: Path
) -> None:
    config = doctor_config(home, llm.url, telegram)
    script = (
        "import asyncio, io, sys\n"
        "from bot.cli.doctor import doctor\n"
        f"code = asyncio.run(doctor({str(config)!r}, out=io.StringIO()))\n"
        "print(code, sorted(m for m in ('telegram', 'discord', 'slack_sdk') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout == "0 ['telegram']\n", done.stderr


# The checks on their own.


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack.running() as fake:
        yield fake


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    with FakeDiscord.running() as fake:
        yield fake


async def test_slack_tokens_are_checked_without_connecting(slack: FakeSlack) -> None:
    settings = SlackSettings.model_validate(
        {"bot_token": slack.bot_token, "app_token": slack.app_token, "api_base_url": slack.api_url}
    )
    found = await remote.channel("slack", settings)
    assert found.status == "ok", found
    assert found.text.startswith("slack: bot token works for @")
    wrong = settings.model_copy(update={"app_token": settings.bot_token})
    refused = await remote.channel("slack", wrong)
    assert refused.status == "fail"
    assert "Slack refused the app token" in refused.text
    assert refused.fix.startswith("check channels.slack.app_token")


async def test_discord_token_and_message_content_intent(discord_fake: FakeDiscord) -> None:
    root = discord_fake.api_base
    settings = DiscordSettings.model_validate({"token": discord_fake.token, "api_base_url": root})
    found = await remote.channel("discord", settings)
    assert (found.status, found.text) == ("ok", "discord: signed in as PinClaw")
    wrong = DiscordSettings.model_validate({"token": "not-the-token", "api_base_url": root})
    refused = await remote.channel("discord", wrong)
    assert (refused.status, refused.text) == (
        "fail",
        "discord: Discord rejected the bot token (401)",
    )
    assert refused.fix.startswith("check channels.discord.token")
    discord_fake.world.application["flags"] = 0  # the intent switched off in the portal
    muted = await remote.channel("discord", settings)
    assert muted.status == "fail"
    assert "the Message Content intent is off" in muted.text


async def test_database_integrity(tmp_path: Path) -> None:
    path = tmp_path / "pinclaw.db"
    assert files.database(path).status == "info"  # not made yet
    db = Database(path)
    await db.open()
    await db.close()
    sound = files.database(path)
    assert sound.status == "ok"
    assert "the integrity check found nothing wrong" in sound.text
    path.write_bytes(b"this was never a database" * 10)
    damaged = files.database(path)
    assert damaged.status == "fail"
    assert damaged.text.startswith(f"the database {path} is damaged (it is not an SQLite database)")
    assert "pinclaw db recover" in damaged.text


async def test_the_service_is_judged_by_its_unit_and_enable_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PINCLAW_SYSTEMCTL", str(tmp_path / "no-systemctl"))  # cannot answer
    units = tmp_path / "xdg" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "pinclaw.service").write_text(f"[Service]\nEnvironment=PINCLAW_CONFIG={config}\n")
    off = await host.service(config)
    assert off.status == "warn"
    assert "not enabled" in off.text
    assert off.fix.endswith("--user enable --now pinclaw-sandbox.socket pinclaw.service")
    (units / "default.target.wants").mkdir()
    (units / "default.target.wants" / "pinclaw.service").symlink_to(units / "pinclaw.service")
    on = await host.service(config)
    assert (on.status, on.text) == (
        "ok",
        f"service: installed as a user service ({units / 'pinclaw.service'}), enabled",
    )
    elsewhere = await host.service(tmp_path / "other.toml")
    assert elsewhere.status == "warn"
    assert f"it reads {config}" in elsewhere.text
