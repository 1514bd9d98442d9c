"""The fake Discord against the real discord.py client: connect, messages, limits, resume, UI.

Each test starts a fresh ``FakeDiscord``, points discord.py at it and drives a real
``discord.Client`` (and ``app_commands.CommandTree``) over real sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import discord
import pytest
from discord import app_commands

from tests.fake_discord import JSON, FakeDiscord, redirect_discord

INTENTS = discord.Intents.none()
INTENTS.guilds = True
INTENTS.guild_messages = True
INTENTS.dm_messages = True
INTENTS.message_content = True


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    """A fake Discord with discord.py's REST root and gateway pointed at it."""
    with FakeDiscord.running() as server, redirect_discord(server):
        yield server


class Bot(discord.Client):
    """A client that queues what it receives so tests can await it."""

    def __init__(self, intents: discord.Intents = INTENTS) -> None:
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.ready = asyncio.Event()
        self.resumed = asyncio.Event()
        self.inbox: asyncio.Queue[discord.Message] = asyncio.Queue()
        self.own: asyncio.Queue[discord.Message] = asyncio.Queue()

    async def on_ready(self) -> None:
        """Mark the client ready."""
        self.ready.set()

    async def on_resumed(self) -> None:
        """Mark a successful RESUME."""
        self.resumed.set()

    async def on_message(self, message: discord.Message) -> None:
        """Queue others' messages in ``inbox`` and the bot's own echoes in ``own``."""
        await (self.own if message.author == self.user else self.inbox).put(message)

    async def next_message(self, timeout: float = 5.0) -> discord.Message:  # noqa: ASYNC109
        """The next message from someone else."""
        return await asyncio.wait_for(self.inbox.get(), timeout)


@asynccontextmanager
async def running(fake: FakeDiscord, bot: Bot) -> AsyncIterator[Bot]:
    """Start ``bot`` against ``fake``, wait for on_ready, close it afterwards."""
    task = asyncio.create_task(bot.start(fake.token))
    ready = asyncio.create_task(bot.ready.wait())
    await asyncio.wait({task, ready}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        ready.cancel()
        await bot.close()
        await task  # raises whatever stopped the client
        raise TimeoutError("the client never became ready")
    try:
        yield bot
    finally:
        await bot.close()
        await task


def _channel(bot: Bot, fake: FakeDiscord) -> discord.TextChannel:
    channel = bot.get_channel(int(fake.channel["id"]))
    assert isinstance(channel, discord.TextChannel)
    return channel


async def test_connects_identifies_and_becomes_ready(fake: FakeDiscord) -> None:
    async with running(fake, Bot()) as bot:
        assert bot.user is not None and bot.user.id == int(fake.bot["id"])
        assert bot.application_id == int(fake.application_id)
        guild = bot.get_guild(int(fake.guild["id"]))
        assert guild is not None and guild.me is not None
        assert _channel(bot, fake).name == "general"
    assert fake.identifies == 1 and fake.resumes == 0
    assert fake.intents == INTENTS.value
    handshake = fake.calls("GET", "^/gateway$")[0]
    assert handshake.query == {"v": "10", "encoding": "json", "compress": "zlib-stream"}
    me = fake.calls("GET", "^/users/@me$")[0]
    assert me.headers["authorization"] == f"Bot {fake.token}"
    assert fake.calls("GET", "^/oauth2/applications/@me$")[0].status == 200


async def test_wrong_token_is_a_login_failure(fake: FakeDiscord) -> None:
    bot = Bot()
    with pytest.raises(discord.LoginFailure):
        await bot.login("not-the-token")
    await bot.close()
    assert fake.calls("GET", "^/users/@me$")[0].status == 401


async def test_dm_and_guild_mention_reach_on_message(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake, Bot()) as bot:
        fake.user_sends(fake.dm_channel(alice)["id"], alice, "hi in private")
        dm = await bot.next_message()
        assert isinstance(dm.channel, discord.DMChannel) and dm.guild is None
        assert (dm.content, dm.author.id) == ("hi in private", int(alice["id"]))
        await dm.author.send("hello back")  # opens the DM through POST /users/@me/channels
        assert [m["content"] for m in fake.sent(fake.dm_channel(alice)["id"])] == ["hello back"]

        fake.user_sends(fake.channel["id"], alice, "what's up?", mentions_bot=True)
        said = await bot.next_message()
        assert said.guild is not None and said.guild.id == int(fake.guild["id"])
        assert isinstance(said.author, discord.Member)
        assert bot.user in said.mentions
        assert said.content == f"<@{fake.bot['id']}> what's up?"


async def test_without_content_intent_guild_text_is_blank_unless_mentioned(
    fake: FakeDiscord,
) -> None:
    intents = discord.Intents(INTENTS.value)
    intents.message_content = False
    alice = fake.add_user("alice")
    async with running(fake, Bot(intents)) as bot:
        fake.user_sends(fake.channel["id"], alice, "chatter")
        assert (await bot.next_message()).content == ""
        fake.user_sends(fake.channel["id"], alice, "hey bot", mentions_bot=True)
        assert (await bot.next_message()).content.endswith("hey bot")
        fake.user_sends(fake.dm_channel(alice)["id"], alice, "direct")
        assert (await bot.next_message()).content == "direct"


async def test_reply_with_typing_is_posted_and_echoed(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake, Bot()) as bot:
        asked = fake.user_sends(fake.channel["id"], alice, "ping", mentions_bot=True)
        message = await bot.next_message()
        async with message.channel.typing():
            answer = await message.reply("pong")
        await fake.await_call("POST", rf"^/channels/{fake.channel['id']}/typing$")
        post = fake.calls("POST", r"/messages$")[-1]
        assert post.json["content"] == "pong"
        assert str(post.json["message_reference"]["message_id"]) == asked["id"]
        stored = fake.sent(fake.channel["id"])
        assert [m["content"] for m in stored] == ["pong"] and stored[0]["id"] == str(answer.id)
        assert answer.reference is not None and answer.reference.message_id == int(asked["id"])
        echo = await asyncio.wait_for(bot.own.get(), 5)
        assert bot.user is not None
        assert (echo.id, echo.author.id) == (answer.id, bot.user.id)
        await answer.edit(content="pong!")
        edited = fake.message(str(answer.id))
        assert edited["content"] == "pong!" and edited["edited_timestamp"] is not None
        await answer.delete()
        assert fake.deleted(str(answer.id)) and not fake.sent(fake.channel["id"])


async def test_content_limits_surface_as_http_exceptions(fake: FakeDiscord) -> None:
    async with running(fake, Bot()) as bot:
        channel = _channel(bot, fake)
        with pytest.raises(discord.HTTPException) as too_long:
            await channel.send("x" * 2001)
        assert (too_long.value.status, too_long.value.code) == (400, 50035)
        assert "2000 or fewer" in too_long.value.text
        with pytest.raises(discord.HTTPException) as empty:
            await channel.send("")
        assert empty.value.code == 50006
        await channel.send("x" * 2000)
        assert len(fake.sent(fake.channel["id"])) == 1


async def test_rate_limited_post_is_retried_after_retry_after(fake: FakeDiscord) -> None:
    fake.fail("POST", r"^/channels/\d+/messages$", 429, retry_after=0.3)
    async with running(fake, Bot()) as bot:
        await _channel(bot, fake).send("eventually")
    first, second = fake.calls("POST", r"/messages$")
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 0.3
    assert [m["content"] for m in fake.sent()] == ["eventually"]


async def test_drop_resumes_and_replays_what_was_missed(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    dm = fake.dm_channel(alice)
    async with running(fake, Bot()) as bot:
        fake.drop(hold=True)
        missed = fake.user_sends(dm["id"], alice, "sent while you were away")
        fake.release()
        got = await bot.next_message()
        assert got.id == int(missed["id"])
        await asyncio.wait_for(bot.resumed.wait(), 5)
        assert (fake.identifies, fake.resumes) == (1, 1)
        assert fake.calls("GET", "^/gateway/resume$"), "resumed on resume_gateway_url"
        fake.user_sends(dm["id"], alice, "live again")
        assert (await bot.next_message()).content == "live again"  # no duplicate in between


async def test_op7_reconnect_resumes_the_session(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake, Bot()) as bot:
        fake.reconnect()
        resume = await fake.await_call("GATEWAY", "^RESUME$")
        await asyncio.wait_for(bot.resumed.wait(), 5)
        assert resume.json["session_id"] in fake.gateway.sessions
        assert (fake.identifies, fake.resumes) == (1, 1)
        fake.user_sends(fake.channel["id"], alice, "after reconnect")
        assert (await bot.next_message()).content == "after reconnect"


class EagerBot(Bot):
    """discord.py sleeps 5 s before every IDENTIFY but the first; tests need not."""

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Identify at once."""


async def test_invalid_session_makes_the_client_identify_again(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake, EagerBot()) as bot:
        fake.invalid_session(resumable=False)
        await fake.await_call("GATEWAY", "^IDENTIFY$", count=2)
        await fake.await_connected()
        assert (fake.identifies, fake.resumes) == (2, 0)
        fake.user_sends(fake.channel["id"], alice, "new session")
        assert (await bot.next_message()).content == "new session"


async def test_duplicate_delivery_reaches_the_client_twice(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    async with running(fake, Bot()) as bot:
        original = fake.user_sends(fake.channel["id"], alice, "once", mentions_bot=True)
        fake.resend(original)
        fake.replay_last(1)
        copies = [await bot.next_message() for _ in range(3)]
        assert {m.id for m in copies} == {int(original["id"])}


def _tree(bot: Bot) -> app_commands.CommandTree[Bot]:
    tree: app_commands.CommandTree[Bot] = app_commands.CommandTree(bot)

    @tree.command(name="status", description="Show what the agent is doing")
    async def status(interaction: discord.Interaction[Bot]) -> None:
        await interaction.response.send_message("all good")

    @tree.command(name="help", description="Explain a topic")
    async def help_(interaction: discord.Interaction[Bot], topic: str) -> None:
        await interaction.response.send_message(f"help on {topic}", ephemeral=True)

    @tree.command(name="stop", description="Stop the current run")
    async def stop(interaction: discord.Interaction[Bot]) -> None:
        await interaction.response.defer(thinking=True)
        await interaction.followup.send("stopped")

    return tree


async def _callback(fake: FakeDiscord, interaction: JSON) -> dict[str, Any]:
    call = await fake.await_call("POST", rf"^/interactions/{interaction['id']}/[^/]+/callback$")
    assert isinstance(call.json, dict)
    return call.json


async def test_slash_commands_sync_and_answer(fake: FakeDiscord) -> None:
    alice = fake.add_user("alice")
    bot = Bot()
    tree = _tree(bot)
    async with running(fake, bot):
        synced = await tree.sync()
        assert fake.command_syncs() == 1
        registered = {c["name"]: c["id"] for c in fake.commands()}
        assert {c.name: str(c.id) for c in synced} == registered
        where = {"channel_id": fake.channel["id"], "user": alice}

        status = fake.user_runs_command("status", **where)
        assert status["data"]["id"] == registered["status"]
        assert (await _callback(fake, status))["type"] == 4
        assert fake.sent(fake.channel["id"])[-1]["content"] == "all good"

        help_ = fake.user_runs_command("help", {"topic": "tools"}, **where)
        answer = await _callback(fake, help_)
        assert answer["data"]["content"] == "help on tools" and answer["data"]["flags"] == 64

        stop = fake.user_runs_command("stop", **where)
        assert (await _callback(fake, stop))["type"] == 5
        await fake.await_call("POST", rf"^/webhooks/{fake.application_id}/")
        record = fake.interaction(stop)
        assert record.original_id is not None
        assert fake.message(record.original_id)["content"] == "stopped"

        in_dm = {"channel_id": fake.dm_channel(alice)["id"], "user": alice}
        assert (await _callback(fake, fake.user_runs_command("status", **in_dm)))["type"] == 4

        with pytest.raises(ValueError, match="not registered"):
            fake.user_runs_command("nope", **where)


async def test_late_interaction_answer_is_unknown(fake: FakeDiscord) -> None:
    fake.world.interaction_deadline = 0.0
    bot = Bot()
    tree = _tree(bot)
    async with running(fake, bot):
        await tree.sync()
        late = fake.user_runs_command("status", channel_id=fake.channel["id"], user=fake.owner)
        call = await fake.await_call("POST", rf"^/interactions/{late['id']}/")
        assert call.status == 404
        assert not fake.interaction(late).callbacks


class Approval(discord.ui.View):
    """An approval prompt only ``approver_id`` may answer."""

    def __init__(self, approver_id: int) -> None:
        super().__init__(timeout=None)
        self.approver_id = approver_id

    @discord.ui.button(label="Approve", style=discord.ButtonStyle.success, custom_id="approve:42")
    async def approve(
        self, interaction: discord.Interaction[Any], button: discord.ui.Button[Approval]
    ) -> None:
        """Refuse strangers privately; for the approver, rewrite the prompt."""
        if interaction.user.id != self.approver_id:
            await interaction.response.send_message(
                "Only the requester can approve.", ephemeral=True
            )
            return
        await interaction.response.edit_message(content="Approved", view=None)


async def test_button_press_answers_strangers_privately_and_updates_for_the_approver(
    fake: FakeDiscord,
) -> None:
    stranger = fake.add_user("mallory")
    async with running(fake, Bot()) as bot:
        prompt = await _channel(bot, fake).send(
            "Run `rm -rf build`?", view=Approval(int(fake.owner["id"]))
        )
        message = fake.message(str(prompt.id))
        assert message["components"][0]["components"][0]["custom_id"] == "approve:42"

        refused = await _callback(fake, fake.user_presses("approve:42", message, stranger))
        assert refused["type"] == 4 and refused["data"]["flags"] == 64
        assert refused["data"]["content"] == "Only the requester can approve."
        assert fake.message(str(prompt.id))["content"] == "Run `rm -rf build`?"

        approved = await _callback(fake, fake.user_presses("approve:42", message, fake.owner))
        assert approved["type"] == 7
        now = fake.message(str(prompt.id))
        assert (now["content"], now["components"]) == ("Approved", [])


async def test_close_sends_a_close_frame(fake: FakeDiscord) -> None:
    async with running(fake, Bot()) as bot:
        pass
    assert bot.is_closed()
    close = await fake.await_call("GATEWAY", "^CLOSE$")
    # discord.py 2.7 ends with 4000 (its reader closes first), not 1000; never an abrupt 1006.
    assert close.json["code"] in (1000, 4000)
    assert not fake.gateway.connections


async def test_unreachable_network_fails_login_at_connection_level(fake: FakeDiscord) -> None:
    fake.unreachable()
    offline = Bot()
    with pytest.raises(aiohttp.ClientConnectionError):
        await offline.login(fake.token)
    await offline.close()
    assert fake.refused >= 1 and not fake.calls("GET", "^/users/@me$")
    fake.unreachable(False)
    online = Bot()
    await online.login(fake.token)
    await online.close()


async def test_plain_gateway_frames_and_bad_token_close(fake: FakeDiscord) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(f"{fake.gateway_url}?v=10&encoding=json") as ws,
    ):
        hello = await ws.receive(timeout=5)
        assert hello.type is aiohttp.WSMsgType.TEXT
        assert hello.json()["op"] == 10
        await ws.send_json({"op": 2, "d": {"token": "wrong", "intents": 0}})
        closed = await ws.receive(timeout=5)
        assert closed.type is aiohttp.WSMsgType.CLOSE and closed.data == 4004


async def test_rest_answers_json_and_names_missing_routes(fake: FakeDiscord) -> None:
    auth = {"Authorization": f"Bot {fake.token}"}
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{fake.api_base}/guilds/1/bans", headers=auth) as missing:
            assert missing.status == 404
            assert missing.headers["Content-Type"] == "application/json"
            assert "GET /guilds/1/bans" in (await missing.json())["message"]
        async with session.get(f"{fake.api_base}/users/@me") as anonymous:
            assert anonymous.status == 401
            assert await anonymous.json() == {"message": "401: Unauthorized", "code": 0}
