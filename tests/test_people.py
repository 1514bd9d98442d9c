"""One owner everywhere: people, linked accounts, and memory that follows the person.

End to end with the installed ``pinclaw`` command, the real daemon, PTB and the
fake Telegram, and the fake LLM: what the owner tells ``pinclaw agent -m`` is in
the model's request in the next run and, once their Telegram account is linked
with a one-time code, in a Telegram chat too; never for anyone else, not even
in a group they share. Linking is only ever proven by a code sent from the
account itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path

from tests.cli_helpers import one_line, run, write_config
from tests.daemon_harness import daemon_from
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram

OWNER_TG, BEN, CARA, DANA = 7001, 7002, 7003, 7004
GROUP = -1005550001
USERS = {
    OWNER_TG: FakeTelegram.user(OWNER_TG, "Olga", "olga"),
    BEN: FakeTelegram.user(BEN, "Ben", "ben"),
    CARA: FakeTelegram.user(CARA, "Cara", "cara"),
    DANA: FakeTelegram.user(DANA, "Dana", "dana"),
}
FACT = "My car is a blue Golf, plate B-XY 123"


def home_config(home: Path, llm: FakeLLM, telegram: FakeTelegram) -> Path:
    """Ben is listed; the owner's own Telegram account is not (linking admits it)."""
    return write_config(
        home,
        f'[general]\ndata_dir = "{home / "state"}"\n'
        f'[provider]\nkind = "openai"\nmodel = "fake"\nbase_url = "{llm.url}/v1"\n'
        '[heartbeat]\ninterval = "0"\n'
        f'[channels.telegram]\ntoken = "{telegram.token}"\napi_base_url = "{telegram.url}"\n'
        f"allowed_users = [{BEN}, {CARA}]\nallowed_groups = [{GROUP}]\npoll_timeout_s = 1\n",
    )


async def ask(telegram: FakeTelegram, chat: int, user: int, text: str) -> str:
    """``user`` writes ``text`` in ``chat``; the bot's next message there, waited for."""
    before = len(telegram.sent(chat))
    telegram.user_sends(chat, USERS[user], text)
    reply = await telegram.await_until(lambda: telegram.sent(chat)[before:] or None)
    return reply[0].text


async def pinclaw(home: Path, *args: str) -> str:
    """Run the installed command; its output (it must succeed)."""
    done = await asyncio.to_thread(run, home, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocks(listing: str) -> dict[str, str]:
    """``pinclaw people list`` as {name: that person's lines}."""
    found: dict[str, str] = {}
    for block in re.split(r"\n(?=#\d)", listing.strip()):
        name = re.match(r"#\d+  (.+?)(  \(owner\))?  ·", block)
        assert name is not None, block
        found[name.group(1)] = block
    return found


def link_code(output: str) -> str:
    match = re.search(r"/link ([A-Z2-9]{8})\b", output)
    assert match is not None, output
    return match.group(1)


async def test_the_owner_is_remembered_across_runs_and_on_their_linked_telegram_only(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = home_config(home, llm, telegram)
    llm.queue(CallTools([("memory_store", {"content": FACT, "key": "car"})]), Say("Noted."))
    assert "Noted." in await pinclaw(home, "agent", "-m", "remember: blue Golf, B-XY 123")
    assert llm.tool_results()[-1] == "Remembered for the owner under 'car' (core)."
    llm.queue(Say("A blue Golf."))
    assert "A blue Golf." in await pinclaw(home, "agent", "-m", "which car do I drive?")
    second_run = llm.requests[-1]
    assert FACT in second_run.view.system  # a new run, a new session: it came from memory
    assert FACT not in json.dumps(second_run.body["messages"][1:])

    code = link_code(await pinclaw(home, "people", "link"))
    async with daemon_from(config):
        before = len(llm.requests)
        offered = await ask(telegram, OWNER_TG, OWNER_TG, "which car do I drive?")
        assert "pairing code" in offered and len(llm.requests) == before  # a stranger so far
        linked = await ask(telegram, OWNER_TG, OWNER_TG, f"/link {code}")
        assert linked.startswith("Linked: this Telegram account now belongs to you, the owner.")
        offered = await ask(telegram, DANA, DANA, "hello")  # Dana pairs, as people do
        pairing = re.search(r"pairing code is ([A-Z2-9]{8})\b", offered)
        assert pairing is not None, offered
        await pinclaw(home, "pairing", "approve", pairing.group(1))
        llm.queue(Say("A blue Golf, plate B-XY 123."), Say("I don't know your car."))
        answer = await ask(telegram, OWNER_TG, OWNER_TG, "which car do I drive?")
        on_telegram = llm.requests[-1]
        danas_answer = await ask(telegram, DANA, DANA, "which car do I drive?")
        for_dana = llm.requests[-1]
    assert answer == "A blue Golf, plate B-XY 123." and danas_answer == "I don't know your car."
    assert FACT in on_telegram.view.system
    assert FACT not in json.dumps(for_dana.body) and "B-XY" not in json.dumps(for_dana.body)
    assert code not in json.dumps([r.body for r in llm.requests])  # the code never reached it

    people = blocks(await pinclaw(home, "people", "list"))
    owner = people["owner"]
    assert owner.startswith("#1  owner  (owner)")
    assert "\n    terminal  (the terminal " in owner
    assert "\n    telegram:7001  Olga  (linked " in owner
    assert "telegram:7004  (paired " in people["Dana"] and "telegram:7004" not in owner
    database = home / "state" / "pinclaw.db"
    with sqlite3.connect(database) as conn:
        stored = conn.execute("SELECT count(*) FROM inbound WHERE payload LIKE '%/link%'")
        assert stored.fetchone() == (0,)  # the code is not kept with the messages either


async def test_in_a_group_recall_uses_the_speakers_memories_and_shared_ones_only(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = home_config(home, llm, telegram)
    await pinclaw(home, "memory", "add", "The guest wifi password is garden", "--shared")
    secret = "Ben's locker code is 4711"
    llm.queue(
        CallTools([("memory_store", {"content": secret, "key": "locker code"})]),
        Say("Kept."),
        Say("Cara: only the wifi."),
        Say("Ben: locker and wifi."),
    )
    async with daemon_from(config):
        await ask(telegram, GROUP, BEN, "@pinclaw_bot remember: my locker code is 4711")
        await ask(telegram, GROUP, CARA, "@pinclaw_bot what is the locker code and the wifi?")
        for_cara = llm.requests[-1]
        await ask(telegram, GROUP, BEN, "@pinclaw_bot what is the locker code and the wifi?")
        owners_code = llm.requests[-1]
    assert "guest wifi password is garden" in for_cara.view.system
    assert "4711" not in for_cara.view.system  # Ben's own memory, even in the same group
    assert secret in owners_code.view.system and "garden" in owners_code.view.system
    listed = await pinclaw(home, "memory", "list", "--person", "Ben")
    assert secret in listed and "(Ben #" in listed


async def test_a_link_needs_a_fresh_code_from_the_account_itself(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = home_config(home, llm, telegram)
    owners_code = link_code(await pinclaw(home, "people", "link", "owner"))
    shown_in_group = link_code(await pinclaw(home, "people", "link"))
    async with daemon_from(config):
        await ask(telegram, BEN, BEN, "hello")  # Ben becomes a person of his own
        moved = await ask(telegram, GROUP, BEN, f"/link@pinclaw_bot {shown_in_group}")
        assert "private chat" in moved and "cancelled that code" in moved
        gone = await ask(telegram, BEN, BEN, f"/link {shown_in_group}")
        assert gone.startswith("That link code is not valid")
        taken = await ask(telegram, BEN, BEN, f"/link {owners_code}")
        assert taken.startswith("Linked: this Telegram account now belongs to you, the owner.")
        again = await ask(telegram, BEN, BEN, f"/link {owners_code}")
        assert again.startswith("That link code is not valid")  # a code works once
        for attempt in range(3):
            wrong = await ask(telegram, CARA, CARA, f"/link WRONG{attempt}AA")
            assert wrong.startswith("That link code is not valid")
        for attempt in range(2):
            await ask(telegram, CARA, CARA, f"/link ALSOBAD{attempt}")
        good = link_code(await pinclaw(home, "people", "link"))
        before = len(telegram.sent(CARA))
        telegram.user_sends(CARA, USERS[CARA], f"/link {good}")
        await asyncio.sleep(1.5)  # five wrong codes in an hour: no answer, no link
        assert len(telegram.sent(CARA)) == before
    listing = blocks(await pinclaw(home, "people", "list"))
    assert "telegram:7002" in listing["owner"] and "Ben" not in listing  # merged into the owner
    assert "telegram:7003" not in str(listing)  # /link alone never makes or links anyone


async def test_people_commands_rename_unlink_and_refuse_what_is_not_theirs(
    tmp_path: Path, llm: FakeLLM
) -> None:
    home = tmp_path / "home"
    write_config(home, f'[provider]\nkind = "openai"\nmodel = "m"\nbase_url = "{llm.url}/v1"\n')
    listing = await pinclaw(home, "people", "list")
    assert listing.startswith("#1  owner  (owner)  ·  0 private memories\n    terminal  (")
    renamed = await pinclaw(home, "people", "rename", "owner", "Olga", "K.")
    assert renamed == "#1 owner is now called Olga K.\n"  # no second full stop
    assert (await pinclaw(home, "people", "list")).startswith("#1  Olga K.  (owner)")
    by_id = await asyncio.to_thread(run, home, "people", "link", "Olga", "telegram:999")
    assert by_id.returncode == 2  # an account id alone can never be linked
    refusals = {
        ("people", "unlink", "terminal"): "the terminal always belongs to the owner",
        ("people", "unlink", "telegram:999"): "no person has the account 'telegram:999'",
        ("people", "link", "Zed"): "nobody is known as 'Zed'",
        ("people", "rename", "#1", " "): "a name needs 1 to 80 characters",
    }
    for args, said in refusals.items():
        done = await asyncio.to_thread(run, home, *args)
        assert done.returncode == 2, args
        assert said in one_line(done.stderr)
    code = link_code(await pinclaw(home, "people", "link", "#1"))
    assert re.fullmatch(r"[A-HJKMNP-Z2-9]{8}", code)  # no look-alike characters


async def test_an_unlinked_account_is_a_new_person_with_nothing_remembered(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home = tmp_path / "home"
    config = home_config(home, llm, telegram)
    await pinclaw(home, "memory", "add", FACT, "--key", "car")
    code = link_code(await pinclaw(home, "people", "link"))
    async with daemon_from(config):
        assert (await ask(telegram, OWNER_TG, OWNER_TG, f"/link {code}")).startswith("Linked")
    said = await pinclaw(home, "people", "unlink", "telegram:7001")
    assert said.startswith("Unlinked telegram:7001 from owner.")
    llm.queue(Say("No idea."))
    async with daemon_from(config):
        assert await ask(telegram, OWNER_TG, OWNER_TG, "which car do I drive?") == "No idea."
    assert FACT not in json.dumps(llm.requests[-1].body)
    people = blocks(await pinclaw(home, "people", "list"))
    assert "telegram:7001" in people["Olga"] and "telegram:7001" not in people["owner"]


async def test_an_expired_code_links_nothing(tmp_path: Path, llm: FakeLLM) -> None:
    from bot.store.db import Database
    from bot.store.people import LINK_TTL_S, PeopleStore

    db = Database(tmp_path / "p.db")
    await db.open()
    try:
        people = PeopleStore(db)
        await people.setup()
        owner = await people.owner()
        code, expires = await people.new_link(owner.id, now=time.time() - LINK_TTL_S - 1)
        assert expires < time.time()
        outcome = await people.redeem(code, "telegram", "55", "Mallory")
        assert outcome.kind == "invalid" and await people.of_identity("telegram:55") is None
    finally:
        await db.close()


async def test_linking_a_lone_account_merges_its_person_and_loses_nothing(tmp_path: Path) -> None:
    from bot.approvals.store import EVERYONE, ApprovalStore
    from bot.memory.models import CORE, NewMemory
    from bot.memory.store import MemoryStore
    from bot.store.db import Database

    db = Database(tmp_path / "m.db")
    await db.open()
    try:
        memory, rules = MemoryStore(db), ApprovalStore(db)
        await memory.setup()
        await rules.setup()
        people = memory.people
        owner = await people.owner()
        ana = await people.person_for("telegram", "1", "Ana")
        twice = await people.person_for("discord", "9", "Dee")
        code, _ = await people.new_link(twice.id)
        assert (await people.redeem(code, "slack", "U9", "dee")).kind == "linked"
        await memory.store(NewMemory("car", "The owner drives a Golf", CORE, owner.scope))
        await memory.store(NewMemory("car", "Ana drives a Fiat", CORE, ana.scope))
        await memory.store(NewMemory("bike", "Ana's bike is green", CORE, ana.scope))
        await memory.store(NewMemory("pet", "Dee has a cat", CORE, twice.scope))
        await rules.add_rule("clock", "{}", "clock", "owner", ana.id)
        await rules.add_rule("clock", "{}", "clock", "owner", owner.id)  # the same, twice
        await rules.add_rule("web", "{}", "web", "owner", ana.id)

        code, _ = await people.new_link(owner.id)
        outcome = await people.redeem(code, "telegram", "1", "Ana")
        assert (outcome.kind, outcome.merged) == ("linked", ana.id)
        assert await people.get(ana.id) is None
        kept = {m.key: m.content for m in await memory.list(None, [owner.scope])}
        assert kept == {
            "car": "The owner drives a Golf",
            "car (telegram:1)": "Ana drives a Fiat",
            "bike": "Ana's bike is green",
        }
        assert sorted((r.tool, r.person_id) for r in await rules.rules()) == [
            ("clock", owner.id),
            ("web", owner.id),
        ]
        assert await rules.matching_rule("web", "{}", owner.id) is not None
        assert await rules.matching_rule("web", "{}", EVERYONE) is None

        code, _ = await people.new_link(owner.id)
        outcome = await people.redeem(code, "slack", "U9", "dee")  # Dee keeps discord:9
        assert (outcome.kind, outcome.merged) == ("linked", None)
        dee = await people.get(twice.id)
        assert dee is not None and [i.identity for i in dee.identities] == ["discord:9"]
        assert [m.key for m in await memory.list(None, [dee.scope])] == ["pet"]

        code, _ = await people.new_link(dee.id)
        refused = await people.redeem(code, "telegram", "1", "Ana")  # now the owner's
        assert refused.kind == "owner_account"
        assert (await people.of_identity("telegram:1")) == await people.owner()
        code, _ = await people.new_link(owner.id)
        assert (await people.redeem(code, "terminal", "x")).kind == "invalid"
    finally:
        await db.close()
