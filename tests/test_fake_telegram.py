"""The fake Telegram server, driven by the real python-telegram-bot over sockets."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from telegram import (
    BotCommand,
    BotCommandScopeAllPrivateChats,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    Conflict,
    EndPointNotFound,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.ext import Application, ContextTypes, MessageHandler, filters

from tests.fake_telegram import FakeTelegram, parse_html

App = Application[Any, Any, Any, Any, Any, Any]
CHAT = 42
KEYBOARD = InlineKeyboardMarkup([[InlineKeyboardButton("Approve", callback_data="approve:1")]])


def build_app(telegram: FakeTelegram, token: str | None = None) -> App:
    """A PTB Application pointed at the fake."""
    builder = Application.builder().token(token or telegram.token)
    return builder.base_url(telegram.base_url).base_file_url(telegram.base_file_url).build()


@pytest.fixture
async def app(telegram: FakeTelegram) -> AsyncIterator[App]:
    """An initialized PTB Application (initialize() calls getMe)."""
    application = build_app(telegram)
    await application.initialize()
    yield application
    await application.shutdown()


def poll(app: App, seconds: float, **kwargs: Any) -> asyncio.Task[tuple[Update, ...]]:
    """A long poll running as a task."""
    return asyncio.create_task(app.bot.get_updates(timeout=dt.timedelta(seconds=seconds), **kwargs))


async def test_initialize_gets_the_bot_identity(telegram: FakeTelegram, app: App) -> None:
    assert (app.bot.username, app.bot.id) == ("pinclaw_bot", 123456)
    assert [c.method for c in telegram.calls()] == ["getMe"]


async def test_a_wrong_token_and_an_unknown_method(telegram: FakeTelegram, app: App) -> None:
    rejected = build_app(telegram, "999:WRONG")
    with pytest.raises(InvalidToken):
        await rejected.initialize()
    # A failed initialize() leaves Application.shutdown() a no-op: close the bot's clients.
    await rejected.bot.shutdown()
    assert telegram.calls("getMe")[-1].answer == {
        "ok": False,
        "error_code": 401,
        "description": "Unauthorized",
    }
    with pytest.raises(EndPointNotFound):
        await app.bot.do_api_request("noSuchMethod")
    assert telegram.calls("noSuchMethod")[0].answer == {
        "ok": False,
        "error_code": 404,
        "description": "Not Found: method not found",
    }


async def test_a_long_poll_returns_when_a_user_sends(telegram: FakeTelegram, app: App) -> None:
    task = poll(app, 30)
    await telegram.await_call("getUpdates")
    sent = telegram.user_sends(CHAT, telegram.user(7, "Ada", "ada"), "/start@pinclaw_bot hi")
    (update,) = await task
    assert update.update_id == sent["update_id"]
    assert update.message is not None and update.message.from_user is not None
    assert (update.message.text, update.message.from_user.username) == (
        "/start@pinclaw_bot hi",
        "ada",
    )
    assert [(e.type, e.offset, e.length) for e in update.message.entities] == [
        ("bot_command", 0, 18)
    ]
    assert await app.bot.get_updates(timeout=dt.timedelta(milliseconds=50)) == (update,)


async def test_an_offset_confirms_every_update_below_it(telegram: FakeTelegram, app: App) -> None:
    user = telegram.user(7)
    first, second = telegram.user_sends(CHAT, user, "a"), telegram.user_sends(CHAT, user, "b")
    assert [u.update_id for u in await app.bot.get_updates()] == [10_000, 10_001]
    assert telegram.confirmed_offset == 0  # fetched is not confirmed
    assert len(telegram.pending_updates()) == 2
    assert await app.bot.get_updates(offset=first["update_id"] + 1) != ()
    assert telegram.confirmed_offset == 10_001
    assert [u["update_id"] for u in telegram.pending_updates()] == [second["update_id"]]
    await app.bot.get_updates(offset=second["update_id"] + 1)
    assert await telegram.await_confirmed(second) == 10_002
    telegram.redeliver(second)  # a duplicate delivery, in spite of the offset
    assert [u.update_id for u in await app.bot.get_updates(offset=10_002)] == [10_001]


async def test_updater_polling_feeds_a_message_handler(telegram: FakeTelegram) -> None:
    application = build_app(telegram)
    received: asyncio.Queue[str] = asyncio.Queue()

    async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.message is not None and update.message.text is not None
        await received.put(update.message.text)

    application.add_handler(MessageHandler(filters.TEXT, on_text))
    await application.initialize()
    await application.start()
    assert application.updater is not None
    await application.updater.start_polling(timeout=dt.timedelta(seconds=5))
    update = telegram.user_sends(CHAT, telegram.user(7), "hello")
    assert await asyncio.wait_for(received.get(), 10) == "hello"
    await application.updater.stop()  # its last getUpdates confirms what it fetched
    await application.stop()
    await application.shutdown()
    assert telegram.confirmed_offset == update["update_id"] + 1
    assert [c.method for c in telegram.calls()][:3] == ["getMe", "deleteWebhook", "getUpdates"]


async def test_html_is_parsed_and_stored(telegram: FakeTelegram, app: App) -> None:
    html = '<b>Done</b> &amp; <a href="https://x.org">link</a> 😀<i>é</i>'
    message = await app.bot.send_message(CHAT, html, parse_mode=ParseMode.HTML)
    assert message.text == "Done & link 😀é"
    assert [(e.type, e.offset, e.length) for e in message.entities] == [
        ("bold", 0, 4),
        ("text_link", 7, 4),
        ("italic", 14, 1),  # the emoji is two UTF-16 code units
    ]
    (stored,) = telegram.sent(CHAT)
    assert (stored.text, stored.raw_text, stored.parse_mode) == (message.text, html, "HTML")
    await app.bot.send_message(CHAT, "plain", disable_notification=True)
    assert telegram.sent(CHAT)[1].params["disable_notification"] is True
    with pytest.raises(BadRequest, match="Unsupported parse_mode markdownv2"):
        await app.bot.send_message(CHAT, "*x*", parse_mode=ParseMode.MARKDOWN_V2)


@pytest.mark.parametrize(
    ("html", "error"),
    [
        ("<p>x</p>", 'unsupported start tag "p" at byte offset 0'),
        ("1 < 2", 'unsupported start tag "" at byte offset 2'),
        ("<b>x", 'can\'t find end tag corresponding to start tag "b"'),
        ("é<b>x</i>", 'unmatched end tag at byte offset 6, expected "</b>", found "</i>"'),
        ("<span>x</span>", 'tag "span" must have class "tg-spoiler" at byte offset 0'),
    ],
)
async def test_bad_html_is_refused_like_telegram(app: App, html: str, error: str) -> None:
    # PTB strips "Bad Request: " and capitalize()s the rest, lowering Telegram's capitals.
    with pytest.raises(BadRequest) as caught:
        await app.bot.send_message(CHAT, html, parse_mode=ParseMode.HTML)
    assert caught.value.message == f"Can't parse entities: {error}"


async def test_length_and_emptiness_count_visible_utf16(app: App) -> None:
    await app.bot.send_message(CHAT, "<b>" + "x" * 4096 + "</b>", parse_mode=ParseMode.HTML)
    for too_long in ("x" * 4097, "😀" * 2049):
        with pytest.raises(BadRequest, match="Message is too long"):
            await app.bot.send_message(CHAT, too_long)
    for empty, mode in (("  ", None), ("<b></b>", ParseMode.HTML)):
        with pytest.raises(BadRequest, match="Message text is empty"):
            await app.bot.send_message(CHAT, empty, parse_mode=mode)


async def test_an_injected_429_becomes_retry_after(
    telegram: FakeTelegram, app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # retry_after as a timedelta, no warning
    telegram.fail("sendMessage", 429, retry_after=7)
    with pytest.raises(RetryAfter) as caught:
        await app.bot.send_message(CHAT, "hi")
    assert caught.value.retry_after == dt.timedelta(seconds=7)
    assert (await app.bot.send_message(CHAT, "hi")).text == "hi"  # times=1


async def test_get_file_and_download(telegram: FakeTelegram, app: App) -> None:
    update = telegram.user_sends(CHAT, telegram.user(7), "see", document=b"%PDF", file_name="a.pdf")
    document = update["message"]["document"]
    assert (document["file_name"], update["message"]["caption"]) == ("a.pdf", "see")
    file = await app.bot.get_file(document["file_id"])
    assert file.file_path == f"{telegram.base_file_url}{telegram.token}/documents/file_1.pdf"
    assert await file.download_as_bytearray() == bytearray(b"%PDF")
    huge = telegram.add_file(b"", file_size=20 * 1024 * 1024 + 1)
    with pytest.raises(BadRequest, match="File is too big"):
        await app.bot.get_file(huge.file_id)
    with pytest.raises(BadRequest, match="Invalid file_id"):
        await app.bot.get_file("nope")


async def test_a_document_upload_is_recorded(telegram: FakeTelegram, app: App) -> None:
    message = await app.bot.send_document(CHAT, b"report", filename="r.txt", caption="<b>r</b>")
    assert message.document is not None and message.caption == "<b>r</b>"  # no parse_mode
    upload = telegram.calls("sendDocument")[0].files["document"]
    assert (upload.filename, upload.data) == ("r.txt", b"report")
    file = await app.bot.get_file(message.document.file_id)
    assert await file.download_as_bytearray() == bytearray(b"report")


async def test_commands_round_trip_per_scope(telegram: FakeTelegram, app: App) -> None:
    commands = [BotCommand("help", "Show help"), BotCommand("new", "Start over")]
    await app.bot.set_my_commands(commands)
    await app.bot.set_my_commands(commands[:1], BotCommandScopeAllPrivateChats(), "de")
    assert await app.bot.get_my_commands() == tuple(commands)
    assert await app.bot.get_my_commands(BotCommandScopeAllPrivateChats(), "de") == (commands[0],)
    assert telegram.set_commands_count == 2
    await app.bot.delete_my_commands()
    assert await app.bot.get_my_commands() == ()
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await app.bot.set_my_commands([BotCommand("Help", "capitals are not allowed")])


async def test_a_button_press_and_its_answer(telegram: FakeTelegram, app: App) -> None:
    user = telegram.user(7)
    await app.bot.send_message(CHAT, "Run it?", reply_markup=KEYBOARD)
    (sent,) = telegram.sent(CHAT)
    assert sent.buttons == [{"text": "Approve", "callback_data": "approve:1"}]
    telegram.user_presses(CHAT, user, sent, "approve:1")
    (update,) = await app.bot.get_updates()
    query = update.callback_query
    assert query is not None and query.data == "approve:1" and query.message is not None
    assert query.message.reply_markup == KEYBOARD
    assert await query.answer("Approved")
    assert telegram.callback_answer(query.id) == {
        "text": "Approved",
        "show_alert": False,
        "url": None,
        "cache_time": None,
    }
    with pytest.raises(BadRequest, match="Query is too old"):
        await query.answer("again")
    too_long = InlineKeyboardMarkup([[InlineKeyboardButton("x", callback_data="x" * 65)]])
    with pytest.raises(BadRequest, match="Button_data_invalid"):
        await app.bot.send_message(CHAT, "x", reply_markup=too_long)


async def test_edits_follow_telegram_rules(telegram: FakeTelegram, app: App) -> None:
    message = await app.bot.send_message(CHAT, "Run it?", reply_markup=KEYBOARD)
    edited = await app.bot.edit_message_text("Approved", CHAT, message.message_id)
    assert not isinstance(edited, bool) and edited.reply_markup is None  # no markup: it goes
    (stored,) = telegram.sent(CHAT)
    assert (stored.text, stored.edits, stored.reply_markup) == ("Approved", 1, None)
    with pytest.raises(BadRequest, match="Message is not modified"):
        await app.bot.edit_message_text("Approved", CHAT, message.message_id)
    await app.bot.edit_message_reply_markup(CHAT, message.message_id, reply_markup=KEYBOARD)
    assert telegram.sent(CHAT)[0].reply_markup == KEYBOARD.to_dict()
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await app.bot.edit_message_text("x", CHAT, 999)
    assert await app.bot.delete_message(CHAT, message.message_id)
    assert telegram.sent(CHAT)[0].deleted and telegram.message(CHAT, message.message_id) is None
    with pytest.raises(BadRequest, match="Message to delete not found"):
        await app.bot.delete_message(CHAT, message.message_id)


async def test_group_mentions_threads_and_replies(telegram: FakeTelegram, app: App) -> None:
    group = -1001234
    update = telegram.user_sends(group, telegram.user(7), "hey @pinclaw_bot", thread_id=5)
    message = update["message"]
    assert message["chat"] == {
        "id": group,
        "type": "supergroup",
        "title": f"Group {group}",
        "is_forum": True,
    }
    assert message["entities"] == [{"type": "mention", "offset": 4, "length": 12}]
    reply = ReplyParameters(message["message_id"])
    await app.bot.send_message(group, "hi", message_thread_id=5, reply_parameters=reply)
    (sent,) = telegram.sent(group)
    assert (sent.thread_id, sent.reply_to) == (5, message["message_id"])
    assert sent.message["reply_to_message"]["text"] == "hey @pinclaw_bot"
    with pytest.raises(BadRequest, match="Message to be replied not found"):
        await app.bot.send_message(group, "hi", reply_parameters=ReplyParameters(999))


async def test_chat_actions_are_recorded(telegram: FakeTelegram, app: App) -> None:
    # wait_for blocks (for tests that run the client elsewhere): here in a worker thread.
    waiting = asyncio.create_task(asyncio.to_thread(telegram.wait_for, "sendChatAction"))
    assert await app.bot.send_chat_action(CHAT, ChatAction.TYPING, message_thread_id=3)
    assert (await waiting).params == {"chat_id": CHAT, "action": "typing", "message_thread_id": 3}
    (action,) = telegram.chat_actions(CHAT)
    assert (action.action, action.thread_id) == ("typing", 3)
    with pytest.raises(BadRequest, match="Wrong parameter action"):
        await app.bot.send_chat_action(CHAT, "dancing")


async def test_a_webhook_blocks_polling_and_receives_updates(
    telegram: FakeTelegram, app: App
) -> None:
    received: asyncio.Queue[tuple[str | None, dict[str, Any]]] = asyncio.Queue()
    answers = [500, 200]  # the first delivery fails and is retried

    async def hook(request: web.Request) -> web.Response:
        status = answers.pop(0) if answers else 200
        if status == 200:
            secret = request.headers.get("X-Telegram-Bot-Api-Secret-Token")
            await received.put((secret, await request.json()))
        return web.Response(status=status)

    server = web.Application()
    server.router.add_post("/hook", hook)
    runner = web.AppRunner(server)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    try:
        assert await app.bot.set_webhook(url, secret_token="s3cret")
        assert (telegram.webhook_url, telegram.webhook_secret) == (url, "s3cret")
        with pytest.raises(Conflict, match="webhook is active"):
            await app.bot.get_updates()
        update = telegram.user_sends(CHAT, telegram.user(7), "pushed")
        assert await asyncio.wait_for(received.get(), 10) == ("s3cret", update)
        await telegram.await_until(lambda: len(telegram.webhook_deliveries()) == 2 or None)
        assert [d.status for d in telegram.webhook_deliveries()] == [500, 200]
        info = await app.bot.get_webhook_info()
        assert info.pending_update_count == 0
        assert info.last_error_message == "Wrong response from the webhook: 500"
        assert await app.bot.delete_webhook()
        telegram.user_sends(CHAT, telegram.user(7), "dropped")
        assert await app.bot.delete_webhook(drop_pending_updates=True)
        assert telegram.pending_updates() == [] and await app.bot.get_updates() == ()
    finally:
        await runner.cleanup()


async def test_a_second_instance_ends_the_parked_poll(telegram: FakeTelegram, app: App) -> None:
    # PTB gives getUpdates a pool of one connection: a second poller is a second Bot.
    first = poll(app, 30)
    await telegram.await_call("getUpdates")
    other = build_app(telegram)
    await other.initialize()
    try:
        assert await other.bot.get_updates() == ()
    finally:
        await other.shutdown()
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await first


async def test_dropped_polls_fail_with_a_network_error(telegram: FakeTelegram, app: App) -> None:
    task = poll(app, 30)
    await telegram.await_until(lambda: telegram.parked_polls or None)
    assert telegram.drop_polls() == 1
    with pytest.raises(NetworkError):
        await task
    # The client can see the closed connection before the server records it.
    await telegram.await_until(lambda: telegram.calls("getUpdates")[0].dropped or None)
    assert await app.bot.get_updates() == ()  # the next one works


async def test_stalled_polls_time_out_on_the_client(telegram: FakeTelegram, app: App) -> None:
    telegram.stall_polls(True)
    with pytest.raises(TimedOut):
        await app.bot.get_updates(read_timeout=0.2)
    telegram.stall_polls(False)
    telegram.user_sends(CHAT, telegram.user(7), "back")
    assert len(await app.bot.get_updates()) == 1


async def test_unreachable_closes_every_connection(telegram: FakeTelegram, app: App) -> None:
    telegram.unreachable(True)
    with pytest.raises(NetworkError):
        await app.bot.get_me()
    telegram.unreachable(False)
    assert (await app.bot.get_me()).username == "pinclaw_bot"


async def test_stopping_the_server_releases_a_parked_poll() -> None:
    telegram = FakeTelegram()
    telegram.start()
    application = build_app(telegram)
    await application.initialize()
    try:
        task = poll(application, 600)
        await telegram.await_until(lambda: telegram.parked_polls or None)
        await asyncio.to_thread(telegram.stop)
        done, _ = await asyncio.wait({task}, timeout=30)
        assert task in done  # answered (or failed) at once, not after 600 s
        assert task.exception() is not None or task.result() == ()
    finally:
        await application.shutdown()


async def test_json_and_get_requests_are_decoded(telegram: FakeTelegram) -> None:
    root = f"{telegram.base_url}{telegram.token}"
    async with httpx.AsyncClient() as client:
        sent = await client.post(f"{root}/SENDMESSAGE", json={"chat_id": CHAT, "text": "123"})
        got = await client.get(f"{root}/getMe")
    assert sent.json()["result"]["text"] == "123" and got.json()["ok"]
    assert telegram.wait_for("sendMessage").params == {"chat_id": CHAT, "text": "123"}
    assert telegram.wait_for("getMe").http_method == "GET"


def test_parse_html_edge_cases() -> None:
    assert parse_html("AT&T &nbsp; 1 > 0").text == "AT&T &nbsp; 1 > 0"  # kept, as Telegram does
    code = parse_html('<pre><code class="language-python">x = 1</code></pre>')
    assert code.entities == [{"type": "pre", "offset": 0, "length": 5, "language": "python"}]
    quote = parse_html("<blockquote expandable>q</blockquote>&#128512;")
    assert (quote.text, quote.entities[0]["type"]) == ("q😀", "expandable_blockquote")
