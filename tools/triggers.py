"""The trigger tools: the agent sets up, lists and removes triggers ("tell me when the
garage door opens").

Making a trigger is medium risk: it lets PinClaw act later with nobody asking, so
in ``supervised`` mode a person approves it, and the approval card spells out the
whole trigger. It delivers to the chat it was made in unless told otherwise, and
its ``ask`` turns run as the person who made it. Only a turn someone typed can make
or remove triggers: a trigger's, a job's or the heartbeat's turn cannot, so nothing
sets itself off in a loop. A webhook needs a secret, which has no place in a chat:
those are made in the config file or with ``pinclaw triggers add``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from bot.config import Config
from bot.core.errors import ToolError, UserError
from bot.core.tool_api import Assessment, Tool, ToolContext, tool
from bot.cron.jobs import when as local_time
from bot.cron.store import Target
from bot.triggers.making import check_trigger, trigger_from
from bot.triggers.service import TriggerService
from bot.triggers.spec import Trigger

MAX_STORED = 50
"""Triggers made from chats and the command line, at most (the config's do not count)."""
Deliver = Literal["this_chat", "owner", "terminal", "log", "none"]

_ON_HELP = (
    "What it listens to: 'gpio:DEVICE' (a GPIO input of the config), "
    "'sensor:NAME.QUANTITY' (e.g. 'sensor:greenhouse.temperature'), 'ha:ENTITY_ID' (a Home "
    "Assistant entity, e.g. 'ha:cover.garage_door'), or 'serial:PORT' (lines from a "
    "configured serial port)"
)
_WHEN_HELP = (
    "gpio: 'on' (default), 'off' or 'change'; sensor (required): 'below 5' or 'above 30'; "
    "ha: the state to wait for, e.g. 'open' (omit for any change)"
)


def trigger_tools(service: TriggerService, config: Config) -> list[Tool]:
    """``trigger_add``, ``trigger_list`` and ``trigger_remove``, bound to the daemon's
    trigger service and checked against ``config``."""

    def made(ctx: ToolContext, **values: Any) -> Trigger:
        """The trigger a ``trigger_add`` call describes, checked; ``ToolError`` if it
        cannot be made here."""
        if ctx.origin != "chat":
            raise ToolError("a trigger's, scheduled job's or heartbeat's turn cannot make triggers")
        name = str(values["name"]).strip()
        if str(values["on"]).strip().partition(":")[0].strip() == "webhook":
            raise ToolError(
                "a webhook trigger needs a secret, which has no place in a chat: ask the "
                "owner to add it to the config file or with `pinclaw triggers add NAME "
                "--on webhook`"
            )
        keys = {
            "name": name,
            "on": values["on"],
            "to": _target(ctx, values["deliver_to"]),
            "say": values["say"],
            "ask": values["ask"],
            "when": values["when"],
            "for": values["held_for"],
            "cooldown": values["cooldown"],
            "quiet_hours": values["quiet_hours"],
            "active_hours": values["active_hours"],
            "pattern": values["pattern"],
        }
        given = {key: value for key, value in keys.items() if value not in (None, "")}
        try:
            trigger = trigger_from(
                given,
                made_by="chat",
                creator_id=ctx.sender_id,
                creator_name=ctx.sender_name or ctx.sender_id,
            )
            check_trigger(trigger, config)
        except UserError as exc:
            raise ToolError(str(exc)) from None
        return trigger

    def assess_add(ctx: ToolContext, **values: Any) -> Assessment:
        """Medium risk, with the whole trigger as the reason the card shows."""
        trigger = made(ctx, **values)  # a ToolError refuses the call before anyone is asked
        who = trigger.creator_name or "the person who asked"
        turns = f"; its agent turns run with the permissions of {who}" if trigger.ask else ""
        return Assessment("medium", f"sets up a trigger that acts on its own: "
                          f"{trigger.describe()}{turns}")  # fmt: skip

    @tool(effect="write", assess=assess_add)
    async def trigger_add(
        ctx: ToolContext,
        name: Annotated[str, Field(description="A short name: lower-case letters, digits, _ "
                                   "and -, e.g. 'garage-door'")],
        on: Annotated[str, Field(description=_ON_HELP)],
        say: Annotated[str | None, Field(description="A fixed message sent when it fires (no "
                       "model call); {placeholders} take the event's values, e.g. "
                       "'{device} is {state}' or '{name} is now {state}'. Give say or ask")] = None,
        ask: Annotated[str | None, Field(description="Instead of say: what you will be asked "
                       "to do when it fires, with the event as context, e.g. 'Tell the user "
                       "the garage door opened and whether it is late'")] = None,
        when: Annotated[str | None, Field(description=_WHEN_HELP)] = None,
        held_for: Annotated[str | None, Field(description="Fire only if the condition holds "
                            "this long, e.g. '3m'")] = None,
        cooldown: Annotated[str | None, Field(description="After firing, stay quiet this "
                            "long, e.g. '10m'")] = None,
        quiet_hours: Annotated[str | None, Field(description="Do not fire in these hours, "
                               "e.g. '22:00-07:00'")] = None,
        active_hours: Annotated[str | None, Field(description="Fire only in these hours, "
                                "e.g. '08:00-18:00'")] = None,
        pattern: Annotated[str | None, Field(description="serial only (required there): a "
                           "regular expression a line must match")] = None,
        deliver_to: Annotated[Deliver, Field(description="Where its messages go; this_chat "
                              "unless the user says so. owner: the owner's private chat; "
                              "terminal: the owner's inbox (`pinclaw inbox`); log: "
                              "PinClaw's log; none: only its history")] = "this_chat",
    ) -> str:  # fmt: skip
        """Set up a trigger: when something happens (a GPIO input changes, a sensor crosses
        a threshold, a Home Assistant entity changes, a serial line matches), send a
        message or run a turn. It watches from now on, until removed."""
        trigger = made(
            ctx, name=name, on=on, say=say, ask=ask, when=when, held_for=held_for,
            cooldown=cooldown, quiet_hours=quiet_hours, active_hours=active_hours,
            pattern=pattern, deliver_to=deliver_to,
        )  # fmt: skip
        if trigger.name in service.triggers:
            raise ToolError(
                f"there is already a trigger called {trigger.name!r}; pick another name, or "
                "remove that one first (see trigger_list)"
            )
        if len(await service.store.triggers()) >= MAX_STORED:
            raise ToolError(f"there are already {MAX_STORED} triggers made outside the config")
        await service.store.add(trigger)
        await service.reload()  # it watches from now on
        return f"Made the trigger {trigger.describe()}. It is watching now."

    @tool()
    async def trigger_list(ctx: ToolContext) -> str:
        """List the triggers (from the config file and made since), with their last firing."""
        triggers = service.triggers
        if not triggers:
            return "No triggers."
        lines = []
        for name in sorted(triggers):
            trigger = triggers[name]
            lines.append(f"{trigger.describe()} ({origin(trigger)})")
            for firing in await service.store.history(name, 1):
                what = firing.outcome if firing.status == "skipped" else firing.status
                lines.append(f"  last: {local_time(firing.at, ctx.timezone)} {what}")
        return "\n".join(lines)

    @tool(effect="write")
    async def trigger_remove(
        ctx: ToolContext,
        name: Annotated[str, Field(description="The trigger's name, from trigger_list")],
    ) -> str:
        """Remove a trigger made from a chat or the command line (it stops at once)."""
        if ctx.origin != "chat":
            raise ToolError(
                "a trigger's, scheduled job's or heartbeat's turn cannot remove triggers"
            )
        if service.configured(name):
            raise ToolError(
                f"{name!r} is defined in the config file ([[triggers]]); only the owner can "
                "remove it there"
            )
        if not await service.store.remove(name):
            raise ToolError(f"there is no trigger called {name!r}; see trigger_list")
        await service.reload()
        return f"Removed the trigger {name}."

    return [trigger_add, trigger_list, trigger_remove]


def origin(trigger: Trigger) -> str:
    """Where a trigger was made, for lists."""
    if trigger.made_by == "config":
        return "config file"
    if trigger.made_by == "cli":
        return "made with pinclaw triggers add"
    return f"made in a chat by {trigger.creator_name or trigger.creator_id}"


def _target(ctx: ToolContext, deliver_to: str) -> str:
    """The written target for ``deliver_to``: this chat's ``CHANNEL:CHAT_ID[:THREAD]``."""
    if deliver_to == "this_chat":
        s = ctx.session
        return str(Target("chat", s.channel, s.chat_id, s.thread_id, ctx.is_direct))
    return "terminal:owner" if deliver_to == "terminal" else deliver_to
