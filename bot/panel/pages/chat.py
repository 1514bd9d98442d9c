"""The Chat page: the web chat channel (``channels.web``) in the panel.

``GET /chat`` shows the conversation (rendered here, readable without
JavaScript) and a form; ``POST /chat/send`` hands the message to the channel,
which puts it into the daemon's inbox like any chat's; ``GET /chat/events``
streams what changes (Server-Sent Events: drafts, progress lines, replies,
approval requests) to ``static/chat.js``; ``POST /chat/press`` decides an
approval through the same path as a button in any chat. Without JavaScript the
forms post and the page comes back (refreshing itself while a reply is being
written). When the config offers more than one model, a small form under the
message form switches this chat's model by sending ``/model NAME`` like a typed
message. Only the owner chats here: the person the panel's login proved.
"""

from __future__ import annotations

from aiohttp import web

from bot.approvals.texts import parse_action
from bot.core.messages import SessionKey
from bot.daemon.models import chosen, model_choices
from bot.panel.actions import done, notify, record_action
from bot.panel.context import panel_deps, panel_session
from bot.panel.render import render
from bot.panel.router import PanelRouter
from bot.store.kv import KeyValueStore
from channels.web.channel import NotRunning, WebChannel
from channels.web.event_stream import serve_events
from channels.web.events import CHANNEL, CHAT_ID, new_nonce
from channels.web.transcript import opening_entries

FETCH_HEADER = "X-Requested-With"  # set by the panel's scripts: answer with JSON, not a page
CHAT_OFF = "The web chat is off: add a [channels.web] table to the config and restart PinClaw."


def routes(router: PanelRouter) -> None:
    """``/chat``, ``/chat/send``, ``/chat/events`` and ``/chat/press``."""
    router.get("/chat", page)
    router.post("/chat/send", send)
    router.get("/chat/events", events)
    router.post("/chat/press", press)


async def page(request: web.Request) -> web.StreamResponse:
    """The conversation so far and the message form."""
    chat = _chat(request)
    if chat is None:
        return render(request, "chat.html", title="Chat", chat=None, off=CHAT_OFF)
    await _owner_only(request)
    after = chat.feed.last_id  # before reading: a change in between is sent again, not lost
    app = panel_deps(request).app
    entries = await opening_entries(app.history, chat.feed, chat.settings.history_limit)
    models = model_choices(app.loaded.config)
    current = await chosen(KeyValueStore(app.db), models, str(SessionKey(CHANNEL, CHAT_ID)))
    return render(
        request,
        "chat.html",
        title="Chat",
        chat=chat,
        entries=entries,
        epoch=chat.feed.epoch,
        after=after,
        nonce=new_nonce(),
        writing=chat.writing,
        models=models if len(models) > 1 else [],  # the switch posts "/model NAME"
        current=current,
        model_nonce=new_nonce(),
    )


async def send(request: web.Request) -> web.StreamResponse:
    """Hand the owner's message to the web chat; back to the page (or JSON for the script)."""
    chat = _require_chat(request)
    name = await _owner_only(request)
    try:  # aiohttp turns a percent-encoded byte that is not UTF-8 into U+FFFD itself
        form = await request.post()
    except ValueError:  # a raw byte that is not UTF-8 (no browser sends one)
        return _answer(request, 400, "That message was not UTF-8 text, so it was not sent.")
    text, nonce = str(form.get("text", "")), str(form.get("nonce", ""))
    if not text.strip():
        return _answer(request, 400, "Type a message first.")
    try:
        fresh = await chat.accept(text, nonce, name)
    except NotRunning as exc:
        return _answer(request, 503, str(exc))
    await record_action(
        request, "chat.send", outcome="ok" if fresh else "duplicate", chars=len(text)
    )
    if _wants_json(request):
        return web.json_response({"ok": True, "duplicate": not fresh, "nonce": new_nonce()})
    done(request, "/chat")


async def events(request: web.Request) -> web.StreamResponse:
    """What changes in the chat, as Server-Sent Events, until the page goes away."""
    chat = _require_chat(request)
    await _owner_only(request)
    return await serve_events(request, chat.feed)


async def press(request: web.Request) -> web.StreamResponse:
    """A button under an approval request: decided as a tap in any chat would be."""
    chat = _require_chat(request)
    name = await _owner_only(request)
    form = await request.post()
    action, ref = str(form.get("action", "")), str(form.get("ref", ""))
    if not action:
        return _answer(request, 400, "That button sent nothing; reload the page and try again.")
    reply = await chat.press(action, ref, name)
    decision = parse_action(action)
    if decision is None:
        await record_action(request, "chat.press", outcome=reply.text, button=action)
    else:
        approval, choice = decision
        what = f"approval.{choice}"
        await record_action(request, what, outcome=reply.text, approval=approval, via="chat")
    if _wants_json(request):
        return web.json_response({"ok": True, "text": reply.text})
    done(request, "/chat")  # the answer is on the page, under the request


def _chat(request: web.Request) -> WebChannel | None:
    channel = panel_deps(request).channels.get("web")
    return channel if isinstance(channel, WebChannel) else None


def _require_chat(request: web.Request) -> WebChannel:
    chat = _chat(request)
    if chat is None:
        raise web.HTTPNotFound(text=f"{CHAT_OFF}\n")
    return chat


async def _owner_only(request: web.Request) -> str:
    """The owner's name; 403 for anyone else (the web chat speaks as the owner)."""
    session = panel_session(request)
    owner = await panel_deps(request).app.people.owner()
    if session.person_id != owner.id:
        raise web.HTTPForbidden(text="Only the owner can use the web chat.\n")
    return session.person_name or owner.name


def _wants_json(request: web.Request) -> bool:
    return bool(request.headers.get(FETCH_HEADER))


def _answer(request: web.Request, status: int, text: str) -> web.StreamResponse:
    """A refusal: JSON for the script, a notice on the page for a plain form."""
    if _wants_json(request):
        return web.json_response({"ok": False, "error": text}, status=status)
    notify(request, text)
    raise web.HTTPSeeOther("/chat")
