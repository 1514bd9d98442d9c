"""What memory holds and returns, and the port embedding providers fill.

A memory's identity is its ``key`` within its ``scope``: storing the same key
again replaces the content. The scope keeps people's memories apart: a person's
own scope is ``"person:ID"`` (``bot.store.people``), recalled wherever that
person writes from and for nobody else, and ``SHARED`` (household) entries are
recalled for everyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

SHARED = "shared"
CORE = "core"
DAILY = "daily"
CONVERSATION = "conversation"


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored entry."""

    id: int
    key: str
    content: str
    category: str
    scope: str
    session: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class NewMemory:
    """An entry to store (or to replace the entry with the same scope and key)."""

    key: str
    content: str
    category: str = CORE
    scope: str = SHARED
    session: str = ""


@dataclass(frozen=True, slots=True)
class Recalled:
    """A memory found for a query, with its merged score (0..1) and the parts of it."""

    memory: Memory
    score: float
    vector_score: float | None = None
    keyword_score: float | None = None


class Embedder(Protocol):
    """Turns texts into vectors; ``model`` names the model (vectors of different
    models are never compared)."""

    @property
    def model(self) -> str:
        """The model's name, e.g. "text-embedding-3-small"."""
        ...

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One row per text, float32, shape (len(texts), dims)."""
        ...
