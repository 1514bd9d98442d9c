"""The Triggers page: every trigger with the state of its source and its last firing,
the latest firings, and a test firing or the removal of one.

"Test" records a firing with a sample event, as ``pinclaw triggers test`` does:
the trigger's limits do not apply, and the delivery worker sends it within
seconds to the trigger's target. "Remove" is for triggers made from a chat or
the command line; one in the config file stays until its table is deleted there.
Both are recorded in the audit log with the person logged in.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from bot.panel.actions import done, record_action
from bot.panel.context import panel_deps, panel_session
from bot.panel.render import render
from bot.panel.router import PanelRouter
from bot.triggers.overview import TriggerState, trigger_states
from bot.triggers.samples import sample_event
from bot.triggers.service import TriggerService
from bot.triggers.spec import Trigger
from bot.triggers.store import Firing

HISTORY_SHOWN = 20
NAME = "{name:[a-z0-9_-]+}"


@dataclass(frozen=True, slots=True)
class FiringRow:
    """One firing, as the tables show it."""

    at: float
    trigger: str
    kind: str  # event, summary, test
    result: str  # "sent to telegram:7001", "held back (cooldown)", "waiting: chat down"
    tone: str  # ok, warn, bad: the colour of the result
    summary: str  # what happened
    text: str  # what was said


@dataclass(frozen=True, slots=True)
class TriggerRow:
    """One trigger, as the triggers table shows it."""

    name: str
    on: str
    action: str  # "say" or "ask"
    text: str
    target: str
    defined: str  # "the config file", "a chat, by Ada", "the command line"
    removable: bool
    state: TriggerState
    last: FiringRow | None


@dataclass(frozen=True, slots=True)
class TriggersView:
    """Everything the Triggers page shows."""

    available: bool
    triggers: tuple[TriggerRow, ...]
    firings: tuple[FiringRow, ...]


async def triggers_view(service: TriggerService | None) -> TriggersView:
    """Every trigger (the config's and the stored ones) and the latest firings."""
    if service is None:
        return TriggersView(False, (), ())
    states = {state.name: state for state in trigger_states(service.triggers, service.states())}
    rows = []
    for name, trigger in sorted(service.triggers.items()):
        last = await service.store.history(name, 1)
        rows.append(
            TriggerRow(
                name=name,
                on=trigger.on,
                action=trigger.action,
                text=trigger.say if trigger.action == "say" else trigger.ask,
                target=trigger.to,
                defined=_defined(trigger),
                removable=not service.configured(name),
                state=states[name],
                last=firing_row(last[0]) if last else None,
            )
        )
    firings = tuple(firing_row(f) for f in await service.store.history(limit=HISTORY_SHOWN))
    return TriggersView(True, tuple(rows), firings)


def firing_row(firing: Firing) -> FiringRow:
    """A stored firing for the tables."""
    if firing.status == "sent":
        result, tone = f"sent to {firing.delivered_to or 'its target'}", "ok"
    elif firing.status == "skipped":
        result, tone = f"held back ({firing.outcome})", "warn"
    elif firing.status == "failed":
        result, tone = f"failed: {firing.error or 'not delivered'}", "bad"
    elif firing.status == "asking":
        result, tone = "the agent is on it", "warn"
    else:
        waiting = f": {firing.error}" if firing.error else ""
        result, tone = f"waiting to be sent{waiting}", "warn"
    return FiringRow(
        firing.at, firing.trigger, firing.kind, result, tone, firing.event.summary, firing.text
    )


def _defined(trigger: Trigger) -> str:
    if trigger.made_by == "config":
        return "the config file"
    if trigger.made_by == "chat":
        return f"a chat, by {trigger.creator_name or trigger.creator_id}"
    return "the command line"


def routes(router: PanelRouter) -> None:
    """``/triggers`` and each trigger's test and remove."""
    router.get("/triggers", page)
    router.post(f"/triggers/{NAME}/test", fire_test)
    router.post(f"/triggers/{NAME}/remove", remove)


async def page(request: web.Request) -> web.StreamResponse:
    """The triggers, their sources and the latest firings."""
    view = await triggers_view(panel_deps(request).triggers)
    return render(request, "triggers.html", title="Triggers", view=view)


async def fire_test(request: web.Request) -> web.StreamResponse:
    """Fire one trigger once with a sample event, whatever its limits say."""
    service, name = _service(request), request.match_info["name"]
    trigger = service.triggers.get(name)
    if trigger is None:
        await record_action(request, "trigger.test", outcome="refused", trigger=name)
        done(request, "/triggers", f"There is no trigger called {name} (any more).")
    hardware = panel_deps(request).app.loaded.config.hardware
    by = f"{panel_session(request).person_name} (web panel)"
    firing = await service.test(name, sample_event(trigger, hardware, by))
    await record_action(request, "trigger.test", trigger=name, firing=firing.id if firing else None)
    done(request, "/triggers", f"Test of {name} recorded: it goes to {trigger.to} within seconds.")


async def remove(request: web.Request) -> web.StreamResponse:
    """Delete a trigger made from a chat or the command line."""
    service, name = _service(request), request.match_info["name"]
    trigger = service.triggers.get(name)
    if trigger is not None and service.configured(name):
        await record_action(
            request, "trigger.remove", outcome="refused", trigger=name, why="in the config file"
        )
        done(
            request,
            "/triggers",
            f"{name} is defined in the config file: delete its [[triggers]] table there "
            "and restart PinClaw.",
        )
    if trigger is None or not await service.store.remove(name):
        await record_action(request, "trigger.remove", outcome="refused", trigger=name)
        done(request, "/triggers", f"There is no trigger called {name} (any more).")
    await service.reload()  # stop watching now, not at the next poll
    await record_action(request, "trigger.remove", trigger=name, was=trigger.describe())
    done(request, "/triggers", f"Removed the trigger {name}.")


def _service(request: web.Request) -> TriggerService:
    service = panel_deps(request).triggers
    if service is None:
        done(request, "/triggers", "Triggers are not running in this daemon.")
    return service
