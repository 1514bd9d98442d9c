"""The Overview page: how the daemon is, on one screen a phone can read.

Channels (state, since when, the last error), the scheduler and its next jobs,
the model, today's tokens and cost, what waits (approvals, unanswered messages,
the owner's inbox) and the latest problems: failed job runs, approval requests
nobody answered, channels that are down. The status part refreshes itself
every 10 s with JavaScript; without it, a reload shows the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from bot.panel.context import PanelDeps, panel_deps
from bot.panel.render import render
from bot.panel.router import PanelRouter
from bot.store.usage import combined, day_start

PROBLEMS = 8


@dataclass(frozen=True, slots=True)
class Problem:
    """One recent thing that went wrong, for the list on the overview."""

    at: float
    what: str
    detail: str
    link: str = ""


def routes(router: PanelRouter) -> None:
    """``/``."""
    router.get("/", page)


async def page(request: web.Request) -> web.StreamResponse:
    """The overview."""
    deps = panel_deps(request)
    report = await deps.reporter.status()
    return render(
        request,
        "overview.html",
        title="Overview",
        report=report,
        today=await _today(deps),
        problems=await _problems(deps, report),
    )


async def _today(deps: PanelDeps) -> dict[str, Any]:
    """Today's model calls, tokens and cost (cost None when no call was priced)."""
    usage = deps.app.usage
    if usage is None:
        return {"calls": 0, "tokens": 0, "cost": None, "unpriced": 0}
    since = day_start(time.time(), usage.timezone)
    total = combined(await usage.totals(since, "model"), "today")
    return {
        "calls": total.calls,
        "tokens": total.tokens,
        "cost": total.cost,
        "unpriced": total.unpriced,
    }


async def _problems(deps: PanelDeps, report: dict[str, Any]) -> list[Problem]:
    """Failed job runs, unanswered approval requests and channels that are down, newest first."""
    found: list[Problem] = []
    for name, channel in report["channels"].items():
        if channel["state"] != "connected" and channel["detail"]:
            found.append(
                Problem(channel["since"] or 0.0, f"{name} is {channel['state']}", channel["detail"])
            )
    scheduling = deps.scheduling
    if scheduling is not None and scheduling.service is not None:
        store = scheduling.service.store
        names = {job.id: job.name for job in await store.jobs()}
        for run in await store.history(limit=50):
            if run.status in ("failed", "interrupted"):
                job = names.get(run.job_id, f"job #{run.job_id} (deleted)")
                found.append(
                    Problem(run.ended_at or run.started_at, f"{job}: {run.status}", run.summary,
                            "/cron")
                )  # fmt: skip
    if deps.approvals is not None:
        for record in await deps.approvals.store.recent(["expired"], limit=PROBLEMS):
            found.append(
                Problem(record.decided_at or record.expires_at,
                        f"approval for {record.tool} expired", record.decided_by or "",
                        "/approvals")
            )  # fmt: skip
    found.sort(key=lambda problem: problem.at, reverse=True)
    return found[:PROBLEMS]
