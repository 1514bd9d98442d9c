"""The panel's pages: one module per page, each with ``routes(router: PanelRouter)``.

``PAGES`` lists the modules ``load_pages`` imports, in order; ``NAV`` is the
navigation of the layout. A new page is a module here (and a template in
``templates/``), one line in ``PAGES`` and, if it belongs in the menu, in ``NAV``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.panel.router import PanelRouter


@dataclass(frozen=True, slots=True)
class NavItem:
    """One entry of the navigation."""

    label: str
    path: str


NAV = (
    NavItem("Overview", "/"),
    NavItem("Approvals", "/approvals"),
    NavItem("Cron", "/cron"),
    NavItem("Triggers", "/triggers"),
    NavItem("Memory", "/memory"),
    NavItem("Audit", "/audit"),
    NavItem("Hardware", "/hardware"),
    NavItem("Chat", "/chat"),
)

PAGES = (
    "login",
    "overview",
    "approvals",
    "cron",
    "triggers",
    "memory",
    "audit",
    "hardware",
    "chat",
)


def load_pages(router: PanelRouter) -> None:
    """Import every page module and let it add its routes."""
    for name in PAGES:
        module = importlib.import_module(f"{__name__}.{name}")
        module.routes(router)
