"""What the daemon counts, for ``GET /metrics`` (Prometheus text format).

The parts of PinClaw call the small functions below (``count_turn``,
``count_tool_call``...). They do nothing until ``enable`` is called: only the
daemon, which serves ``/metrics``, does that, so ``pinclaw agent -m`` and the
other one-shot commands never import prometheus-client (50 ms, 10 MiB).
The metrics live in a registry of PinClaw's own, not in prometheus-client's
global one. Labels are few and bounded: channel and provider names from the
config, tool names from the registry (a name the model made up counts as
``unknown``), and fixed outcome words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

TURN_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)


class Metrics:
    """The collectors, in one registry."""

    def __init__(self) -> None:
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
            disable_created_metrics,
        )

        disable_created_metrics()  # type: ignore[no-untyped-call]  # no "_created" twins
        self.registry: CollectorRegistry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.turns: Counter = Counter(
            "pinclaw_turns",
            "Turns of the agent, by how they ended (done, failed, budget, interrupted, ...).",
            ["status"],
            registry=registry,
        )
        self.turn_seconds: Histogram = Histogram(
            "pinclaw_turn_seconds",
            "How long a turn took, from the message to the reply, tool calls included.",
            buckets=TURN_BUCKETS,
            registry=registry,
        )
        self.tool_calls: Counter = Counter(
            "pinclaw_tool_calls",
            "Tool calls by tool and outcome (ok, error, invalid, blocked, denied, expired, ...).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.approvals: Counter = Counter(
            "pinclaw_approvals",
            "Approval requests by outcome "
            "(approved, rule, denied, expired, unavailable, too_long).",
            ["outcome"],
            registry=registry,
        )
        self.approvals_after_untrusted: Counter = Counter(
            "pinclaw_approvals_after_untrusted",
            "Calls that asked because their turn had read untrusted content, by outcome "
            "(approved, denied, expired, unavailable).",
            ["outcome"],
            registry=registry,
        )
        self.model_calls: Counter = Counter(
            "pinclaw_model_calls",
            "Requests to a model that were answered, by provider kind and model.",
            ["provider", "model"],
            registry=registry,
        )
        self.model_tokens: Counter = Counter(
            "pinclaw_model_tokens",
            "Model tokens by provider kind, model and direction (input or output).",
            ["provider", "model", "direction"],
            registry=registry,
        )
        self.delivery_retries: Counter = Counter(
            "pinclaw_delivery_retries",
            "Sends to a chat platform that failed for a passing reason and were tried again.",
            registry=registry,
        )
        self.channel_reconnects: Counter = Counter(
            "pinclaw_channel_reconnects",
            "Times a connected channel lost its connection.",
            ["channel"],
            registry=registry,
        )
        self.channel_up: Gauge = Gauge(
            "pinclaw_channel_up",
            "1 while the channel is connected, else 0.",
            ["channel"],
            registry=registry,
        )
        self.inbox_depth: Gauge = Gauge(
            "pinclaw_inbox_depth",
            "Messages accepted and stored but not answered yet.",
            registry=registry,
        )
        self.owner_inbox_unread: Gauge = Gauge(
            "pinclaw_owner_inbox_unread",
            "Messages for the owner that no chat received, not read yet (pinclaw inbox).",
            registry=registry,
        )
        self.cron_runs: Counter = Counter(
            "pinclaw_cron_runs",
            "Runs of scheduled jobs and heartbeats by outcome (ok, failed, skipped, ...).",
            ["outcome"],
            registry=registry,
        )
        self.triggers_fired: Counter = Counter(
            "pinclaw_triggers_fired",
            "Events a trigger took, by trigger and outcome (fired, sent, failed, duplicate, "
            "cooldown, limited, quiet, inactive).",
            ["trigger", "outcome"],
            registry=registry,
        )
        self.trigger_source_up: Gauge = Gauge(
            "pinclaw_trigger_source_up",
            "1 while a trigger source watches what it names (a hook served, an entity "
            "followed, a pin claimed), else 0; by what it watches (webhook NAME, ha:ENTITY...).",
            ["source"],
            registry=registry,
        )
        self.storage_full: Counter = Counter(
            "pinclaw_storage_full",
            "Times the data folder was found full (writes refused for lack of space).",
            registry=registry,
        )
        self.storage_refused: Counter = Counter(
            "pinclaw_storage_refused_writes",
            "Writes to the data folder refused for lack of space.",
            registry=registry,
        )
        self.storage_writable: Gauge = Gauge(
            "pinclaw_storage_writable",
            "1 while writes to the data folder work, 0 while it is full.",
            registry=registry,
        )
        self.storage_writable.set(1)
        self.started: Gauge = Gauge(
            "pinclaw_start_time_seconds",
            "When the daemon started, in seconds since the epoch.",
            registry=registry,
        )

    def text(self) -> bytes:
        """Everything, in the Prometheus text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _Slot:
    """Where the process's collectors are, once counting is on."""

    metrics: Metrics | None = None


_slot = _Slot()


def enable() -> Metrics:
    """Start counting (once per process); the collectors."""
    if _slot.metrics is None:
        _slot.metrics = Metrics()
    return _slot.metrics


def split_label(label: str) -> tuple[str, str]:
    """A provider label ("openai:gpt-4o-mini") as (provider kind, model)."""
    kind, _, model = label.partition(":")
    return (kind or "unknown"), (model or "unknown")


def count_model_call(label: str, input_tokens: int, output_tokens: int) -> None:
    """Count one answered model request and its tokens."""
    metrics = _slot.metrics
    if metrics is None:
        return
    kind, model = split_label(label)
    metrics.model_calls.labels(kind, model).inc()
    metrics.model_tokens.labels(kind, model, "input").inc(max(0, input_tokens))
    metrics.model_tokens.labels(kind, model, "output").inc(max(0, output_tokens))


def count_turn(status: str, seconds: float) -> None:
    """Count one finished turn and how long it took."""
    if (metrics := _slot.metrics) is not None:
        metrics.turns.labels(status).inc()
        metrics.turn_seconds.observe(max(0.0, seconds))


def count_tool_call(tool: str, outcome: str) -> None:
    """Count one tool call by how it ended."""
    if (metrics := _slot.metrics) is not None:
        metrics.tool_calls.labels(tool, outcome).inc()


def count_approval(outcome: str) -> None:
    """Count one approval request by how it was decided."""
    if (metrics := _slot.metrics) is not None:
        metrics.approvals.labels(outcome).inc()


def count_approval_after_untrusted(outcome: str) -> None:
    """Count one call that asked because its turn had read untrusted content."""
    if (metrics := _slot.metrics) is not None:
        metrics.approvals_after_untrusted.labels(outcome).inc()


def count_delivery_retry() -> None:
    """Count one send tried again."""
    if (metrics := _slot.metrics) is not None:
        metrics.delivery_retries.inc()


def count_reconnect(channel: str) -> None:
    """Count one lost connection of a channel."""
    if (metrics := _slot.metrics) is not None:
        metrics.channel_reconnects.labels(channel).inc()


def count_cron_run(outcome: str) -> None:
    """Count one run of a scheduled job or heartbeat."""
    if (metrics := _slot.metrics) is not None:
        metrics.cron_runs.labels(outcome).inc()


def count_trigger(trigger: str, outcome: str) -> None:
    """Count one event a trigger took (or one delivery of its message) by outcome."""
    if (metrics := _slot.metrics) is not None:
        metrics.triggers_fired.labels(trigger, outcome).inc()


def count_storage_refused(*, first: bool) -> None:
    """Count one write refused for lack of space (``first``: it began a full episode)."""
    if (metrics := _slot.metrics) is not None:
        metrics.storage_refused.inc()
        if first:
            metrics.storage_full.inc()
            metrics.storage_writable.set(0)


def storage_writable() -> None:
    """Writes to the data folder work again."""
    if (metrics := _slot.metrics) is not None:
        metrics.storage_writable.set(1)
