"""The models a chat may use, and each chat's choice (the ``/model`` command).

The choices are the main provider's model (the default, asked with its
fallbacks), each name in ``[provider] choices`` (the main provider's endpoint,
key and settings with another model), each fallback's model and each
sub-agent's ``provider``; the same label (``kind:model``) is offered once.
People name a choice by its model name or by its label, in any case; where two
choices share a model name, the first listed wins and the label tells them apart.

A chat's choice is kept in the key-value store under the chat's session key,
so it outlives ``/new`` and restarts; a stored choice that is no longer
configured means the default again (said once in the log). A chosen model is
asked alone (fallbacks belong to the default), with its own request settings;
its provider is built the first time a turn uses it, over the shared HTTP
client, and kept. Only the people who decide on approvals on a channel may
switch; anyone in the chat may see the list.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from bot.agent.loop import ModelSettings
from bot.approvals.approvers import Approvers
from bot.config import Config
from bot.config.provider import ProviderSpec
from bot.core.messages import InboundMessage, SessionKey, one_line
from bot.providers import Provider, build_provider
from bot.store.kv import KeyValueStore

log = logging.getLogger(__name__)

NAMESPACE = "chat_model"  # key: the chat's session key; value: the chosen label ("": default)
DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One model a chat may use, and where the config names it."""

    spec: ProviderSpec
    role: str  # "the default", "a fallback", "agent NAME's model", or "" for [provider] choices

    @property
    def name(self) -> str:
        """The model name people type."""
        return self.spec.model

    @property
    def label(self) -> str:
        """``kind:model``, which also matches."""
        return self.spec.label

    def matches(self, typed: str) -> bool:
        """Whether ``typed`` names this choice (its model name or label, any case)."""
        wanted = typed.strip().casefold()
        return wanted in (self.name.casefold(), self.label.casefold())


@dataclass(frozen=True, slots=True)
class TurnModel:
    """What a chat's turn asks instead of the main provider."""

    provider: Provider
    settings: ModelSettings


def model_choices(config: Config) -> list[ModelChoice]:
    """Every choice the config offers, the default first, each label once."""
    main = config.provider
    found = [ModelChoice(main, "the default")]
    found += [
        ModelChoice(main.model_copy(update={"model": name, "fallbacks": [], "choices": []}), "")
        for name in (name.strip() for name in main.choices)
        if name
    ]
    found += [ModelChoice(spec, "a fallback") for spec in main.fallbacks]
    found += [
        ModelChoice(agent.provider, f"agent {name}'s model")
        for name, agent in config.agents.items()
        if agent.provider is not None
    ]
    unique: dict[str, ModelChoice] = {}
    for choice in found:
        unique.setdefault(choice.label.casefold(), choice)
    return list(unique.values())


def labelled(choices: Sequence[ModelChoice], label: str) -> ModelChoice | None:
    """The choice with this label (any case), or None."""
    return next((c for c in choices if c.label.casefold() == label.casefold()), None)


async def chosen(state: KeyValueStore, choices: Sequence[ModelChoice], session: str) -> ModelChoice:
    """The choice stored for ``session`` (the first, the default, when none is or it is gone),
    for pages that show it without switching."""
    stored = await state.get(NAMESPACE, session)
    return (labelled(choices, stored) if stored else None) or choices[0]


class ChatModels:
    """The choices, each chat's stored choice, and the providers built for them."""

    def __init__(
        self,
        config: Config,
        client: httpx.AsyncClient,
        state: KeyValueStore,
        approvers: Approvers,
    ) -> None:
        self.choices: Sequence[ModelChoice] = model_choices(config)
        self._client = client
        self._state = state
        self._approvers = approvers
        self._tokens_per_day = config.security.max_tokens_per_day
        self._providers: dict[str, Provider] = {}
        self._told: set[tuple[str, str]] = set()  # stale choices already logged

    @property
    def default(self) -> ModelChoice:
        """The main provider's model."""
        return self.choices[0]

    def find(self, typed: str) -> ModelChoice | None:
        """The choice ``typed`` names (a model name or label), or None."""
        return next((choice for choice in self.choices if choice.matches(typed)), None)

    async def current(self, session: SessionKey) -> ModelChoice:
        """The model this chat uses: its stored choice while configured, else the default."""
        stored = await self._state.get(NAMESPACE, str(session))
        if not stored:
            return self.default
        choice = labelled(self.choices, stored)
        if choice is None:
            if (str(session), stored) not in self._told:
                self._told.add((str(session), stored))
                log.warning(
                    "%s chose the model %s, which is no longer configured; it uses the default %s",
                    session,
                    stored,
                    self.default.label,
                )
            return self.default
        return choice

    async def for_turn(self, session: SessionKey) -> TurnModel | None:
        """What this chat's next turn asks; None for the default (the main provider)."""
        choice = await self.current(session)
        if choice is self.default:
            return None
        provider = self._providers.get(choice.label)
        if provider is None:
            provider = self._providers[choice.label] = build_provider(choice.spec, self._client)
        settings = ModelSettings(
            choice.spec.max_tokens, choice.spec.temperature, self._tokens_per_day
        )
        return TurnModel(provider, settings)

    async def describe(self, session: SessionKey) -> str:
        """The chat's model for ``/status``."""
        current = await self.current(session)
        if current is self.default:
            return current.label
        return f"{current.label} (chosen for this chat; the default is {self.default.label})"

    async def command(self, message: InboundMessage, args: str) -> str:
        """The answer to ``/model`` (the list) or ``/model NAME`` (switch this chat)."""
        wanted = args.strip()
        current = await self.current(message.session)
        if not wanted:
            return self.listing(current)
        if not await self._approvers.may_decide(message.channel, message.sender_id):
            return (
                "Only the people who approve requests here can switch the model. "
                "/model shows the models."
            )
        choice = self.default if wanted.casefold() == DEFAULT else self.find(wanted)
        if choice is None:
            # As typed, in code: no markup of someone's text runs in the bot's answer.
            shown = one_line(wanted, 80).replace("`", "'")
            return f'There is no model called "`{shown}`" here.\n\n{self.listing(current)}'
        stored = "" if choice is self.default else choice.label
        await self._state.set(NAMESPACE, str(message.session), stored)
        log.info("%s now uses %s (chosen by %s)", message.session, choice.label, message.sender_id)
        if choice is self.default:
            return f"This chat now uses the default model, {choice.name}."
        return f"This chat now uses {choice.name}. /model default goes back."

    def listing(self, current: ModelChoice) -> str:
        """The choices, one a line, the default and this chat's model marked."""
        names = [choice.name.casefold() for choice in self.choices]
        lines = ["Models this chat can use:"]
        for choice in self.choices:
            notes = [choice.role] if choice.role else []
            if choice is current:
                notes.append("in use here")
            # A model name two kinds share is typed as its label.
            if names.count(choice.name.casefold()) > 1:
                line = f"- {choice.label}"
            else:
                line = f"- {choice.name} ({choice.spec.kind})"
            lines.append(line + (f" — {', '.join(notes)}" if notes else ""))
        lines.append("/model NAME switches this chat; /model default goes back.")
        return "\n".join(lines)
