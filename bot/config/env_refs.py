"""``${VAR}`` and ``${VAR:-default}`` in the config's strings, and the variables not set.

A reference to a variable that is not set is kept as written and recorded with the
key that holds it, so every such key can be named at once (or, for ``pinclaw config
check``, mentioned as a note: the file itself is fine).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.config.errors import key_path

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class UnsetVariable:
    """A ``${NAME}`` the environment does not set, and the key that refers to it."""

    key: str
    name: str

    def problem(self) -> str:
        """The problem as a config error line says it (after the file's name)."""
        return (
            f"{self.key}: environment variable {self.name} is not set "
            f"(the config refers to ${{{self.name}}})"
        )


def interpolate(
    value: Any, env: dict[str, str], unset: list[UnsetVariable], loc: tuple[int | str, ...] = ()
) -> Any:
    """``value`` with every reference replaced; those to unset variables stay as written
    and are added to ``unset``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env, unset, (*loc, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, unset, (*loc, i)) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found:
            return found
        if default is not None:
            return default
        unset.append(UnsetVariable(key_path(loc), name))
        return match.group(0)

    return _ENV_REF.sub(replace, value)
