"""``[usage]``: token budgets for the whole installation, and prices to turn tokens into cost.

Budgets count every model token (in and out, every person, cron and the
heartbeat) since midnight and since the first of the month, in the configured
timezone. Prices are per million tokens, keyed by the provider label
(``"openai:gpt-4o-mini"``) or by the bare model name (``"gpt-4o-mini"``).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.config.base import Section


class TokenPrice(Section):
    """``[usage.prices."KIND:MODEL"]``: what a million tokens cost, each way."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """What this many tokens cost, in the configured currency."""
        return (
            max(0, input_tokens) * self.input_per_million
            + max(0, output_tokens) * self.output_per_million
        ) / 1_000_000


class UsageConfig(Section):
    """Daily and monthly token caps (0: none), and the price table."""

    daily_tokens: int = Field(default=0, ge=0)
    monthly_tokens: int = Field(default=0, ge=0)
    currency: str = Field(default="USD", min_length=1, max_length=8)
    prices: dict[str, TokenPrice] = Field(default_factory=dict)

    @field_validator("prices")
    @classmethod
    def _check_names(cls, value: dict[str, TokenPrice]) -> dict[str, TokenPrice]:
        for name in value:
            if not name.strip() or name != name.strip() or name.endswith(":"):
                raise ValueError(
                    f'{name!r} is not a model name; write it like "openai:gpt-4o-mini" '
                    'or "gpt-4o-mini"'
                )
        return value

    def price_for(self, label: str) -> TokenPrice | None:
        """The price of the model a provider label names ("kind:model"), if the table has it.

        The full label wins over the bare model name, so one model served by two
        providers can have two prices.
        """
        found = self.prices.get(label)
        if found is None:
            _, _, model = label.partition(":")
            found = self.prices.get(model) if model else None
        return found
