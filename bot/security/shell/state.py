"""Where shell commands run, said the same way by the log, status, doctor, onboarding and panel.

The shell tool looks for the kernel sandbox (``tools.shell.shell_state``);
this module only turns what it found into the sentences people read, so that
every surface says it plainly, and in the same words, when commands run
without a sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

State = Literal["sandboxed", "unsandboxed", "disabled"]

INSTALL_HINT = "install bubblewrap: sudo apt install bubblewrap"


@dataclass(frozen=True, slots=True)
class ShellState:
    """Whether the shell tool runs commands in the sandbox, and the detail (what or why not)."""

    state: State
    detail: str = ""

    @property
    def sandboxed(self) -> bool:
        """True unless commands run without a sandbox."""
        return self.state != "unsandboxed"

    def sentence(self) -> str:
        """One line for a person: where commands run and, without a sandbox, what follows."""
        if self.state == "disabled":
            return "the shell tool is disabled: no commands run"
        if self.state == "sandboxed":
            return f"shell commands run in the sandbox: {self.detail}"
        return (
            f"shell commands run WITHOUT a sandbox ({self.detail}); "
            "commands that run scripts or use the network ask first, "
            'and autonomy = "full" cannot be used'
        )

    def as_dict(self) -> dict[str, Any]:
        """For ``/status``: ``{"state", "sandboxed", "detail"}``."""
        return {"state": self.state, "sandboxed": self.sandboxed, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: object) -> ShellState | None:
        """Read back what ``as_dict`` wrote (None when the report has none)."""
        if not isinstance(data, dict) or data.get("state") not in (
            "sandboxed",
            "unsandboxed",
            "disabled",
        ):
            return None
        return cls(data["state"], str(data.get("detail", "")))
