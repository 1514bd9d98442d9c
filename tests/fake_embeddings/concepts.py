"""A tiny deterministic "embedding model" whose vectors make semantic sense for tests.

Each word maps to a concept: words of one synonym group share the group's
concept (coffee, espresso and latte are all ``coffee``), a word the table does
not know is its own concept, and filler words ("I", "my", "how") weigh little.
Every concept has a fixed pseudo-random unit vector, seeded from a SHA-256 of its
name so it is the same in every run and process; a text's vector is the weighted
sum of its concepts' vectors, L2-normalised. Random vectors in a few hundred
dimensions are nearly orthogonal, so the cosine of two texts is roughly the
share of concepts they have in common: "I take my coffee without sugar" and
"how do I like my espresso?" score about 0.7, unrelated sentences about 0.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import defaultdict

import numpy as np
import numpy.typing as npt

# (concept, words): every word of a group means the same to the model.
GROUPS: tuple[tuple[str, str], ...] = (
    ("coffee", "coffee espresso latte cappuccino americano macchiato mocha decaf flatwhite"),
    ("sugar", "sugar sweet sweetener sugary sweetened sweeteners stevia saccharin"),
    ("prefer", "like prefer enjoy love take drink want favourite favorite fond usual usually"),
    ("without", "without no none skip black never nothing avoid"),
    ("milk", "milk cream creamer dairy oat soy"),
    ("tea", "tea chai earl rooibos matcha herbal"),
    ("dog", "dog puppy pet pup doggy hound"),
    ("cat", "cat kitten kitty"),
    ("birthday", "birthday born anniversary bday celebrate celebration"),
    ("garden", "garden plants plant watering water flowers lawn hose"),
    ("partner", "wife husband partner spouse girlfriend boyfriend"),
    ("family", "mother mom mum father dad parents sister brother son daughter kids children"),
    ("allergy", "allergic allergy allergies intolerant intolerance"),
    ("nuts", "peanut peanuts nut nuts almond almonds cashew"),
    ("meal", "food eat eating meal dinner lunch breakfast cook cooking recipe"),
    ("vegetarian", "vegetarian vegan veggie meatless"),
    ("weather", "weather rain raining sunny forecast umbrella"),
    ("temperature", "temperature cold hot warm heating thermostat heater radiator degrees"),
    ("light", "light lights lamp bulb brightness dim"),
    ("music", "music song songs playlist listen spotify album"),
    ("alarm", "alarm wake morning remind reminder"),
    ("appointment", "appointment meeting calendar schedule booked"),
    ("doctor", "doctor dentist clinic gp medicine pills medication prescription"),
    ("work", "work job office colleague boss employer"),
    ("car", "car drive driving vehicle parking garage"),
    ("home", "home house apartment flat"),
    ("trash", "trash bin bins rubbish garbage recycling"),
    ("name", "name named called nickname"),
    ("phone", "phone mobile telephone cell number"),
    ("email", "email mail inbox"),
    ("address", "address live lives living street"),
    ("sleep", "sleep bed bedtime night nap asleep"),
    ("exercise", "exercise gym run running workout jog jogging"),
    ("travel", "travel trip holiday vacation flight fly flying"),
    ("shopping", "shopping buy groceries shop store supermarket"),
    ("dislike", "hate dislike dislikes detest"),
    ("language", "language speak english french spanish german"),
    ("book", "book books read reading novel author"),
    ("film", "movie movies film films watch tv series"),
    ("wifi", "wifi password network router internet"),
    ("school", "school teacher class homework"),
)

_FILLER = (
    "i me my mine you your yours we our us he she him his her they them their it its a an "
    "the and or but of to in on at for with from by is are was were be been am do does did "
    "how what when where who which that this these those have has had will would can could "
    "should may might please about as so if then than too very just also really"
)
STOPWORDS = frozenset(_FILLER.split())

STOPWORD_WEIGHT = 0.1
EMPTY = "<empty>"

WORD_CONCEPTS: dict[str, str] = {
    word: concept for concept, words in GROUPS for word in words.split()
}

_WORD = re.compile(r"[a-z0-9]+")
_SUFFIXES = ("s", "es", "d", "ed", "ing", "ly")


def concept_of(word: str) -> str:
    """The concept a lower-case word stands for: its group's, or ``w:<word>`` if unknown."""
    if word in WORD_CONCEPTS:
        return WORD_CONCEPTS[word]
    for suffix in _SUFFIXES:
        stem = word.removesuffix(suffix)
        if stem != word and stem in WORD_CONCEPTS:
            return WORD_CONCEPTS[stem]
    return f"w:{word}"


def concepts(text: str) -> dict[str, float]:
    """The weighted concepts of ``text`` (filler words weigh ``STOPWORD_WEIGHT``)."""
    weights: defaultdict[str, float] = defaultdict(float)
    for word in _WORD.findall(text.lower().replace("'", "")):
        weight = STOPWORD_WEIGHT if word in STOPWORDS else 1.0
        weights[concept_of(word)] += weight
    return dict(weights) if weights else {EMPTY: 1.0}


@functools.lru_cache(maxsize=8192)
def _unit(concept: str, dims: int) -> npt.NDArray[np.float64]:
    seed = int.from_bytes(hashlib.sha256(concept.encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dims)
    vector /= np.linalg.norm(vector)
    vector.setflags(write=False)
    return vector


def concept_vector(text: str, dims: int) -> npt.NDArray[np.float32]:
    """The unit vector of ``text`` in ``dims`` dimensions (the same in every run)."""
    total = np.zeros(dims)
    for concept, weight in concepts(text).items():
        total += weight * _unit(concept, dims)
    norm = np.linalg.norm(total)
    return (total / norm if norm > 0 else total).astype(np.float32)


def cosine(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> float:
    """Cosine similarity of two vectors."""
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
