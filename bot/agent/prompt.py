"""The system prompt, built from sections: identity, time, channel, and tools in XML mode.

Live sections (the installed skills) are asked for their text on every build.
The identity lives in the workspace (``IDENTITY.md`` by default) so the owner can
edit who the assistant is; it is created with a sensible default on first run and
re-read when it changes. Later parts (memory) add sections through ``extra``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

if TYPE_CHECKING:
    from bot.core.messages import InboundMessage

DEFAULT_IDENTITY = """\
# Identity

You are PinClaw, a personal assistant that runs on your owner's own computer and
talks with people through chat apps and the terminal.

- Be brief and direct: chat messages are read on phones.
- Use your tools when they help; never invent a tool result. If a tool fails or
  is refused, say so plainly and suggest what the person can do.
- Ask before doing anything that cannot be undone.
"""


class PromptBuilder:
    """Builds the system prompt for one model request."""

    def __init__(
        self,
        identity_path: Path,
        timezone: ZoneInfo,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        notes: Sequence[str] = (),
        identity_text: str | None = None,
        live_sections: Sequence[Callable[[], str]] = (),
    ) -> None:
        self.identity_path = identity_path
        self._live_sections = tuple(live_sections)
        self._notes = tuple(notes)
        self._fixed_identity = identity_text
        self._timezone = timezone
        self._now = now
        self._identity = ""
        self._identity_mtime: float | None = None

    def ensure_identity(self) -> None:
        """Create the identity file with the default text if it does not exist."""
        if not self.identity_path.exists():
            self.identity_path.parent.mkdir(parents=True, exist_ok=True)
            self.identity_path.write_text(DEFAULT_IDENTITY, encoding="utf-8")

    def identity(self) -> str:
        """The identity text, re-read only when the file changed."""
        if self._fixed_identity is not None:
            return self._fixed_identity
        try:
            mtime = self.identity_path.stat().st_mtime
        except OSError:
            return DEFAULT_IDENTITY.strip()
        if mtime != self._identity_mtime:
            self._identity = self.identity_path.read_text(encoding="utf-8").strip()
            self._identity_mtime = mtime
        return self._identity or DEFAULT_IDENTITY.strip()

    def build(self, *, channel: str, tools_section: str = "", extra: Sequence[str] = ()) -> str:
        """The full system prompt: identity, now, channel context, extra sections, tools."""
        now = self._now().astimezone(self._timezone)
        sections = [
            self.identity(),
            f"Current time: {now:%A %Y-%m-%d %H:%M} ({self._timezone.key}).",
            channel,
            *self._notes,
            *extra,
            *(section() for section in self._live_sections),
            tools_section,
        ]
        return "\n\n".join(s.strip() for s in sections if s and s.strip())


def describe_chat(message: InboundMessage) -> str:
    """One sentence telling the model where it is talking and with whom."""
    who = message.sender_name or message.sender_id
    if message.channel == "terminal":
        return f"You are talking with {who}, your owner, in a terminal on the machine you run on."
    if message.is_direct:
        return f"You are talking with {who} in a direct chat on {message.channel.capitalize()}."
    title = f" {message.chat_title!r}" if message.chat_title else ""
    return (
        f"You are in the group chat{title} on {message.channel.capitalize()}; "
        f"{who} wrote the latest message."
    )
