"""Recall ranking: a pure function over plain candidate records (no I/O, unit-tested on its own).

score = w_semantic * cosine + w_lexical * identifier match + w_recency * half-life decay
        + w_trust * trust + w_feedback * tanh(feedback)
Exact fingerprint matches come first whatever their score; then the score decides, newer first on ties.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from store.config import RankingConfig

# Dotted/qualified names (com.acme.Foo.bar, pkg/mod.go, Foo#bar, Foo::bar) and plain identifiers.
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#|/)[A-Za-z_$][\w$]*)*")
_PART_SEPARATORS = re.compile(r"\.|::|#|/|\$")
# Shorter parts (of, to, id, go) match everything and would make any case look lexically relevant.
_MIN_PART_LEN = 3

# A stored or query embedding: a plain list, or a row of the float32 matrix the store reads from LanceDB.
Vector = Sequence[float] | npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored case as ranking sees it. `text_chars` is the length of the text it would inject."""

    memory_id: str
    fingerprint: str
    exception_type: str
    error_text: str
    root_cause: str
    vector: Vector
    created_at: float
    trust: float
    feedback: float
    text_chars: int


@dataclass(frozen=True, slots=True)
class RankQuery:
    """The new burst: its fingerprint, exception type, frame identifiers, embedded text and the time."""

    fingerprint: str
    exception_type: str
    identifiers: Sequence[str]
    vector: Vector
    now: float


@dataclass(frozen=True, slots=True)
class Ranked:
    """A scored candidate with the parts of its score (kept for explanations and tests)."""

    candidate: Candidate
    score: float
    exact_fingerprint: bool
    semantic: float
    lexical: float


def identifier_parts(text: str) -> set[str]:
    """Lower-cased identifier parts of `text`: whole qualified names and each part of three chars or more."""
    parts: set[str] = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group(0)
        if len(name) >= _MIN_PART_LEN:
            parts.add(name.lower())
        parts.update(p.lower() for p in _PART_SEPARATORS.split(name) if len(p) >= _MIN_PART_LEN)
    return parts


def simple_type_name(exception_type: str) -> str:
    """`java.lang.IllegalStateException` -> `illegalstateexception`, for comparing types across formats."""
    parts = [p for p in _PART_SEPARATORS.split(exception_type.strip()) if p]
    return parts[-1].lower() if parts else ""


def lexical_score(query: RankQuery, candidate: Candidate) -> float:
    """Exact identifier overlap in 0..1: half for the same exception type, half for frame identifiers."""
    return _lexical(_Wanted.of(query), candidate)


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What `lexical_score` compares of the query, worked out once per ranking rather than per candidate."""

    type_name: str
    parts: frozenset[str]

    @classmethod
    def of(cls, query: RankQuery) -> _Wanted:
        parts = {p.lower() for identifier in query.identifiers for p in _PART_SEPARATORS.split(identifier)
                 if len(p) >= _MIN_PART_LEN}
        return cls(simple_type_name(query.exception_type), frozenset(parts))


def _lexical(wanted: _Wanted, candidate: Candidate) -> float:
    type_match = 1.0 if wanted.type_name and wanted.type_name == simple_type_name(candidate.exception_type) else 0.0
    if not wanted.parts:
        return type_match
    present = identifier_parts(candidate.error_text) | identifier_parts(candidate.exception_type)
    return 0.5 * type_match + 0.5 * len(wanted.parts & present) / len(wanted.parts)


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity; 0 when either vector is empty or zero."""
    va = np.asarray(a, dtype=np.float64)
    vb = np.asarray(b, dtype=np.float64)
    if va.size == 0 or va.shape != vb.shape:
        return 0.0
    norm = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / norm if norm > 0.0 else 0.0


def recency(created_at: float, now: float, half_life_s: float) -> float:
    """1 for a case made now, 0.5 after one half-life; future timestamps count as now."""
    return math.pow(0.5, max(0.0, now - created_at) / half_life_s)


def score_candidate(query: RankQuery, candidate: Candidate, config: RankingConfig) -> Ranked:
    """Score one candidate (no threshold applied)."""
    return _scored(query, _Wanted.of(query), candidate, cosine(query.vector, candidate.vector), config)


def _scored(query: RankQuery, wanted: _Wanted, candidate: Candidate, semantic: float,
            config: RankingConfig) -> Ranked:
    lexical = _lexical(wanted, candidate)
    score = (
        config.w_semantic * semantic
        + config.w_lexical * lexical
        + config.w_recency * recency(candidate.created_at, query.now, config.recency_half_life_s)
        + config.w_trust * candidate.trust
        + config.w_feedback * math.tanh(candidate.feedback)
    )
    exact = bool(query.fingerprint) and query.fingerprint == candidate.fingerprint
    return Ranked(candidate, score, exact, semantic, lexical)


class _Cosines:
    """Every cosine `rank` needs, from unit vectors in one matrix instead of one numpy call per pair.

    Same definition as `cosine`, in float64; a zero vector, or one whose size differs from the query's,
    has cosine 0 with everything.
    """

    def __init__(self, query: Vector, candidates: Sequence[Candidate]) -> None:
        wanted = np.asarray(query, dtype=np.float64).ravel()
        self._valid = np.array([wanted.size > 0 and len(c.vector) == wanted.size for c in candidates],
                               dtype=bool)
        matrix = np.zeros((len(candidates), wanted.size), dtype=np.float64)
        for i, candidate in enumerate(candidates):
            if self._valid[i]:
                matrix[i] = np.asarray(candidate.vector, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        self._valid &= norms > 0.0
        self._unit = matrix / np.where(norms > 0.0, norms, 1.0)[:, None]
        query_norm = float(np.linalg.norm(wanted)) if wanted.size else 0.0
        self.to_query = (self._unit @ (wanted / query_norm) if query_norm > 0.0
                         else np.zeros(len(candidates)))
        self.to_query[~self._valid] = 0.0

    def close_pairs(self, threshold: float) -> npt.NDArray[np.bool_]:
        """`close[i, k]`: candidates `i` and `k` have a cosine above `threshold` (rows of invalid vectors are
        zero, so their cosines are 0 like `cosine`'s)."""
        # Every pair in one product: one product per candidate checked cost 0.35 of the 1.0 ms `rank`
        # took on the memory bench's 55 candidates.
        close: npt.NDArray[np.bool_] = (self._unit @ self._unit.T) > threshold
        return close


def _explanation(candidate: Candidate) -> tuple[str, str] | None:
    """What makes two cases the same explanation: the fingerprint and the normalised root cause."""
    words = candidate.root_cause.lower().split()
    return (candidate.fingerprint, " ".join(words)) if words else None


def rank(query: RankQuery, candidates: Iterable[Candidate], config: RankingConfig) -> list[Ranked]:
    """Score, threshold, order and de-duplicate candidates (top-k and budget are `select`'s job).

    Exact fingerprint matches bypass `min_score` and come first. A candidate that is a near-duplicate
    of a better one (same fingerprint and root cause, or cosine above `dedup_cosine`) is dropped.
    Duplicate memory ids (the same row fetched by two queries) count once.
    """
    seen: set[str] = set()
    unique: list[Candidate] = []
    for candidate in candidates:
        if candidate.memory_id not in seen:
            seen.add(candidate.memory_id)
            unique.append(candidate)
    cosines = _Cosines(query.vector, unique)
    wanted = _Wanted.of(query)
    scored: list[tuple[Ranked, int]] = []
    for i, candidate in enumerate(unique):
        ranked = _scored(query, wanted, candidate, float(cosines.to_query[i]), config)
        if ranked.exact_fingerprint or ranked.score >= config.min_score:
            scored.append((ranked, i))
    scored.sort(key=lambda pair: (not pair[0].exact_fingerprint, -pair[0].score,
                                  -pair[0].candidate.created_at, pair[0].candidate.memory_id))
    kept: list[Ranked] = []
    close = cosines.close_pairs(config.dedup_cosine)
    shadowed = np.zeros(len(unique), dtype=bool)  # close to a candidate already kept
    explanations: set[tuple[str, str]] = set()
    for ranked, i in scored:
        explanation = _explanation(ranked.candidate)
        if explanation in explanations or shadowed[i]:
            continue
        kept.append(ranked)
        shadowed |= close[:, i]
        if explanation is not None:
            explanations.add(explanation)
    return kept


def select(ranked: Iterable[Ranked], top_k: int, budget_chars: int) -> list[Ranked]:
    """The best `top_k` whose injected text fits `budget_chars` together; a case that does not fit is
    skipped so a shorter, lower-ranked one can still use the rest of the budget."""
    chosen: list[Ranked] = []
    used = 0
    for item in ranked:
        if len(chosen) >= top_k:
            break
        if used + item.candidate.text_chars > budget_chars:
            continue
        chosen.append(item)
        used += item.candidate.text_chars
    return chosen
