"""Keeping the config's secrets out of everything the model, the logs and the audit log see.

Every ``SecretStr`` in the config (API keys, bot tokens, signing secrets) is
collected at start; ``Redactor.text`` replaces each occurrence with a marker:
written plainly or reversed, and inside base64 or hex text (the run that
decodes to a piece of a secret is replaced whole), and any piece of
``FRAGMENT`` characters or more of a longer secret (what ``xxd`` shows in its
right column, or a secret cut in two). This is the last wall, behind the
sandbox and the classifier, not the first. Argument values under
secret-looking names (``token``, ``password``...) are masked in the audit log too.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, SecretStr

MARK = "[redacted]"
FRAGMENT = 10  # characters (or bytes) of a secret that count as a piece of it
_SECRET_NAMES = re.compile(r"(pass(word)?|secret|token|api[_-]?key|auth|cookie|credential)", re.I)
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{14,}={0,2}")
_HEX_RUN = re.compile(r"(?:[0-9a-fA-F]{2}[ :]{0,2}){10,}")  # FRAGMENT bytes or more


class Redactor:
    """Replaces known secrets in text and masks secret-looking argument values."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret containing another is replaced whole.
        values = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)
        forms = sorted({f for v in values for f in (v, v[::-1])}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(f) for f in forms)) if forms else None
        long = [v for v in values if len(v) >= 2 * FRAGMENT]
        self._pieces = {
            form[i : i + FRAGMENT]
            for secret in long
            for form in (secret, secret[::-1])
            for i in range(len(form) - FRAGMENT + 1)
        }
        self._byte_pieces = {p.encode() for p in self._pieces}
        self._encoded = [v.encode() for v in values]

    def text(self, value: str) -> str:
        """``value`` with every known secret, and every encoded or cut-up form of one, replaced."""
        if self._pattern is None:
            return value
        value = self._pattern.sub(MARK, value)
        value = _BASE64_RUN.sub(lambda m: MARK if self._in_base64(m[0]) else m[0], value)
        value = _HEX_RUN.sub(lambda m: MARK if self._in_hex(m[0]) else m[0], value)
        return self._cut_pieces(value) if self._pieces else value

    def _holds(self, data: bytes) -> bool:
        """Whether decoded bytes hold a secret, or a piece of a long one."""
        if any(secret in data for secret in self._encoded):
            return True
        if len(data) < FRAGMENT or not self._byte_pieces:
            return False
        pieces = self._byte_pieces
        return any(data[i : i + FRAGMENT] in pieces for i in range(len(data) - FRAGMENT + 1))

    def _in_base64(self, run: str) -> bool:
        for start in range(4):  # where the secret's bytes begin is unknown
            chunk = run[start:].rstrip("=")
            chunk = chunk[: len(chunk) // 4 * 4]
            for altchars in (b"+/", b"-_"):
                try:
                    data = base64.b64decode(chunk, altchars=altchars)
                except (binascii.Error, ValueError):
                    continue
                if self._holds(data):
                    return True
        return False

    def _in_hex(self, run: str) -> bool:
        digits = re.sub(r"[^0-9a-fA-F]", "", run)
        return any(
            self._holds(bytes.fromhex(digits[start:][: (len(digits) - start) // 2 * 2]))
            for start in (0, 1)
        )

    def _cut_pieces(self, value: str) -> str:
        """Replace every stretch of ``value`` made of pieces of a long secret."""
        pieces = self._pieces
        hits = [i for i in range(len(value) - FRAGMENT + 1) if value[i : i + FRAGMENT] in pieces]
        if not hits:
            return value
        out: list[str] = []
        end = 0
        for start in hits:
            if start < end:  # overlaps the stretch being replaced: extend it
                end = start + FRAGMENT
                continue
            out += [value[end:start], MARK]
            end = start + FRAGMENT
        out.append(value[end:])
        return "".join(out)

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
    """A logging filter that redacts secrets from every record's final message, and
    from its traceback (an exception's text can quote a URL or a key)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the message and traceback, redact them, and keep the record."""
        message = record.getMessage()
        clean = self._redactor.text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text once set, so they all write the redacted one.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redactor.text(record.stack_info)
        for key, value in list(vars(record).items()):  # values passed with extra=
            if key not in _RECORD_FIELDS and isinstance(value, str):
                setattr(record, key, self._redactor.text(value))
        return True


_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({})))
