"""Message grouping on loghub's labelled 2k samples, with Drain3 in the same run.

Each line's `Content` is sent as the message of a native event (no trace) through the product's
`decode_message` and `fingerprint_event`; its group is its fingerprint. Drain3 (`TemplateMiner` with the
usual masking, as in the grouping benchmark) mines the same contents in file order; its group is the
cluster id. The score is loghub's grouping accuracy: a line counts as right when the set of lines in its
predicted group is exactly the set of lines of its true template (`EventId`). The samples are read from
a checkout (default `../shared/corpora/loghub`), never copied.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event

SYSTEMS = ("Android", "Apache", "BGL", "HPC", "HealthApp", "Linux", "Mac", "OpenSSH", "Proxifier", "Thunderbird",
           "Windows")  # fmt: skip


@dataclass(frozen=True)
class SystemScore:
    """One system's grouping accuracy for Log Agent and Drain3, and how many groups each found."""

    system: str
    lines: int
    templates: int
    logagent: float
    drain3: float | None
    logagent_groups: int
    drain3_groups: int


def grouping_accuracy(labels: Sequence[Hashable], predicted: Sequence[Hashable]) -> float:
    """Share of lines whose predicted group holds exactly the lines of their true group."""
    truth: dict[Hashable, set[int]] = defaultdict(set)
    groups: dict[Hashable, set[int]] = defaultdict(set)
    for index, (label, group) in enumerate(zip(labels, predicted, strict=True)):
        truth[label].add(index)
        groups[group].add(index)
    right = sum(1 for label, group in zip(labels, predicted, strict=True) if truth[label] == groups[group])
    return right / len(labels) if labels else 1.0


def evaluate(root: Path, systems: Sequence[str] = SYSTEMS) -> list[SystemScore]:
    """Score every system found under `root` (`<System>/<System>_2k.log_structured.csv`)."""
    drain3 = _drain3_available()
    scores = []
    for system in systems:
        path = root / system / f"{system}_2k.log_structured.csv"
        if not path.exists():
            continue
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        contents = [row["Content"] for row in rows]
        labels = [row["EventId"] for row in rows]
        ours = fingerprints(system, contents)
        theirs = drain3_clusters(contents) if drain3 else []
        scores.append(SystemScore(
            system, len(rows), len(set(labels)), grouping_accuracy(labels, ours),
            grouping_accuracy(labels, theirs) if drain3 else None, len(set(ours)), len(set(theirs)),
        ))  # fmt: skip
    return scores


def fingerprints(system: str, contents: Sequence[str]) -> list[str]:
    """The product's fingerprint of each line, sent as a native message-only event."""
    config = DecodeConfig()
    prints = []
    for content in contents:
        raw = orjson.dumps({"server_id": system, "timestamp": 0, "level": "error", "message": content})
        prints.append(fingerprint_event(decode_message(raw, config)[0]).fingerprint)
    return prints


def drain3_clusters(contents: Sequence[str]) -> list[int]:
    """Drain3's cluster id of each line, mined in order with the benchmark's masking."""
    # drain3 ships no type information.
    from drain3 import TemplateMiner
    from drain3.masking import MaskingInstruction
    from drain3.template_miner_config import TemplateMinerConfig

    from bench.grouping import DRAIN3_MASKING

    config = TemplateMinerConfig()
    config.masking_instructions = [MaskingInstruction(pattern, mask) for pattern, mask in DRAIN3_MASKING]
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    return [int(miner.add_log_message(content)["cluster_id"]) for content in contents]


def _drain3_available() -> bool:
    try:
        import drain3  # noqa: F401 - only whether the bench extra is installed
    except ImportError:
        return False
    return True
