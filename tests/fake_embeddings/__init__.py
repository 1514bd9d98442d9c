"""A fake OpenAI-compatible embeddings server with a tiny concept model: see ``server.py``."""

from tests.fake_embeddings.concepts import concept_vector, concepts, cosine
from tests.fake_embeddings.server import Fail, FakeEmbeddings, Raw, Recorded, Reply, Tamper

__all__ = [
    "Fail",
    "FakeEmbeddings",
    "Raw",
    "Recorded",
    "Reply",
    "Tamper",
    "concept_vector",
    "concepts",
    "cosine",
]
