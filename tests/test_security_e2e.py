"""The security policy end to end: `pinclaw chat` and `pinclaw agent` with real tools.

In supervised mode the agent reads and edits files in its workspace (the edit
after a "y" at the terminal) and runs ordinary commands, is refused with a clear
reason when it reaches outside, and every decision lands in the audit log.
Delegation runs a sub-agent through the same gate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.agent.prompt import describe_chat
from bot.config import LoadedConfig, parse_config
from bot.core.messages import InboundMessage
from bot.daemon.app import open_app
from tests.cli_helpers import local_config, run, write_config
from tests.fake_llm import CallTools, FakeLLM, Say


def test_supervised_chat_reads_edits_runs_and_is_refused_outside(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    workspace = home / ".pinclaw" / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("buy milkk\nbuy bread\n")
    llm.queue(
        CallTools([("file_read", {"path": "notes.txt"})]),
        Say("It is a shopping list."),
        CallTools([("file_edit", {"path": "notes.txt", "old_text": "milkk", "new_text": "milk"})]),
        Say("Fixed the typo."),
        CallTools([("shell", {"command": "ls"})]),
        Say("There is one file."),
        CallTools([("file_read", {"path": "/etc/passwd"})]),
        Say("I may not read that."),
        CallTools([("shell", {"command": "rm -rf ~"})]),
        Say("I will not do that."),
    )
    lines = [
        "what is in notes.txt?",
        "fix the typo",
        "y",
        "what files are there?",
        "show me /etc/passwd",
        "clean up my home folder",
    ]
    done = run(home, "chat", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert (workspace / "notes.txt").read_text() == "buy milk\nbuy bread\n"
    assert "Approval needed for file_edit" in done.stdout
    assert "path=notes.txt, old_text=milkk, new_text=milk" in done.stdout
    assert "Allow it? y = once / a = always / n = deny [y/a/N]" in done.stdout
    assert "✅ Allowed once by " in done.stdout

    read, edited, listed, passwd, rm = llm.tool_results()
    assert read.startswith('<untrusted source="file_read">') and "buy milkk" in read
    assert "notes.txt" in edited and "Error" not in edited
    assert "notes.txt" in listed
    assert passwd.startswith("Error: refused: ") and "forbidden" in passwd
    assert rm.startswith("Error: refused: ")

    verified = run(home, "audit", "verify")
    assert verified.returncode == 0
    assert "OK, 5 entries" in verified.stdout
    audit = [
        json.loads(line) for line in (home / ".pinclaw" / "audit.jsonl").read_text().splitlines()
    ]
    assert [(e["tool"], e["decision"]) for e in audit] == [
        ("file_read", "allowed"),
        ("file_edit", "approved"),
        ("shell", "allowed"),
        ("file_read", "blocked"),
        ("shell", "blocked"),
    ]
    shown = run(home, "audit", "show", "-n", "2").stdout.splitlines()
    assert len(shown) == 2
    assert "shell" in shown[1] and "blocked" in shown[1]


def test_without_a_person_to_ask_medium_calls_are_not_run(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url))
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("I could not."))
    done = run(home, "agent", "-m", "make a build folder")
    assert done.stdout == "I could not.\n"
    (refusal,) = llm.tool_results()
    assert "needs a person's approval" in refusal
    assert not (home / ".pinclaw" / "workspace" / "build").exists()


def test_readonly_refuses_writes_and_tampering_is_detected(llm: FakeLLM, home: Path) -> None:
    write_config(home, local_config(llm.url, '[security]\nautonomy = "readonly"\n'))
    llm.queue(
        CallTools([("file_write", {"path": "x.txt", "content": "hi"})]),
        Say("Read-only here."),
    )
    run(home, "agent", "-m", "write a file")
    (refusal,) = llm.tool_results()
    assert (
        refusal == "Error: refused: PinClaw may only read here, and file_write would change files"
    )
    audit = home / ".pinclaw" / "audit.jsonl"
    entry = json.loads(audit.read_text())
    entry["decision"] = "allowed"
    audit.write_text(json.dumps(entry) + "\n")
    broken = run(home, "audit", "verify")
    assert broken.returncode == 1
    assert "BROKEN at line 1: its content does not match its hash" in broken.stdout


def loaded_with_agents(llm: FakeLLM, tmp_path: Path, depth: int) -> LoadedConfig:
    raw: dict[str, Any] = {
        "provider": {"kind": "openai", "model": "main", "base_url": f"{llm.url}/v1"},
        "agent": {"max_delegation_depth": depth},
        "agents": {
            "researcher": {
                "description": "looks things up",
                "system_prompt": "You are the researcher.",
                "tools": ["calculator", "delegate"],
                "provider": {"kind": "ollama", "model": "small", "base_url": llm.url},
            }
        },
    }
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path / "state")


async def test_delegation_runs_a_sub_agent_through_the_same_gate(
    llm: FakeLLM, tmp_path: Path
) -> None:
    loaded = loaded_with_agents(llm, tmp_path, depth=1)
    llm.queue(
        CallTools([("delegate", {"agent": "researcher", "task": "what is 6*7?"})]),
        CallTools([("calculator", {"expression": "6*7"})]),
        CallTools([("delegate", {"agent": "researcher", "task": "ask yourself"})]),
        Say("It is 42."),
        Say("The researcher says 42."),
    )
    async with open_app(loaded) as app:
        message = InboundMessage("terminal", "chat", "ana", "ask the researcher")
        result = await app.agent.run_turn(message, channel_context=describe_chat(message))
    assert result.text == "The researcher says 42."
    main, sub_calc, _, sub_final, main_final = llm.requests
    spec = next(t for t in main.body["tools"] if t["function"]["name"] == "delegate")
    assert spec["function"]["parameters"]["properties"]["agent"]["enum"] == ["researcher"]
    assert sub_calc.wire == "ollama"  # the sub-agent uses its own provider
    assert sub_calc.view.system.startswith("You are the researcher.")
    assert {t["function"]["name"] for t in sub_calc.body["tools"]} == {"calculator", "delegate"}
    assert "may not hand tasks to other agents" in sub_final.view.last_text
    delegated = main_final.view.last_text
    assert delegated.startswith('<untrusted source="delegate">') and "It is 42." in delegated
    audit = (loaded.data_dir / "audit.jsonl").read_text().splitlines()
    steps = [(json.loads(e)["tool"], json.loads(e)["depth"]) for e in audit]
    assert steps == [("calculator", 1), ("delegate", 1), ("delegate", 0)]


def test_always_in_the_terminal_makes_a_rule_that_the_cli_lists_and_revokes(
    llm: FakeLLM, home: Path
) -> None:
    write_config(home, local_config(llm.url))
    mkdir = CallTools([("shell", {"command": "mkdir -p build"})])
    llm.queue(
        mkdir,
        Say("Made it."),
        mkdir,
        Say("Made it again."),
        CallTools([("shell", {"command": "mkdir -p dist"})]),
        Say("Not allowed."),
    )
    lines = ["make build", "a", "make build again", "make dist", "n"]
    done = run(home, "chat", stdin="\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("Approval needed for shell") == 2  # build once, then dist
    assert "✅ Always allowed by " in done.stdout and "(rule #1)" in done.stdout
    assert "❌ Denied by " in done.stdout
    assert "Made it again." in done.stdout
    assert not (home / ".pinclaw" / "workspace" / "dist").exists()

    listed = run(home, "approvals", "list")
    assert listed.returncode == 0
    assert "#1  shell  command=mkdir -p build  for everyone  (by " in listed.stdout
    assert run(home, "approvals", "revoke", "1").stdout == (
        "Removed rule #1; that call will ask again.\n"
    )
    assert run(home, "approvals", "list").stdout == "No always-allow rules.\n"
    missing = run(home, "approvals", "revoke", "1")
    assert missing.returncode == 1 and "there is no rule #1" in missing.stderr
