"""The Approvals page: requests waiting for a decision, the "always" rules, recent decisions.

Each pending request shows the tool, its arguments whole (``bot.security.visible``:
hidden characters and long runs of blanks as marks; a file's content in full even
where the chat could show only its size), the risk and why, who asked in which
chat, and when it expires,
with the same choices as its buttons in the chat (``texts.buttons``). A choice
goes through ``ApprovalService.decide_from_panel``: the same record, the same
receipt edited into the chat message, and the waiting tool call goes on.
Rules can be revoked. Every decision and revocation is audited with the person.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from bot.approvals.store import EVERYONE, Rule, StoredApproval
from bot.approvals.texts import CHOICES, buttons, parse_action
from bot.panel.actions import done, record_action
from bot.panel.context import PanelDeps, panel_deps, panel_session
from bot.panel.render import render
from bot.panel.router import PanelRouter

RECENT = 10
_LABELS = {"once": "Allow once", "always": "Always (everyone)", "deny": "Deny"}


@dataclass(frozen=True, slots=True)
class Offer:
    """One choice on a pending request."""

    choice: str
    label: str


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending request as the page shows it."""

    record: StoredApproval
    asker: str
    chat: str
    offers: tuple[Offer, ...]


@dataclass(frozen=True, slots=True)
class ShownRule:
    """An "always" rule with the name of whom it is for."""

    rule: Rule
    whom: str


def routes(router: PanelRouter) -> None:
    """``/approvals``, deciding a request, revoking a rule."""
    router.get("/approvals", page)
    router.post("/approvals/{approval_id}/decide", decide)
    router.post("/approvals/rules/{rule_id}/revoke", revoke)


async def page(request: web.Request) -> web.StreamResponse:
    """Pending requests, rules and the latest decisions."""
    deps = panel_deps(request)
    if deps.approvals is None:
        return render(request, "approvals.html", title="Approvals", enabled=False)
    store = deps.approvals.store
    names = await _names(deps)
    pending = [_pending(record, names) for record in await store.pending()]
    names[EVERYONE] = "everyone"
    rules = [ShownRule(rule, names.get(rule.person_id, "?")) for rule in await store.rules()]
    recent = await store.recent(["once", "always", "denied", "expired"], RECENT)
    return render(
        request,
        "approvals.html",
        title="Approvals",
        enabled=True,
        pending=pending,
        rules=rules,
        recent=recent,
    )


async def decide(request: web.Request) -> web.StreamResponse:
    """Allow once, always (for the person or everyone), or deny one request."""
    deps = panel_deps(request)
    approval_id = request.match_info["approval_id"]
    sent = str((await request.post()).get("choice", ""))
    if deps.approvals is None:
        done(request, "/approvals", "Approvals are not in use.")
    choice = next((c for c in CHOICES if c == sent), None)
    if choice is None:
        raise web.HTTPBadRequest(text="Unknown choice.\n")
    store = deps.approvals.store
    before = await store.get(approval_id)
    person = panel_session(request).person_name
    reply = await deps.approvals.decide_from_panel(approval_id, choice, person)
    after = await store.get(approval_id)
    settled = bool(before and before.status == "pending" and after and after.status != "pending")
    await record_action(
        request,
        f"approval.{choice}",
        outcome="ok" if settled else "refused",
        approval=approval_id,
        tool=before.tool if before else "",
        arguments=before.summary if before else "",
        reply=reply.text,
    )
    done(request, "/approvals", reply.text)


async def revoke(request: web.Request) -> web.StreamResponse:
    """Remove an "always" rule: that call will ask again."""
    deps = panel_deps(request)
    if deps.approvals is None:
        done(request, "/approvals", "Approvals are not in use.")
    try:
        rule_id = int(request.match_info["rule_id"])
    except ValueError:
        raise web.HTTPNotFound() from None
    store = deps.approvals.store
    rule = next((r for r in await store.rules() if r.id == rule_id), None)
    removed = await store.revoke_rule(rule_id)
    await record_action(
        request,
        "rule.revoke",
        outcome="ok" if removed else "refused",
        rule=rule_id,
        tool=rule.tool if rule else "",
        pattern=rule.summary if rule else "",
    )
    if not removed:
        done(request, "/approvals", f"There is no rule #{rule_id} any more.")
    done(request, "/approvals", f"Removed rule #{rule_id}; that call will ask again.")


async def _names(deps: PanelDeps) -> dict[int, str]:
    return {person.id: person.name for person in await deps.app.people.all()}


def _pending(record: StoredApproval, names: dict[int, str]) -> Pending:
    person = names.get(record.person_id, "") if record.person_id != EVERYONE else ""
    if record.origin.startswith("cron"):
        asker = f"the scheduled job {record.origin.partition(':')[2]}".strip()
    else:
        asker = person or record.sender_id or "someone"
    thread = f", thread {record.thread_id}" if record.thread_id else ""
    chat = f"{record.channel} chat {record.chat_id}{thread}"
    offers = []
    for button in buttons(record.id, record.risk, person):
        parsed = parse_action(button.action_id)
        if parsed is not None:
            choice = parsed[1]
            label = f"Always (for {person})" if choice == "person" else _LABELS[choice]
            offers.append(Offer(choice, label))
    return Pending(record, asker, chat, tuple(offers))
