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
    """What a million tokens of one model cost, in and out, in `[usage] currency`."""

    input_per_million: float = Field(
        ge=0,
        description="The price of a million input tokens (everything sent to the model: "
        "prompt, history, tool results), e.g. `0.15`; 0 for a model that costs nothing.",
    )
    output_per_million: float = Field(
        ge=0,
        description="The price of a million output tokens (what the model writes), e.g. `0.60`.",
    )

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """What this many tokens cost, in the configured currency."""
        return (
            max(0, input_tokens) * self.input_per_million
            + max(0, output_tokens) * self.output_per_million
        ) / 1_000_000


class UsageConfig(Section):
    """Token budgets for the whole installation, and the prices that turn tokens into cost."""

    daily_tokens: int = Field(
        default=0,
        ge=0,
        description="Model tokens (in and out) the whole installation may use per day: every "
        "person, scheduled jobs and the heartbeat; the day starts at midnight in `[general] "
        "timezone`. Once used up, new turns are not sent to the model and the chat is told "
        "which budget ran out and when it resets. 0: no budget.",
    )
    monthly_tokens: int = Field(
        default=0,
        ge=0,
        description="The same budget per calendar month, from the 1st at midnight in "
        "`[general] timezone`. 0: no budget.",
    )
    currency: str = Field(
        default="USD",
        min_length=1,
        max_length=8,
        description="The label put on costs (`pinclaw usage`, the usage footer); the prices "
        "are in this currency. Only a label: nothing is converted.",
    )
    prices: dict[str, TokenPrice] = Field(
        default_factory=dict,
        description='Prices per million tokens, one table per model: `[usage.prices."KIND:MODEL"]` '
        '(the provider label as the logs show it, e.g. `"openai:gpt-4o-mini"`, quoted because '
        'of the colon) or the bare model name (`[usage.prices."llama3.2"]`); the label wins. A '
        "model without a price is recorded without a cost. A price applies to calls made "
        "after it is set.",
    )

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
