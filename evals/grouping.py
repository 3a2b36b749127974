"""Grouping quality: pairwise precision and recall of "same group" on the labelled corpus.

Each group of `evals.corpus` is rendered several times the way it really recurs: fresh ids and
addresses, in-app lines moved by a deploy, other proxy and lambda numbers, another venv path, and
other input shapes. Every occurrence goes through the product's own `decode_message` and
`fingerprint_event`; two occurrences are predicted "same group" when their fingerprints are equal.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from bench.workload import encode
from evals.corpus import GROUPS, Group

_LINE = re.compile(r"@(\d+)@")
_SHIFTS = (0, 0, 4, 11, 0, 2, 7, 0)  # lines a deploy adds above the code; 0 = same commit
_SITES = ("/usr/local/lib/python3.11/site-packages", "/opt/venv/lib/python3.11/site-packages")


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One rendered event: its label, language and the Kafka message bytes."""

    label: str
    language: str
    family: str
    line: bytes


@dataclass(frozen=True, slots=True)
class PairScore:
    """Pairwise confusion counts and the scores derived from them."""

    true_pos: int
    false_pos: int
    false_neg: int
    groups: int
    predicted: int

    @property
    def precision(self) -> float:
        """Of the pairs put together, the share that belong together."""
        together = self.true_pos + self.false_pos
        return self.true_pos / together if together else 1.0

    @property
    def recall(self) -> float:
        """Of the pairs that belong together, the share put together."""
        belonging = self.true_pos + self.false_neg
        return self.true_pos / belonging if belonging else 1.0


def _draw(rng: random.Random) -> dict[str, str]:
    return {
        "id": str(rng.randint(1_000, 99_999_999)), "ip": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}."
        f"{rng.randint(1, 254)}", "hex": f"{rng.getrandbits(32):08x}", "addr": f"c{rng.getrandbits(36):09x}",
        "gid": str(rng.randint(1, 200_000)), "small": str(rng.randint(1, 60)), "lambda": str(rng.randint(0, 6)),
        "proxy": str(rng.randint(40, 480)), "site": rng.choice(_SITES),
    }


def render(group: Group, variant: int, rng: random.Random) -> Occurrence:
    """Occurrence number `variant` of `group`, with its own variable parts and input shape."""
    shift = _SHIFTS[variant % len(_SHIFTS)]
    values = _draw(rng)
    trace = _LINE.sub(lambda m: str(int(m.group(1)) + shift), group.trace).format(**values)
    message = group.message.format(**values)
    shape = group.shapes[variant % len(group.shapes)]
    exc_type, exc_value = _header(group, trace)
    record = encode(shape, server=f"svc-{group.language}", message=message, commit=f"{shift:040x}",
                    now=1_750_000_000.0 + variant, exc_type=exc_type, exc_value=exc_value, trace=trace)
    return Occurrence(group.label, group.language, group.family, orjson.dumps(record))


def _header(group: Group, trace: str) -> tuple[str, str]:
    """Type and message as a logging library reports them next to the trace text."""
    if not trace:
        return "", ""
    if group.language == "python":
        last = trace.rstrip().rsplit("\n", 1)[-1]
    elif group.language == "go":
        return "panic", trace.partition("\n")[0].removeprefix("panic: ")
    else:
        last = trace.partition("\n")[0]
    exc_type, _, value = last.partition(": ")
    return exc_type, value


def corpus(variants: int, seed: int = 3) -> list[Occurrence]:
    """Every group rendered `variants` times."""
    rng = random.Random(seed)
    return [render(group, k, rng) for group in GROUPS for k in range(variants)]


def fingerprints(occurrences: Sequence[Occurrence]) -> list[str]:
    """The product's fingerprint of each occurrence (the first event of its message)."""
    config = DecodeConfig()
    return [fingerprint_event(decode_message(o.line, config)[0]).fingerprint for o in occurrences]


def score(labels: Sequence[str], predicted: Sequence[str]) -> PairScore:
    """Pairwise precision and recall of `predicted` groups against `labels`."""
    true_pos = false_pos = false_neg = 0
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            same, together = labels[i] == labels[j], predicted[i] == predicted[j]
            true_pos += same and together
            false_pos += together and not same
            false_neg += same and not together
    return PairScore(true_pos, false_pos, false_neg, len(set(labels)), len(set(predicted)))


@dataclass(frozen=True)
class GroupingReport:
    """Scores overall and per language, and the groups that split or merged."""

    overall: PairScore
    by_language: dict[str, PairScore]
    split: list[str]
    merged: list[tuple[str, str]]
    occurrences: int


def evaluate(small: bool = False) -> GroupingReport:
    """Render the corpus (3 occurrences per group when small, 8 otherwise) and score it."""
    occurrences = corpus(3 if small else 8)
    predicted = fingerprints(occurrences)
    labels = [o.label for o in occurrences]
    by_language: dict[str, PairScore] = {}
    for language in sorted({o.language for o in occurrences}):
        picked = [i for i, o in enumerate(occurrences) if o.language == language]
        by_language[language] = score([labels[i] for i in picked], [predicted[i] for i in picked])
    prints_of: dict[str, set[str]] = defaultdict(set)
    labels_of: dict[str, set[str]] = defaultdict(set)
    for label, fingerprint in zip(labels, predicted, strict=True):
        prints_of[label].add(fingerprint)
        labels_of[fingerprint].add(label)
    split = sorted(label for label, prints in prints_of.items() if len(prints) > 1)
    merged = sorted({tuple(sorted(group))[:2] for group in labels_of.values() if len(group) > 1})
    return GroupingReport(score(labels, predicted), by_language, split,
                          [(a, b) for a, b in merged], len(occurrences))
