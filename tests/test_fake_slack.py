"""The fake Slack, proven against the real slack_sdk clients and slack-bolt ``AsyncApp``.

Everything goes over sockets on 127.0.0.1: the Web API through ``AsyncWebClient``,
Socket Mode through bolt's aiohttp ``AsyncSocketModeHandler``, HTTP mode through
bolt's own aiohttp server with signed requests.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

import aiohttp
import pytest
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltRequest, AsyncRespond, AsyncSay
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from tests.fake_slack import (
    ALICE,
    ALICE_DM,
    BOB,
    GENERAL,
    FakeSlack,
    post_event,
    url_verification,
)

Body = dict[str, Any]
APPROVAL_BLOCKS: list[Body] = [
    {"type": "section", "text": {"type": "mrkdwn", "text": "Run `ls`?"}},
    {
        "type": "actions",
        "block_id": "approval",
        "elements": [
            {"type": "button", "action_id": "approve", "value": "42", "style": "primary",
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": "deny", "value": "42",
             "text": {"type": "plain_text", "text": "Deny"}},
        ],
    },
]  # fmt: skip


class SocketLink(Protocol):
    """The two lifecycle calls of bolt's socket handler (untyped upstream)."""

    async def connect_async(self) -> None: ...

    async def close_async(self) -> None: ...


def socket_handler(
    app: AsyncApp, slack: FakeSlack, web_client: AsyncWebClient | None = None
) -> SocketLink:
    """Bolt's aiohttp Socket Mode handler (fast pings, so a dropped socket is noticed fast)."""
    handler: SocketLink = AsyncSocketModeHandler(
        app, slack.app_token, ping_interval=0.1, web_client=web_client
    )
    return handler


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack that retries unacked events twice (after Slack's 3 s by default)."""
    with FakeSlack.running(max_retries=2) as fake:
        yield fake


@pytest.fixture
async def client(slack: FakeSlack) -> AsyncWebClient:
    """The real slack_sdk async Web API client, pointed at the fake."""
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


@pytest.fixture
async def app(slack: FakeSlack, client: AsyncWebClient) -> AsyncApp:
    """A real bolt app (listeners are added by each test)."""
    return AsyncApp(client=client, signing_secret=slack.signing_secret)


@pytest.fixture
async def socket_app(slack: FakeSlack, app: AsyncApp) -> AsyncIterator[AsyncApp]:
    """``app`` connected over Socket Mode."""
    handler = socket_handler(app, slack)
    await handler.connect_async()
    await slack.await_connected()
    yield app
    await handler.close_async()


@pytest.fixture
async def http_app(slack: FakeSlack, app: AsyncApp) -> AsyncIterator[str]:
    """``app`` served by bolt's own aiohttp server on 127.0.0.1; yields its Request URL."""
    runner = web.AppRunner(app.web_app(path="/slack/events"))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/slack/events"
    await runner.cleanup()


def subset(expected: Body, actual: Body) -> bool:
    """True when every key of ``expected`` has that value in ``actual`` (bolt adds team_id)."""
    return all(actual.get(k) == v for k, v in expected.items())


# The Web API, through the real clients.


async def test_auth_test_and_token_rules(slack: FakeSlack, client: AsyncWebClient) -> None:
    auth = await client.auth_test()
    assert (auth["user_id"], auth["bot_id"], auth["team_id"]) == ("U0BOT", "B0BOT", "T0FAKE")
    for token, method, error in [
        ("xoxb-wrong", "auth.test", "invalid_auth"),
        (slack.app_token, "chat.postMessage", "not_allowed_token_type"),
        (slack.bot_token, "apps.connections.open", "not_allowed_token_type"),
        (slack.bot_token, "no.such.method", "unknown_method"),
    ]:
        with pytest.raises(SlackApiError) as caught:
            await AsyncWebClient(token=token, base_url=slack.api_url).api_call(method)
        assert caught.value.response["error"] == error
        assert caught.value.response.status_code == 200
    with pytest.raises(SlackApiError, match="not_authed"):
        await AsyncWebClient(base_url=slack.api_url).auth_test()
    opened = await client.apps_connections_open(app_token=slack.app_token)
    assert str(opened["url"]).startswith(f"ws://127.0.0.1:{slack.port}/socket?ticket=")


async def test_post_update_react_delete_and_lookups(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    first = await client.chat_postMessage(channel=ALICE_DM, text="*hi*", mrkdwn=True)
    second = await client.chat_postMessage(channel=ALICE, blocks=APPROVAL_BLOCKS, text="Run ls?")
    assert second["channel"] == ALICE_DM  # a user id posts to the DM, as in Slack
    assert float(first["ts"]) < float(second["ts"])
    await client.chat_update(channel=ALICE_DM, ts=first["ts"], text="edited")
    await client.reactions_add(channel=ALICE_DM, timestamp=second["ts"], name="eyes")
    with pytest.raises(SlackApiError, match="already_reacted"):
        await client.reactions_add(channel=ALICE_DM, timestamp=second["ts"], name="eyes")
    assert slack.reactions(ALICE_DM, second["ts"]) == ["eyes"]
    assert [m["text"] for m in slack.sent(ALICE_DM)] == ["edited", "Run ls?"]
    await client.chat_delete(channel=ALICE_DM, ts=first["ts"])
    assert [m["ts"] for m in slack.sent(ALICE_DM)] == [second["ts"]]
    ephemeral = await client.chat_postEphemeral(channel=GENERAL, user=BOB, text="psst")
    assert slack.ephemerals(GENERAL)[0]["user"] == BOB and ephemeral["message_ts"]
    with pytest.raises(SlackApiError, match="user_not_in_channel"):
        await client.chat_postEphemeral(channel=ALICE_DM, user=BOB, text="not your DM")
    user = await client.users_info(user=ALICE)  # a GET with a query string
    assert user["user"]["profile"]["display_name"] == "Alice"
    assert (await client.conversations_info(channel=ALICE_DM))["channel"]["is_im"] is True
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await client.conversations_info(channel="C0NOPE")
    call = await slack.await_call("chat.postMessage", lambda c: "blocks" in c.args)
    assert call.args["blocks"] == APPROVAL_BLOCKS and call.token == slack.bot_token


async def test_messages_are_checked_like_slack(client: AsyncWebClient) -> None:
    long_section = {"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}
    cases: list[tuple[Body, str]] = [
        ({"text": "x" * 40_001}, "msg_too_long"),
        ({"text": "t", "blocks": [{"type": "divider"}] * 51}, "invalid_blocks"),
        ({"text": "t", "blocks": [long_section]}, "invalid_blocks"),
    ]
    for arguments, error in cases:
        with pytest.raises(SlackApiError) as caught:
            await client.chat_postMessage(channel=ALICE_DM, **arguments)
        assert caught.value.response["error"] == error
    with (
        pytest.warns(UserWarning, match="`text` argument is missing"),
        pytest.raises(SlackApiError, match="no_text"),
    ):
        await client.chat_postMessage(channel=ALICE_DM, text="")
    posted = await client.chat_postMessage(channel=ALICE_DM, text="x" * 40_000)
    assert posted["ok"]


def test_sync_client_form_bodies_and_blocking_wait(slack: FakeSlack) -> None:
    sync = WebClient(token=slack.bot_token, base_url=slack.api_url)
    sync.api_call("chat.postMessage", data={"channel": GENERAL, "text": "form", "blocks": "[]"})
    call = slack.wait_for("chat.postMessage")
    assert call.args == {"channel": GENERAL, "text": "form", "blocks": []}
    assert slack.sent(GENERAL)[0]["text"] == "form"


async def test_rate_limit_is_retried_by_slack_sdk_handler(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.fail("chat.postMessage", "ratelimited", status=429, retry_after=0)
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=ALICE_DM, text="once")
    assert caught.value.response.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "0"
    slack.fail("chat.postMessage", "ratelimited", status=429, retry_after=0)
    retrying = AsyncWebClient(
        token=slack.bot_token,
        base_url=slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    assert (await retrying.chat_postMessage(channel=ALICE_DM, text="twice"))["ok"]
    assert [c.status for c in slack.calls("chat.postMessage")] == [429, 429, 200]


async def test_unreachable_closes_connections_without_answering(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.unreachable()
    # slack_sdk's default handler would retry a disconnect once, after a backoff.
    no_retries = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url, retry_handlers=[])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await no_retries.auth_test()
    assert slack.calls() == []
    slack.unreachable(False)
    assert (await client.auth_test())["ok"]


async def test_shared_files_download_only_with_the_bot_token(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    sent = slack.user_sends(ALICE_DM, ALICE, "see file", files=[("notes.txt", b"hello file")])
    (shared,) = sent.event["files"]
    assert sent.event["subtype"] == "file_share" and shared["mimetype"] == "text/plain"
    info = await client.files_info(file=shared["id"])
    assert info["file"]["url_private"] == shared["url_private"]
    async with aiohttp.ClientSession() as http:
        auth = {"Authorization": f"Bearer {slack.bot_token}"}
        async with http.get(shared["url_private_download"], headers=auth) as response:
            assert await response.read() == b"hello file"
        async with http.get(shared["url_private"]) as response:  # no token: a login page
            assert response.status == 200 and response.content_type == "text/html"
            assert response.history[0].status == 302


# Socket Mode, through bolt's AsyncSocketModeHandler.


async def test_dm_message_reaches_the_app_which_replies(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    @socket_app.event("message")
    async def on_message(event: Body, say: AsyncSay) -> None:
        await say(f"echo: {event['text']}")

    sent = slack.user_sends(ALICE_DM, ALICE, "hello")
    call = await slack.await_call("chat.postMessage")
    assert subset({"channel": ALICE_DM, "text": "echo: hello"}, call.args)
    assert call.args.get("team_id") == "T0FAKE"  # bolt adds it
    ack = await slack.await_ack(sent.envelope.envelope_id)
    assert ack.payload is None and ack.via == "socket"
    event = sent.envelope.payload["event"]
    assert event["channel_type"] == "im" and event["client_msg_id"]
    assert sent.envelope.payload["event_id"].startswith("Ev")
    assert slack.connection_count == 1 and len(slack.calls("apps.connections.open")) == 1


async def test_channel_mention_brings_message_and_app_mention(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    seen: list[str] = []

    @socket_app.event("message")
    async def on_message(event: Body) -> None:
        seen.append("message")

    @socket_app.event("app_mention")
    async def on_mention(event: Body, say: AsyncSay) -> None:
        seen.append("app_mention")
        await say(text="in thread", thread_ts=event["ts"])

    sent = slack.user_sends(GENERAL, BOB, "status?", mention_bot=True)
    assert [e.payload["event"]["type"] for e in sent.envelopes] == ["message", "app_mention"]
    assert sent.event["text"] == "<@U0BOT> status?"
    call = await slack.await_call("chat.postMessage")
    assert subset({"channel": GENERAL, "thread_ts": sent.ts}, call.args)
    await slack.await_until(lambda: sorted(seen) == ["app_mention", "message"])


async def test_bot_posts_echo_back_as_events_that_bolt_acks_and_skips(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    slack.echo_bot_messages = True
    texts: list[str] = []

    @socket_app.event("message")
    async def on_message(event: Body, say: AsyncSay) -> None:
        texts.append(event["text"])
        await say(f"re: {event['text']}")

    slack.user_sends(ALICE_DM, ALICE, "one")
    await slack.await_until(lambda: len(slack.acks()) == 2)  # the message, then the echo
    echo = slack.courier.envelopes[slack.acks()[1].envelope_id].payload["event"]
    assert (echo["bot_id"], echo["text"], echo["channel_type"]) == ("B0BOT", "re: one", "im")
    slack.user_sends(ALICE_DM, ALICE, "two")
    await slack.await_call("chat.postMessage", count=2)
    assert texts == ["one", "two"]


async def test_slash_command_acked_and_answered_via_response_url(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    @socket_app.command("/pinclaw")
    async def on_command(ack: AsyncAck, command: Body, respond: AsyncRespond) -> None:
        await ack(f"Working on `{command['text']}`")
        await respond("Status: idle")

    sent = slack.user_runs_command(ALICE_DM, ALICE, "status")
    assert sent.envelope.accepts_response_payload is True
    ack = await slack.await_ack(sent.envelope.envelope_id)
    assert ack.payload == {"text": "Working on `status`"}
    posted = await slack.await_call("response_url")
    assert posted.args["text"] == "Status: idle" and posted.status == 200
    await slack.await_until(lambda: len(slack.ephemerals()) == 2)
    # bolt polls for ack() every 10 ms, so respond() may reach Slack before the ack does.
    assert sorted((e["via"], e["user"]) for e in slack.ephemerals(ALICE_DM)) == [
        ("ack", ALICE),
        ("response_url", ALICE),
    ]


async def test_button_press_ephemeral_for_others_update_for_approver(
    slack: FakeSlack, socket_app: AsyncApp, client: AsyncWebClient
) -> None:
    @socket_app.action("approve")
    async def on_approve(ack: AsyncAck, body: Body, respond: AsyncRespond) -> None:
        await ack()
        if body["user"]["id"] != ALICE:
            await client.chat_postEphemeral(
                channel=body["channel"]["id"], user=body["user"]["id"], text="Only Alice can"
            )
            return
        await respond(replace_original=True, text=f"Approved ({body['actions'][0]['value']})")

    posted = await client.chat_postMessage(channel=GENERAL, blocks=APPROVAL_BLOCKS, text="Run?")
    pressed = slack.user_presses(BOB, "approve")
    action = pressed.envelope.payload["actions"][0]
    assert (action["block_id"], action["value"]) == ("approval", "42")
    assert pressed.envelope.payload["container"]["message_ts"] == posted["ts"]
    await slack.await_ack(pressed.envelope.envelope_id)
    ephemeral = await slack.await_call("chat.postEphemeral")
    assert subset({"channel": GENERAL, "user": BOB, "text": "Only Alice can"}, ephemeral.args)
    slack.user_presses(ALICE, "approve", channel=GENERAL)
    await slack.await_call("response_url")
    assert [(m["text"], "blocks" in m) for m in slack.sent(GENERAL)] == [("Approved (42)", False)]
    with pytest.raises(LookupError):
        slack.user_presses(ALICE, "no-such-button")


async def test_dropped_socket_reconnects_and_events_flow_again(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    @socket_app.event("message")
    async def on_message(event: Body, say: AsyncSay) -> None:
        await say(event["text"])

    slack.drop()
    await slack.await_connected(2)
    slack.user_sends(ALICE_DM, ALICE, "still there?")
    await slack.await_call("chat.postMessage", lambda c: c.args["text"] == "still there?")
    slack.disconnect("refresh_requested")
    await slack.await_connected(3)
    slack.user_sends(ALICE_DM, ALICE, "and now?")
    await slack.await_call("chat.postMessage", lambda c: c.args["text"] == "and now?")
    assert len(slack.calls("apps.connections.open")) == 3


async def test_socket_connect_keeps_retrying_until_slack_is_reachable(
    slack: FakeSlack, app: AsyncApp
) -> None:
    slack.unreachable()
    # Without slack_sdk's default one-retry-after-backoff, each attempt fails at once.
    impatient = AsyncWebClient(base_url=slack.api_url, retry_handlers=[])
    handler = socket_handler(app, slack, impatient)
    connecting = asyncio.create_task(handler.connect_async())
    try:
        await slack.await_until(lambda: slack.refused >= 2)
        assert not connecting.done()  # no exception: slack_sdk retries every ping_interval
        slack.unreachable(False)
        await connecting  # returns after the websocket handshake, maybe before hello
        await slack.await_connected()
    finally:
        await handler.close_async()


async def test_socket_connect_with_a_bad_app_token_retries_forever(
    slack: FakeSlack, app: AsyncApp
) -> None:
    handler: SocketLink = AsyncSocketModeHandler(app, "xapp-wrong", ping_interval=0.05)
    connecting = asyncio.create_task(handler.connect_async())
    await slack.await_until(lambda: len(slack.calls("apps.connections.open")) >= 2)
    assert not connecting.done()
    assert {c.response["error"] for c in slack.calls("apps.connections.open")} == {"invalid_auth"}
    await handler.close_async()
    await connecting  # close() ends the retry loop


async def test_events_sent_while_disconnected_wait_for_the_next_connection(
    slack: FakeSlack, app: AsyncApp
) -> None:
    @app.event("message")
    async def on_message(say: AsyncSay) -> None:
        await say("got it")

    sent = slack.user_sends(ALICE_DM, ALICE, "early")
    assert [d.via for d in slack.deliveries()] == ["queued"]
    handler = socket_handler(app, slack)
    await handler.connect_async()
    try:
        await slack.await_ack(sent.envelope.envelope_id)
        await slack.await_call("chat.postMessage")
    finally:
        await handler.close_async()


async def test_redelivered_event_reaches_the_app_twice_with_retry_headers(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    seen: list[tuple[str, str]] = []

    @socket_app.event("message")
    async def on_message(body: Body, request: AsyncBoltRequest) -> None:
        retry = request.headers.get("x-slack-retry-num") or ["absent"]
        seen.append((body["event_id"], retry[0]))

    sent = slack.user_sends(ALICE_DM, ALICE, "once")
    await slack.await_ack(sent.envelope.envelope_id)
    again = slack.redeliver(sent.envelope)
    assert (again.retry_attempt, again.retry_reason) == (1, "timeout")
    await slack.await_ack(again.envelope_id)
    await slack.await_until(lambda: len(seen) == 2)
    event_id = sent.envelope.payload["event_id"]
    # Slack sends retry_attempt 0 on first deliveries, so bolt sets the header to "0".
    assert seen == [(event_id, "0"), (event_id, "1")]


async def test_unacked_events_are_retried_until_max_retries(
    slack: FakeSlack, socket_app: AsyncApp
) -> None:
    # No listener matches, so bolt answers 404 and its socket handler sends no ack.
    slack.ack_timeout = 0.2
    sent = slack.user_sends(ALICE_DM, ALICE, "nobody listens")
    await slack.await_until(lambda: len(slack.deliveries()) == 3)
    frames = [slack.courier.envelopes[d.envelope_id] for d in slack.deliveries()]
    retries = [(f.retry_attempt, f.retry_reason) for f in frames]
    assert retries == [(0, ""), (1, "timeout"), (2, "timeout")]
    assert {f.payload["event_id"] for f in frames} == {sent.envelope.payload["event_id"]}
    assert len({f.envelope_id for f in frames}) == 3 and slack.acks() == []


# HTTP mode, through bolt's own aiohttp server.


async def test_signed_http_event_reaches_the_app(
    slack: FakeSlack, app: AsyncApp, http_app: str
) -> None:
    @app.event("message")
    async def on_message(event: Body, say: AsyncSay) -> None:
        await say(f"http: {event['text']}")

    slack.use_http(http_app)
    sent = slack.user_sends(ALICE_DM, ALICE, "over http")
    ack = await slack.await_ack(sent.envelope.envelope_id)
    assert ack.via == "http"
    call = await slack.await_call("chat.postMessage")
    assert call.args["text"] == "http: over http"


async def test_http_command_and_button_are_form_encoded(
    slack: FakeSlack, app: AsyncApp, http_app: str, client: AsyncWebClient
) -> None:
    @app.command("/pinclaw")
    async def on_command(ack: AsyncAck, command: Body) -> None:
        await ack(f"you said {command['text']}")

    @app.action("deny")
    async def on_deny(ack: AsyncAck, respond: AsyncRespond) -> None:
        await ack()
        await respond(delete_original=True)

    slack.use_http(http_app)
    command = slack.user_runs_command(GENERAL, BOB, "help")
    assert (await slack.await_ack(command.envelope.envelope_id)).payload == {
        "text": "you said help"
    }
    await client.chat_postMessage(channel=GENERAL, blocks=APPROVAL_BLOCKS, text="Run?")
    slack.user_presses(ALICE, "deny")
    await slack.await_call("response_url", lambda c: c.args.get("delete_original") is True)
    assert slack.sent(GENERAL) == []


async def test_bolt_rejects_bad_signatures_and_old_timestamps(
    slack: FakeSlack, app: AsyncApp, http_app: str
) -> None:
    sent = slack.user_sends(ALICE_DM, ALICE, "hi", deliver=False)
    body = sent.envelope.payload
    good = await post_event(http_app, body, slack.signing_secret)
    assert good.status == 404  # signed fine; no listener matched
    forged = await post_event(http_app, body, "not-the-secret")
    assert forged.status == 401
    stale = await post_event(http_app, body, slack.signing_secret, timestamp=int(time.time()) - 600)
    assert stale.status == 401
    challenge = await post_event(http_app, url_verification("abc123"), slack.signing_secret)
    assert (challenge.status, challenge.json()) == (200, {"challenge": "abc123"})


async def test_http_failures_are_retried_with_slack_retry_headers(
    slack: FakeSlack, app: AsyncApp, http_app: str
) -> None:
    slack.use_http(http_app, signing_secret="wrong-secret")
    slack.user_sends(ALICE_DM, ALICE, "rejected")
    await slack.await_until(lambda: len(slack.deliveries()) == 3)
    assert [(d.status, d.error) for d in slack.deliveries()] == [(401, "http_error")] * 3
    retries = [slack.courier.envelopes[d.envelope_id] for d in slack.deliveries()]
    assert [e.retry_attempt for e in retries] == [0, 1, 2]
    assert slack.acks() == []


async def test_sync_callers_can_post_through_the_fakes_loop(slack: FakeSlack) -> None:
    async def echo(request: web.Request) -> web.Response:
        headers = dict(request.headers)
        return web.json_response({"body": await request.text(), "headers": headers})

    server = web.Application()
    server.router.add_post("/", echo)
    runner = web.AppRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/"
    try:
        answer = await asyncio.to_thread(
            slack.call, post_event(url, "a=1", "s", retry_num=2, retry_reason="http_timeout")
        )
    finally:
        await runner.cleanup()
    echoed = json.loads(answer.text)
    assert echoed["body"] == "a=1"
    assert echoed["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
    assert echoed["headers"]["X-Slack-Retry-Num"] == "2"
    assert echoed["headers"]["X-Slack-Signature"].startswith("v0=")
