"""The approval service: who decides, what people see, rules, expiry and restarts.

Driven through the real router, gate and agent (fake LLM over sockets) with an
in-process channel that shows requests and records their edits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.approvals.approvers import Approvers
from bot.approvals.store import ApprovalStore, StoredApproval
from bot.approvals.texts import action_id, parse_action
from bot.config import LoadedConfig, load_config, parse_config
from bot.config.channel import ChannelSettings
from bot.core.channel import ButtonPress, ChatTarget
from bot.core.messages import InboundMessage
from bot.daemon.access import AccessControl
from bot.daemon.app import App, open_app
from bot.daemon.approvals import approval_service
from bot.daemon.router import Router
from bot.daemon.run_lock import data_dir_lock, held_elsewhere
from bot.store.inbound import InboundStore
from bot.store.pairing import PairingStore
from tests.cli_helpers import local_config, run, write_config
from tests.fake_channel import FakeChannel
from tests.fake_llm import CallTools, FakeLLM, Say

MKDIR = CallTools([("shell", {"command": "mkdir build"})])


def config(llm: FakeLLM, tmp_path: Path, **channel: Any) -> LoadedConfig:
    raw = {
        "provider": {"kind": "openai", "model": "m", "base_url": f"{llm.url}/v1"},
        "security": {"approval_timeout_s": 5},
        "channels": {
            "telegram": {"token": "t", "allowed_users": ["ana", "bob"], "owner": "ana", **channel}
        },
    }
    return LoadedConfig(parse_config(raw, {}), tmp_path / "c.toml", tmp_path / "state")


class Daemonish:
    """The router, approval service and a fake channel, as `pinclaw run` wires them."""

    def __init__(self, app: App, router: Router, channel: FakeChannel, inbound: InboundStore):
        self.app, self.router, self.channel, self.inbound = app, router, channel, inbound

    async def press(self, ref: str, choice: str, user: str = "ana") -> str:
        target, _, buttons = self.channel.posted[int(ref) - 1]
        action = next(b.action_id for b in buttons if b.action_id.endswith(f":{choice}"))
        press = ButtonPress("test", target.chat_id, user, user.capitalize(), action, ref)
        return (await self.router.press(press)).text


@pytest.fixture
async def wired(llm: FakeLLM, tmp_path: Path) -> AsyncIterator[Any]:
    made: list[tuple[App, Any]] = []

    async def make(loaded: LoadedConfig) -> Daemonish:
        opened = open_app(loaded)
        app = await opened.__aenter__()
        made.append((app, opened))
        channel = FakeChannel()
        channel.status.connected("")
        inbound, pairing = InboundStore(app.db), PairingStore(app.db)
        await inbound.setup()
        await pairing.setup()
        telegram = loaded.config.channels["telegram"]
        assert isinstance(telegram, ChannelSettings)
        settings = {"test": telegram}
        approvals = await approval_service(
            app, loaded, {"test": channel}, Approvers(settings, pairing), inbound
        )
        router = Router(
            agent=app.agent,
            channels={"test": channel},
            inbound=inbound,
            settings=loaded.config.daemon,
            access=AccessControl(settings, pairing),
            pairing=pairing,
            approvals=approvals,
        )
        return Daemonish(app, router, channel, inbound)

    yield make
    for _, opened in made:
        await opened.__aexit__(None, None, None)


_ids = iter(range(1, 10_000))


def msg(
    text: str, sender: str = "ana", chat: str = "dm-ana", direct: bool = True
) -> InboundMessage:
    return InboundMessage(
        "test", chat, sender, text, sender_name=sender.capitalize(),
        message_id=str(next(_ids)), is_direct=direct, mentioned=not direct,
    )  # fmt: skip


async def test_allow_once_runs_the_call_and_turns_the_request_into_a_record(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(MKDIR, Say("Done."))
    await d.router.put(msg("make a build folder"))
    ((target, text, buttons),) = await d.channel.wait_posted(1)
    assert target == ChatTarget("test", "dm-ana")
    assert "**Approval needed** for **shell**" in text and "`command=mkdir build`" in text
    assert "Asked by Ana" in text and "Expires at " in text
    labels = ["✅ Allow once", "👤 Always for Ana", "♾️ Always for everyone", "❌ Deny"]
    assert [b.label for b in buttons] == labels
    assert all(len(b.action_id.encode()) <= 64 for b in buttons)
    assert await d.press("1", "once") == "Allowed once."
    await d.router.drain()
    assert (d.app.loaded.workspace / "build").is_dir()
    assert d.channel.texts() == ["Done."]
    record = await d.channel.wait_closed("1")
    assert "✅ Allowed once by Ana at " in record
    assert "/approve" not in record and "Expires at" not in record
    assert await d.press("1", "deny") == "Already decided: allowed once."


async def test_only_approvers_decide_and_forgeries_change_nothing(
    wired: Any, llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(MKDIR, Say("Done."))
    await d.router.put(msg("make it", chat="family", direct=False))
    await d.channel.wait_posted(1)
    assert await d.press("1", "once", user="bob") == "Only the owner can decide on this request."
    with caplog.at_level(logging.WARNING):
        forged = ButtonPress("test", "family", "ana", "Ana", action_id("x" * 16, "once"), "1")
        assert (await d.router.press(forged)).text == "This approval request does not exist."
        ((_, _, buttons),) = d.channel.posted
        elsewhere = ButtonPress("test", "family", "ana", "Ana", buttons[0].action_id, "99")
        assert (await d.router.press(elsewhere)).text == "This approval request does not exist."
    assert "rejected a decision on unknown or misrouted approval" in caplog.text
    assert not (d.app.loaded.workspace / "build").exists()
    assert await d.press("1", "deny") == "Denied."
    await d.router.drain()
    assert "Error: not run: Ana denied the shell call" in llm.requests[-1].view.last_text
    assert "❌ Denied by Ana" in await d.channel.wait_closed("1")


@pytest.mark.parametrize("where", ["chat", "panel"])
async def test_a_decision_while_the_card_is_being_posted_still_closes_the_card(
    wired: Any, llm: FakeLLM, tmp_path: Path, where: str
) -> None:
    """The card shows before the platform returns its message id: a tap (or a panel
    decision) in that instant is settled, and the card becomes its record once the id
    is known, without its buttons left behind."""
    d = await wired(config(llm, tmp_path))
    d.channel.hold_posts = asyncio.Event()
    llm.queue(MKDIR, Say("Not made."))
    await d.router.put(msg("make a build folder"))
    ((_, _, buttons),) = await d.channel.wait_posted(1)
    if where == "chat":
        assert await d.press("1", "deny") == "Denied."
    else:
        parsed, approvals = parse_action(buttons[0].action_id), d.router._approvals
        assert parsed is not None and approvals is not None
        assert (await approvals.decide_from_panel(parsed[0], "deny", "Ana")).text == "Denied."
    d.channel.hold_posts.set()
    await d.router.drain()
    assert "❌ Denied by Ana" in await d.channel.wait_closed("1")
    assert d.channel.texts() == ["Not made."]


async def test_a_request_nobody_answers_expires_and_the_model_is_told(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    loaded = config(llm, tmp_path)
    loaded = LoadedConfig(
        loaded.config.model_copy(
            update={
                "security": loaded.config.security.model_copy(update={"approval_timeout_s": 0.3})
            }
        ),
        loaded.path,
        loaded.data_dir,
    )
    d = await wired(loaded)
    llm.queue(MKDIR, Say("Nobody answered."))
    await d.router.put(msg("make it"))
    await d.router.drain()
    assert "nobody approved the shell call in time" in llm.requests[-1].view.last_text
    assert "⌛ Expired at " in await d.channel.wait_closed("1")
    assert await d.press("1", "once") == "Already decided: expired."


async def test_always_creates_a_narrow_durable_rule(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(
        MKDIR, Say("One."), MKDIR, Say("Two."), CallTools([("shell", {"command": "mkdir  dist"})])
    )
    await d.router.put(msg("make it"))
    await d.channel.wait_posted(1)
    assert await d.press("1", "always") == "Always allowed (rule #1)."
    await d.router.drain()
    assert "(rule #1)" in await d.channel.wait_closed("1")
    await d.router.put(msg("again"))
    await d.router.drain()
    assert len(d.channel.posted) == 1  # the same call went through without asking
    await d.router.put(msg("something else"))
    await d.channel.wait_posted(2)  # a different argument still asks
    assert "mkdir  dist" in d.channel.posted[1][1] or "mkdir dist" in d.channel.posted[1][1]
    assert await d.press("2", "deny") == "Denied."
    rules = await ApprovalStore(d.app.db).rules()
    words = [["word", w, False, False, False] for w in ("mkdir", "build")]
    assert [(r.tool, json.loads(r.rule_key), r.created_by) for r in rules] == [
        ("shell", {"command": words}, "Ana")
    ]


async def test_always_for_a_person_covers_that_person_only(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(MKDIR, Say("One."), MKDIR, Say("Two."), MKDIR, Say("Not for Bob."))
    await d.router.put(msg("make it"))
    await d.channel.wait_posted(1)
    assert await d.press("1", "person") == "Always allowed for Ana (rule #1)."
    await d.router.drain()
    assert "✅ Always allowed for Ana by Ana at " in await d.channel.wait_closed("1")
    await d.router.put(msg("again"))
    await d.router.drain()
    assert len(d.channel.posted) == 1  # Ana's same call ran without asking
    await d.router.put(msg("me too", sender="bob", chat="dm-bob"))
    ((_, text, buttons),) = (await d.channel.wait_posted(2))[1:]
    assert "Asked by Bob" in text and "👤 Always for Bob" in [b.label for b in buttons]
    assert await d.press("2", "deny") == "Denied."
    await d.router.drain()
    ana = await d.app.people.person_for("test", "ana")
    rules = await ApprovalStore(d.app.db).rules()
    assert [(r.tool, r.person_id, r.created_by) for r in rules] == [("shell", ana.id, "Ana")]
    assert d.channel.texts() == ["One.", "Two.", "Not for Bob."]


async def test_high_risk_calls_can_never_be_always_allowed(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    loaded = config(llm, tmp_path)
    security = loaded.config.security.model_copy(
        update={"always_ask": ["shell"], "autonomy": "full"}
    )
    d = await wired(
        LoadedConfig(
            loaded.config.model_copy(update={"security": security}), loaded.path, loaded.data_dir
        )
    )
    llm.queue(CallTools([("shell", {"command": "rm -rf build"})]), Say("ok"))
    await d.router.put(msg("clean"))
    ((_, text, buttons),) = await d.channel.wait_posted(1)
    assert [b.label for b in buttons] == ["✅ Allow once", "❌ Deny"]
    assert "high risk" in text
    stored = await ApprovalStore(d.app.db).pending()
    await d.router.put(msg(f"/approve {stored[0].id} always"))
    await d.channel.wait_sent(1)
    assert d.channel.texts() == ["A high-risk call can only be allowed once."]
    assert await ApprovalStore(d.app.db).rules() == []
    assert await d.press("1", "deny") == "Denied."


async def test_group_requests_go_to_the_approvers_private_chat(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path, approvals_in_dm=True))
    llm.queue(MKDIR, Say("Done."))
    await d.router.put(msg("make it", sender="bob", chat="family", direct=False))
    ((target, text, _),) = await d.channel.wait_posted(1)
    assert target == ChatTarget("test", "dm-ana")
    assert "Asked by Bob in the group chat family" in text
    assert await d.press("1", "once") == "Allowed once."


async def test_a_private_chat_that_refuses_is_explained_in_the_group_without_details(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path, approvals_in_dm=True))
    d.channel.refuse_posts_to.add("dm-ana")
    llm.queue(MKDIR, Say("I could not get approval."))
    await d.router.put(msg("make it", sender="bob", chat="family", direct=False))
    await d.router.drain()
    assert d.channel.posted == []
    notice, answer = d.channel.texts()
    assert "could not reach the owner in a private chat" in notice
    assert "mkdir" not in notice
    assert answer == "I could not get approval."
    assert "nobody can approve it here" in llm.requests[-1].view.last_text
    assert not (d.app.loaded.workspace / "build").exists()
    rows = await d.app.db.conn.execute_fetchall("SELECT status, decided_by FROM approvals")
    assert list(map(tuple, rows)) == [("expired", "could not be delivered")]


async def test_a_long_command_is_shown_whole_and_backticks_cannot_break_out(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    command = "echo `date` " + "x" * 400 + " && touch tail-end"
    llm.queue(CallTools([("shell", {"command": command})]), Say("Done."))
    await d.router.put(msg("go"))
    ((_, text, _),) = await d.channel.wait_posted(1)
    assert f"```\ncommand={command}\n```" in text
    assert await d.press("1", "deny") == "Denied."


async def test_typed_approve_works_where_buttons_do_not(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(MKDIR, Say("Done."))
    await d.router.put(msg("make it"))
    await d.channel.wait_posted(1)
    (pending,) = await ApprovalStore(d.app.db).pending()
    await d.router.put(msg(f"/approve {pending.id}", sender="bob", chat="dm-bob"))
    await d.router.put(msg(f"/approve {pending.id} once"))
    await d.router.drain()
    assert d.channel.texts()[:2] == ["Only the owner can decide on this request.", "Allowed once."]
    assert "Done." in d.channel.texts()


async def test_several_pending_requests_block_only_their_own_chat(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(MKDIR, CallTools([("shell", {"command": "mkdir dist"})]))
    await d.router.put(msg("first", chat="one"))
    await d.router.put(msg("second", chat="two"))
    posted = await d.channel.wait_posted(2)
    ref = {target.chat_id: str(i + 1) for i, (target, _, _) in enumerate(posted)}
    llm.queue(Say("second done"))
    await d.press(ref["two"], "once")
    await d.channel.wait_sent(1)
    assert d.channel.texts() == ["second done"]  # chat one is still waiting for its answer
    llm.queue(Say("first done"))
    await d.press(ref["one"], "once")
    await d.router.drain()
    assert d.channel.texts() == ["second done", "first done"]


async def test_a_pending_request_expires_on_restart_and_its_turn_is_not_rerun(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    loaded = config(llm, tmp_path)
    d = await wired(loaded)
    llm.queue(MKDIR)
    await d.router.put(msg("make it"))
    await d.channel.wait_posted(1)
    await d.router.shutdown(0.1)
    assert len(await d.inbound.pending()) == 1

    again = await wired(loaded)  # a new start on the same state
    assert (await ApprovalStore(again.app.db).pending()) == []
    assert await again.inbound.pending() == []
    await again.router.replay()
    await again.router.drain()
    assert len(llm.requests) == 1  # the interrupted turn was not run again
    assert again.channel.posted == []


async def test_approver_resolution_order(tmp_path: Path, llm: FakeLLM) -> None:
    loaded = config(llm, tmp_path)
    base = loaded.config.channels["telegram"]
    assert isinstance(base, ChannelSettings)
    async with open_app(loaded) as app:
        pairing = PairingStore(app.db)
        await pairing.setup()
        outcome = await pairing.request("tg", "zoe", "Zoe", "zoe")
        assert outcome.request is not None
        await pairing.approve(outcome.request.code)
        cases = {
            "explicit": base.model_copy(update={"approvers": ["x", "y"]}),
            "owner": base,
            "first allowed": base.model_copy(update={"owner": None}),
            "first paired": base.model_copy(update={"owner": None, "allowed_users": []}),
        }
        found = {}
        for name, settings in cases.items():
            directory = Approvers({"tg": settings}, pairing)
            found[name] = await directory.of("tg")
        assert found == {
            "explicit": ["x", "y"],
            "owner": ["ana"],
            "first allowed": ["ana"],
            "first paired": ["zoe"],
        }
        assert await Approvers({}, local={"terminal": ["me"]}).may_decide("terminal", "me")
        # The owner's own accounts (linked by code) decide too, and come before any fallback.
        code, _ = await app.people.new_link((await app.people.owner()).id)
        linked = await app.people.redeem(code, "tg", "me-on-tg", "Me")
        assert linked.kind == "linked"
        nobody = base.model_copy(update={"owner": None})
        with_people = {
            name: await Approvers({"tg": settings}, pairing, people=app.people).of("tg")
            for name, settings in {"explicit": cases["explicit"], "no owner": nobody}.items()
        }
        assert with_people == {"explicit": ["x", "y", "me-on-tg"], "no owner": ["me-on-tg"]}


async def test_a_job_without_a_chat_asks_the_owner_privately(
    wired: Any, llm: FakeLLM, tmp_path: Path
) -> None:
    d = await wired(config(llm, tmp_path))
    llm.queue(MKDIR, Say("Done."))
    job = InboundMessage("cron", "backup", "cron", "nightly backup", sender_name="cron")
    agent = d.app.agent
    turn = asyncio.create_task(agent.run_turn(job, channel_context="A scheduled job."))
    ((target, _text, _),) = await d.channel.wait_posted(1)
    assert target == ChatTarget("test", "dm-ana")
    assert await d.press("1", "once") == "Allowed once."
    assert (await turn).text == "Done."


async def test_a_terminal_chat_beside_a_running_daemon_leaves_its_requests_open(
    llm: FakeLLM, home: Path
) -> None:
    """``pinclaw chat`` expires requests a stopped run left open, but not those of a
    daemon running beside it, whose turns still wait for a tap."""
    data = home / ".pinclaw"
    config_file = write_config(home, local_config(llm.url, f'[general]\ndata_dir = "{data}"\n'))
    loaded = load_config(config_file, {})
    assert loaded.data_dir == data
    async with open_app(loaded) as app:
        store = ApprovalStore(app.db)
        await store.setup()
        now = time.time()
        await store.add(
            StoredApproval(
                "a1", "telegram", "7001", None, "telegram", "7001", None, "12", "7001",
                "chat", "shell", "mkdir build", "shell:mkdir", "medium", "", "text", None,
                now, now + 600, "pending", None, None,
            )
        )  # fmt: skip

    async def status() -> str:
        async with open_app(loaded) as app:
            record = await ApprovalStore(app.db).get("a1")
            assert record is not None
            return record.status

    with data_dir_lock(loaded.data_dir):  # the daemon's lock, as `pinclaw run` holds it
        assert held_elsewhere(loaded.data_dir)
        done = await asyncio.to_thread(run, home, "chat", stdin="/quit\n")
        assert done.returncode == 0, done.stderr
    assert await status() == "pending"
    assert not held_elsewhere(loaded.data_dir)
    done = await asyncio.to_thread(run, home, "chat", stdin="/quit\n")
    assert done.returncode == 0, done.stderr
    assert await status() == "expired"
