"""What the agent loop does about usage: record each model call, refuse turns over budget.

The budgets are the installation's (``[usage] daily_tokens`` and
``monthly_tokens``), counted over every call since local midnight and since the
first of the month. A turn refused for the budget never reaches the model; the
chat gets a sentence saying which budget, how far it is used, when it resets
and which key raises it.
"""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.config.usage import UsageConfig
from bot.core.conversation import Usage
from bot.core.durations import format_duration
from bot.core.metrics import split_label
from bot.store.usage import (
    ModelCall,
    UsageStore,
    day_start,
    month_start,
    next_day_start,
    next_month_start,
)

log = logging.getLogger(__name__)


class UsageMeter:
    """Prices and records model calls; says when the installation's budget is used up."""

    def __init__(self, store: UsageStore, config: UsageConfig) -> None:
        self._store = store
        self._config = config

    async def record(
        self,
        label: str,
        usage: Usage,
        *,
        chat: str,
        sender: str,
        origin: str,
        turn_id: int | None = None,
    ) -> None:
        """Store one answered request of the provider ``label`` ("kind:model")."""
        kind, model = split_label(label)
        price = self._config.price_for(label)
        cost = price.cost(usage.input_tokens, usage.output_tokens) if price else None
        await self._store.record(
            ModelCall(
                provider=kind,
                model=model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost=cost,
                chat=chat,
                sender=sender,
                origin=origin,
                turn_id=turn_id,
            )
        )

    async def refusal(self, now: float | None = None) -> str:
        """A plain sentence when today's or this month's budget is used up, else ""."""
        now = time.time() if now is None else now
        zone = self._store.timezone
        daily, monthly = self._config.daily_tokens, self._config.monthly_tokens
        if daily > 0:
            used = await self._store.tokens_since(day_start(now, zone))
            if used >= daily:
                resets = next_day_start(now, zone)
                return self._refuse(
                    "daily_tokens",
                    f"the model budget for today is used up ({used:,} of {daily:,} tokens "
                    f"since midnight, {zone.key} time)",
                    f"It resets at midnight, in {_until(resets, now)}.",
                )
        if monthly > 0:
            used = await self._store.tokens_since(month_start(now, zone))
            if used >= monthly:
                resets = next_month_start(now, zone)
                return self._refuse(
                    "monthly_tokens",
                    f"the model budget for this month is used up ({used:,} of {monthly:,} "
                    f"tokens since {_date(month_start(now, zone), zone)}, {zone.key} time)",
                    f"It resets on {_date(resets, zone)}.",
                )
        return ""

    def _refuse(self, key: str, what: str, when: str) -> str:
        log.warning("turn refused: %s ([usage] %s)", what, key)
        return (
            f"Sorry, I can't answer right now: {what}. {when} "
            f"The owner can raise it with [usage] {key} in the config file."
        )


def _date(when: float, zone: ZoneInfo) -> str:
    """A day as people write it: "1 July"."""
    local = datetime.fromtimestamp(when, zone)
    return f"{local.day} {local:%B}"


def _until(then: float, now: float) -> str:
    """How long until ``then``, to the minute (at least one)."""
    return format_duration(max(1, math.ceil((then - now) / 60)) * 60)
