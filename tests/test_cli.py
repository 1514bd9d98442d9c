"""The ``pinclaw`` command run as a subprocess, the way a person runs it."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.store.db import Database
from bot.store.pairing import PairingStore
from tests.cli_helpers import local_config, one_line, run, write_config
from tests.fake_llm import Fail, FakeLLM, Say
from tests.provider_cases import closed_port


def test_agent_answers(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    done = run(home, "agent", "-m", "hi")
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello! How can I help?\n", "")
    state = home / ".pinclaw"
    assert (state / "workspace" / "IDENTITY.md").exists()
    private = [state / "workspace", state / "pinclaw.db"]
    assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in private] == ["0o700", "0o600"]


def test_agent_turn_with_tool_calls(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, '[general]\ntimezone = "Asia/Tokyo"\n'))
    clock = run(home, "agent", "-m", "what time is it?")
    assert clock.returncode == 0, clock.stderr
    assert clock.stdout.startswith("The tool said: ")
    assert "timezone Asia/Tokyo" in clock.stdout
    calc = run(home, "agent", "-m", "what is 6*7?")
    assert calc.stdout == "The tool said: 6*7 = 42\n"
    assert [r.view.last_role for r in llm.requests] == ["user", "tool", "user", "tool"]


def test_agent_xml_tool_calls_for_models_without_native_tools(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, 'tool_dispatch = "xml"\n'))
    done = run(home, "agent", "-m", "what is (2+3)*4?")
    assert done.stdout == "The tool said: (2+3)*4 = 20\n", done.stderr
    first, second = llm.requests
    assert "tools" not in first.body
    assert "<tool_call>" in first.view.system
    assert "<tool_result" in second.view.last_text


def test_named_session_continues_and_default_is_fresh(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    run(home, "agent", "-m", "first", "--session", "work")
    run(home, "agent", "-m", "second", "--session", "work")
    run(home, "agent", "-m", "third")
    counts = [r.view.message_count for r in llm.requests]
    assert counts[1] > counts[0]
    assert counts[2] == counts[0]


def test_unreachable_provider_is_one_line(home: Path) -> None:
    port = closed_port()
    write_config(home, local_config(f"http://127.0.0.1:{port}", "max_retries = 1\n"))
    done = run(home, "agent", "-m", "hi")
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith(f"pinclaw: cannot reach openai:local-model at http://127.0.0.1:{port}")
    assert done.stdout == ""


def test_rejected_key_is_one_line(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, 'api_key = "sk-wrong"\n'))
    llm.queue(Fail(401, "Incorrect API key provided"))
    done = run(home, "agent", "-m", "hi")
    assert done.returncode == 1
    assert one_line(done.stderr) == (
        "pinclaw: openai:local-model rejected the API key (HTTP 401): Incorrect API key provided"
    )
    assert llm.requests[0].headers["authorization"] == "Bearer sk-wrong"


@pytest.mark.parametrize("command", [["agent", "-m", "hi"], ["chat"], ["run"]])
def test_broken_config_stops_with_one_line(home: Path, command: list[str]) -> None:
    write_config(
        home, '[provider]\nkind = "openai"\nmodel = "m"\nbase_url = "http://x/v1"\ntimeout = 5\n'
    )
    done = run(home, *command)
    assert done.returncode == 2
    assert one_line(done.stderr).endswith(
        "provider.timeout: unknown key; did you mean 'timeout_s'?"
    )


@pytest.mark.parametrize("command", [["agent", "-m", "hi"], ["chat"], ["run"]])
def test_without_config_points_to_onboard(home: Path, command: list[str]) -> None:
    done = run(home, *command)
    assert done.returncode == 2
    assert "run `pinclaw onboard` to create one" in one_line(done.stderr)


def test_missing_secret_names_the_key(home: Path) -> None:
    write_config(home, '[provider]\nkind = "gemini"\nmodel = "g"\napi_key = "${GEMINI_API_KEY}"\n')
    done = run(home, "agent", "-m", "hi")
    assert done.returncode == 2
    assert "provider.api_key: environment variable GEMINI_API_KEY is not set" in one_line(
        done.stderr
    )
    fixed = run(home, "config", "check", env={"GEMINI_API_KEY": "k"})
    assert fixed.returncode == 0


def test_config_check(home: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[provider]\nkind = "ollama"\nmodel = "llama3.2"\n')
    ok = run(home, "config", "check", str(good))
    assert ok.returncode == 0
    assert one_line(ok.stdout).startswith(
        f"{good}: OK (provider ollama:llama3.2 at http://localhost:11434"
    )
    bad = tmp_path / "bad.toml"
    bad.write_text('[provider]\nkind = "ollama"\nmodel = 3\n')
    failed = run(home, "config", "check", str(bad))
    assert failed.returncode == 2
    assert (
        one_line(failed.stderr)
        == f"pinclaw: {bad}: provider.model: expected a string, got integer 3"
    )
    example = Path(__file__).resolve().parent.parent / "pinclaw.example.toml"
    documented = run(home, "config", "check", str(example), env={"OPENAI_API_KEY": "sk-x"})
    assert documented.returncode == 0, documented.stderr


def test_chat_reads_lines_until_end_of_input(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    llm.queue(Say("Nice to meet you, Ana."), Say("You are Ana."), Say("I don't know."))
    done = run(home, "chat", stdin="I am Ana\nwho am I?\n/new\nwho am I?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Nice to meet you, Ana.",
        "You are Ana.",
        "Started a fresh conversation.",
        "I don't know.",
    ]
    assert llm.requests[1].view.message_count == 3
    assert llm.requests[2].view.message_count == 1
    assert all(r.body["stream"] for r in llm.requests)


def test_chat_quits_on_command_and_reports_provider_errors(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, "max_retries = 0\n"))
    llm.queue(Fail(500, "GPU on fire"))
    done = run(home, "chat", stdin="hello\n/quit\nnever sent\n")
    assert done.returncode == 0
    assert done.stdout == (
        "Sorry, I could not answer: openai:local-model failed with a server error "
        "(HTTP 500): GPU on fire\n"
    )
    assert len(llm.requests) == 1


def test_onboard_non_interactive_checks_and_writes_a_private_config(
    llm: FakeLLM, home: Path
) -> None:
    done = run(
        home,
        "onboard",
        "--non-interactive",
        "--kind",
        "openai",
        "--model",
        "local-model",
        "--base-url",
        f"{llm.url}/v1",
    )
    assert done.returncode == 0, done.stderr
    path = home / ".pinclaw" / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert "It answered in" in done.stdout
    assert llm.requests[0].view.last_text == "Reply with the word: ready"
    assert run(home, "agent", "-m", "hi").stdout == "Hello! How can I help?\n"
    again = run(home, "onboard", "--non-interactive", "--kind", "ollama")
    assert again.returncode == 0
    assert "keeping it" in again.stdout
    assert 'kind = "openai"' in path.read_text()


def test_onboard_refuses_to_write_a_config_that_does_not_work(home: Path) -> None:
    port = closed_port()
    done = run(
        home,
        "onboard",
        "--non-interactive",
        "--kind",
        "ollama",
        "--base-url",
        f"http://127.0.0.1:{port}",
    )
    assert done.returncode == 1
    assert "The check failed: cannot reach ollama:llama3.2" in done.stdout
    assert not (home / ".pinclaw" / "config.toml").exists()


def test_onboard_key_from_environment_is_referenced_not_copied(llm: FakeLLM, home: Path) -> None:
    done = run(
        home,
        "onboard",
        "--non-interactive",
        "--kind",
        "anthropic",
        "--base-url",
        llm.url,
        env={"ANTHROPIC_API_KEY": "sk-ant-secret"},
    )
    assert done.returncode == 0, done.stderr
    text = (home / ".pinclaw" / "config.toml").read_text()
    assert 'api_key = "${ANTHROPIC_API_KEY}"' in text
    assert "sk-ant-secret" not in text
    assert llm.requests[0].headers["x-api-key"] == "sk-ant-secret"
    missing = run(home, "onboard", "--non-interactive", "--kind", "gemini", "--force")
    assert missing.returncode == 1
    assert "gemini needs an API key" in one_line(missing.stderr)


def test_onboard_interactive_answers(llm: FakeLLM, home: Path) -> None:
    answers = f"ollama\nqwen3\n{llm.url}\n\n"
    done = run(home, "onboard", stdin=answers)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (home / ".pinclaw" / "config.toml").read_text()
    assert 'kind = "ollama"' in text
    assert 'model = "qwen3"' in text
    assert f'base_url = "{llm.url}"' in text
    assert "api_key" not in text
    assert llm.requests[0].wire == "ollama"


def test_disabled_parts_are_not_imported(llm: FakeLLM, home: Path, tmp_path: Path) -> None:
    write_config(home, local_config(llm.url))
    probe = (
        "import sys\n"
        "from bot.cli.main import main\n"
        "code = main(['agent', '-m', 'hi'])\n"
        "heavy = ['telegram', 'discord', 'slack_bolt', 'slack_sdk', 'numpy', 'apscheduler',\n"
        "         'gpiozero', 'serial', 'smbus2', 'aiohttp', 'channels.terminal']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    environ = {**os.environ, "HOME": str(home)}
    environ.pop("PINCLAW_CONFIG", None)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


async def test_pairing_list_approve_and_revoke(home: Path) -> None:
    write_config(home, '[provider]\nkind = "ollama"\nmodel = "m"\n')
    db = Database(home / ".pinclaw" / "pinclaw.db")
    await db.open()
    store = PairingStore(db)
    await store.setup()
    outcome = await store.request("telegram", "4242", "Eve", "4242")
    await db.close()
    assert outcome.request is not None
    code = outcome.request.code

    listing = await asyncio.to_thread(run, home, "pairing", "list")
    assert listing.returncode == 0
    assert f"{code}  telegram  Eve (id 4242)  expires in 59 min" in listing.stdout

    approved = await asyncio.to_thread(run, home, "pairing", "approve", code.lower())
    admitted = "Admitted Eve (id 4242) on telegram as person #2 Eve.\n"
    assert (approved.returncode, approved.stdout) == (0, admitted)
    people = await asyncio.to_thread(run, home, "people", "list")
    assert "#2  Eve" in people.stdout and "telegram:4242  (paired " in people.stdout
    again = await asyncio.to_thread(run, home, "pairing", "approve", code)
    assert again.returncode == 1
    assert "no pairing code" in one_line(again.stderr)
    listing = await asyncio.to_thread(run, home, "pairing", "list")
    assert "No pairing codes are waiting." in listing.stdout
    assert "telegram  Eve (id 4242)  since" in listing.stdout

    revoked = await asyncio.to_thread(run, home, "pairing", "revoke", "telegram", "4242")
    assert revoked.stdout == "Removed 4242 on telegram.\n"
