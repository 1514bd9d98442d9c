"""Building the approval service for the daemon and for ``pinclaw chat``."""

from __future__ import annotations

from collections.abc import Mapping

from bot.approvals.approvers import Approvers
from bot.approvals.service import ApprovalService
from bot.approvals.store import ApprovalStore
from bot.config import LoadedConfig
from bot.core.channel import Channel
from bot.daemon.app import App
from bot.store.inbound import InboundStore


async def approval_service(
    app: App,
    loaded: LoadedConfig,
    channels: Mapping[str, Channel],
    approvers: Approvers,
    inbound: InboundStore | None = None,
    *,
    expire_leftovers: bool = True,
) -> ApprovalService:
    """The service, set on the gate, with requests left open by a previous run expired
    (``expire_leftovers``: not while a daemon runs beside, whose turns still wait)."""
    store = ApprovalStore(app.db)
    await store.setup()
    service = ApprovalService(
        store,
        channels=channels,
        approvers=approvers,
        timeout_s=loaded.config.security.approval_timeout_s,
        zone=loaded.timezone(),
        inbound=inbound,
        people=app.people,
    )
    if expire_leftovers:
        await service.expire_leftovers()
    app.gate.set_approver(service)
    return service
