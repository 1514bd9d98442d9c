"""The in-memory vector index: one float32 matrix of unit vectors per embedding model.

Rows are loaded once from the store, then kept up to date one memory at a time.
A search is one matrix-vector product over the live rows (cosine similarity,
since every row and the query are L2-normalised), a boolean mask of the scopes
the caller may see, and ``argpartition`` for the top k. At 100,000 memories of
384 dimensions that is about 4 ms on a small machine, so it runs on the event
loop: a thread hand-off would cost more in care (rows move on ``remove``) than
it saves.

This is the only memory module that imports numpy at load time; the store and
recall modules leave it unloaded when no embedding provider is configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from bot.memory.store import MemoryStore

Vector = npt.NDArray[np.float32]

_LOAD_PAGE = 4096
_MIN_CAPACITY = 64
_GROWTH = 1.5


def to_blob(vector: npt.ArrayLike) -> bytes:
    """A vector as stored in SQLite: float32, little-endian."""
    return np.ascontiguousarray(vector, dtype="<f4").reshape(-1).tobytes()


def from_blob(blob: bytes, dims: int | None = None) -> Vector:
    """A stored vector back as float32; ``dims`` checks its length."""
    vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
    if dims is not None and vector.shape[0] != dims:
        raise ValueError(f"a stored vector has {vector.shape[0]} dimensions, not {dims}")
    return vector


def _normalised(rows: npt.NDArray[np.float32]) -> Vector:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    # A zero vector stays zero (it matches nothing) instead of becoming NaN.
    norms[norms == 0] = 1.0
    unit: Vector = (rows / norms).astype(np.float32, copy=False)
    return unit


class VectorCache:
    """Unit vectors of one embedding model, with each row's memory id and scope."""

    def __init__(self, model: str, dims: int | None = None) -> None:
        self.model = model
        self._dims = dims
        self._matrix: Vector = np.zeros((0, dims or 0), dtype=np.float32)
        self._ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._codes: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._count = 0
        self._row_of: dict[int, int] = {}
        self._scope_codes: dict[str, int] = {}

    @property
    def dims(self) -> int | None:
        """Dimensions of the vectors held (None until the first one arrives)."""
        return self._dims

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays, spare capacity included (not the id dictionary)."""
        return self._matrix.nbytes + self._ids.nbytes + self._codes.nbytes

    def __len__(self) -> int:
        return self._count

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._row_of

    async def load(self, store: MemoryStore) -> int:
        """Replace the contents with every vector the store holds for this model.

        Raises ValueError if a stored vector's length differs from the others
        (the model's output changed under the same name): those must be embedded again.
        """
        self.clear()
        expected = await store.count_embedded(self.model)
        after = 0
        while page := await store.embeddings(self.model, after_id=after, limit=_LOAD_PAGE):
            dims = self._dims or len(page[0][2]) // 4
            if any(len(blob) != dims * 4 for _, _, blob in page):
                raise ValueError(f"stored vectors of {self.model!r} differ in length")
            if not after:
                # Sized once, with a little room: growing as pages arrive would leave
                # up to a third of the matrix unused.
                self._check_dims(dims)
                self._reserve(expected + max(expected // 32, _MIN_CAPACITY))
            ids = [row[0] for row in page]
            vectors = np.frombuffer(b"".join(row[2] for row in page), dtype="<f4")
            self._append_many(ids, [row[1] for row in page], vectors.reshape(-1, dims))
            after = ids[-1]
        return self._count

    def clear(self) -> None:
        """Forget every row (the dimensions given at construction stay)."""
        self._count = 0
        self._row_of.clear()

    def upsert(self, memory_id: int, scope: str, vector: npt.ArrayLike) -> None:
        """Set the vector of one memory, adding a row if it has none yet."""
        row = _normalised(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        self._check_dims(row.shape[1])
        code = self._code(scope)
        index = self._row_of.get(memory_id)
        if index is None:
            self._reserve(self._count + 1)
            index = self._count
            self._count += 1
            self._row_of[memory_id] = index
            self._ids[index] = memory_id
        self._matrix[index] = row[0]
        self._codes[index] = code

    def remove(self, memory_id: int) -> bool:
        """Drop one memory's row; the last row moves into its place."""
        index = self._row_of.pop(memory_id, None)
        if index is None:
            return False
        last = self._count - 1
        if index != last:
            moved = int(self._ids[last])
            self._matrix[index] = self._matrix[last]
            self._ids[index] = moved
            self._codes[index] = self._codes[last]
            self._row_of[moved] = index
        self._count = last
        return True

    def search(
        self, query: npt.ArrayLike, scopes: Sequence[str], k: int
    ) -> list[tuple[int, float]]:
        """The k memories nearest ``query`` among ``scopes``: (id, cosine), best first."""
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if self._dims is not None:
            self._check_dims(vector.shape[0])
        allowed_codes = [self._scope_codes[s] for s in scopes if s in self._scope_codes]
        if k <= 0 or self._count == 0 or not allowed_codes:
            return []
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            return []
        count = self._count
        scores = self._matrix[:count] @ (vector / norm)
        allowed = np.zeros(len(self._scope_codes), dtype=bool)
        allowed[allowed_codes] = True
        visible = allowed[self._codes[:count]]
        if not visible.all():
            scores[~visible] = -np.inf
        k = min(k, int(np.count_nonzero(visible)))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
        top = top[np.argsort(-scores[top], kind="stable")][:k]
        return [(int(i), float(s)) for i, s in zip(self._ids[top], scores[top], strict=True)]

    def _check_dims(self, dims: int) -> None:
        if self._dims is None:
            self._dims = dims
            self._matrix = np.zeros((0, dims), dtype=np.float32)
        elif dims != self._dims:
            raise ValueError(
                f"a {dims}-dimension vector cannot join the {self._dims}-dimension vectors "
                f"of {self.model!r}; embed it again with that model"
            )

    def _code(self, scope: str) -> int:
        code = self._scope_codes.get(scope)
        if code is None:
            code = self._scope_codes[scope] = len(self._scope_codes)
        return code

    def _reserve(self, needed: int) -> None:
        capacity = self._matrix.shape[0]
        if needed <= capacity:
            return
        # Geometric growth keeps a long run of appends linear overall.
        capacity = max(needed, int(capacity * _GROWTH), _MIN_CAPACITY)
        dims = self._dims or 0
        matrix = np.zeros((capacity, dims), dtype=np.float32)
        ids = np.zeros(capacity, dtype=np.int64)
        codes = np.zeros(capacity, dtype=np.int32)
        count = self._count
        matrix[:count] = self._matrix[:count]
        ids[:count] = self._ids[:count]
        codes[:count] = self._codes[:count]
        self._matrix, self._ids, self._codes = matrix, ids, codes

    def _append_many(self, ids: Sequence[int], scopes: Sequence[str], rows: Vector) -> None:
        self._check_dims(rows.shape[1])
        if any(memory_id in self._row_of for memory_id in ids):
            for memory_id, scope, row in zip(ids, scopes, rows, strict=True):
                self.upsert(memory_id, scope, row)
            return
        start = self._count
        self._reserve(start + len(ids))
        end = start + len(ids)
        self._matrix[start:end] = _normalised(rows)
        self._ids[start:end] = ids
        self._codes[start:end] = [self._code(scope) for scope in scopes]
        self._row_of.update((memory_id, start + i) for i, memory_id in enumerate(ids))
        self._count = end
