"""The usage footer (``[agent] usage_footer``): one line under a chat reply with its cost.

The line adds up the ``model_calls`` rows of the reply's turn, written before the
turn returns: the tokens the provider reported, each way, and the cost when the
price table (``[usage.prices]``) knows every model the turn asked. It is written
in italics, which every channel shows more quietly than the reply.
"""

from __future__ import annotations

import logging

from bot.config import Config
from bot.core.errors import log_bug
from bot.store.usage import UsageStore, UsageTotal, money

log = logging.getLogger(__name__)


def usage_footer(config: Config, store: UsageStore | None) -> UsageFooter | None:
    """The footer when ``[agent] usage_footer`` is on (and usage is recorded), else None."""
    if not config.agent.usage_footer or store is None:
        return None
    return UsageFooter(store, config.usage.currency)


class UsageFooter:
    """Writes the footer line of a turn from its stored model calls."""

    def __init__(self, store: UsageStore, currency: str = "USD") -> None:
        self._store = store
        self._currency = currency

    async def under(self, text: str, turn_id: int | None) -> str:
        """``text`` with the footer of turn ``turn_id`` under it (unchanged without one)."""
        if turn_id is None:
            return text
        try:
            line = await self.line(turn_id)
        except Exception as exc:  # the reply matters more than its footer
            log_bug(log, f"the usage footer of turn {turn_id} failed", exc)
            return text
        return f"{text}\n\n{line}" if line else text

    async def line(self, turn_id: int) -> str:
        """The footer of turn ``turn_id`` ("" when the turn made no model call)."""
        total = await self._store.turn_total(turn_id)
        if not total.calls:
            return ""
        return footer_text(total, self._currency)


def footer_text(total: UsageTotal, currency: str = "USD") -> str:
    """``_— 1,234 tokens in · 56 out · $0.0012_`` (the cost only when every call was priced)."""
    parts = [f"{total.input_tokens:,} tokens in", f"{total.output_tokens:,} out"]
    if total.cost is not None and not total.unpriced:
        amount = money(total.cost)
        parts.append(f"${amount}" if currency.upper() == "USD" else f"{amount} {currency}")
    return "_— " + " · ".join(parts) + "_"
