"""Keeping the config's secrets out of everything the model, the logs and the audit log see.

Every ``SecretStr`` in the config (API keys, bot tokens, signing secrets) is
collected at start; ``Redactor.text`` replaces each occurrence with a marker.
Argument values under secret-looking names (``token``, ``password``...) are
masked in the audit log too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, SecretStr

MARK = "[redacted]"
_SECRET_NAMES = re.compile(r"(pass(word)?|secret|token|api[_-]?key|auth|cookie|credential)", re.I)


class Redactor:
    """Replaces known secrets in text and masks secret-looking argument values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret containing another is replaced whole.
        values = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None

    def text(self, value: str) -> str:
        """``value`` with every known secret replaced."""
        return self._pattern.sub(MARK, value) if self._pattern else value

    def arguments(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Tool arguments for the audit log: secret-looking keys masked, secrets replaced."""
        return {k: self._value(k, v) for k, v in arguments.items()}

    def _value(self, key: str, value: Any) -> Any:
        if _SECRET_NAMES.search(key) and value not in (None, "", {}, []):
            return MARK
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return self.arguments(value)
        if isinstance(value, list):
            return [self._value(key, item) for item in value]
        return value


def config_secrets(model: BaseModel) -> list[str]:
    """Every ``SecretStr`` value anywhere inside a config model."""
    found: list[str] = []
    _collect(model, found)
    return found


def _collect(value: Any, found: list[str]) -> None:
    if isinstance(value, SecretStr):
        found.append(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _collect(getattr(value, name), found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, found)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from every record's final message."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the message, redact it, and keep the record."""
        message = record.getMessage()
        clean = self._redactor.text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
