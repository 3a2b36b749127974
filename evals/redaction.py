"""Redaction quality: recall on the labelled corpus, negatives left alone, and real public logs.

The corpus (`evals.redaction_corpus`) is redacted by the product's `Redactor`; a positive counts as caught
when none of its secrets survives. Real data nobody here wrote (loghub's 11 systems, Sentry's grouping
fixtures, Defects4J's failing-test traces) is read from a corpora folder: public logs hold personal data
(client IPs, mailboxes) but no credentials, so a credential placeholder there is a false positive, and
stack traces must come out unchanged. What redaction left is searched for public addresses spelled in host
names (`adsl-203-0-113-9.example.net`, `host203.0.113.9.example.com`) by a looser pattern of its own. With
`peers`, detect-secrets and Kingfisher (installed by `make bench-deps`) are scored on the same corpus:
recall, negatives touched, time per text.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from analysis.intake.redact import Redactor
from evals.redaction_corpus import NEGATIVES, Negative, Positive, positives

PERSONAL_KINDS = frozenset({"email", "ipv4", "ipv6", "phone", "credit_card", "iban", "ssn", "itin"})
_PLACEHOLDER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")
# Four numbers with one separator (the last four of a longer run), and the labels after them: any prefix,
# padding, label or domain (`host_addresses` drops a file's extensions at the end: `….example.com.log.gz`).
_HOST_ADDRESS = re.compile(r"(?<![0-9])(0*[0-9]{1,3})([.-])(0*[0-9]{1,3})\2(0*[0-9]{1,3})\2(0*[0-9]{1,3})"
                           r"(?![0-9]|\2[0-9])((?:[.-][A-Za-z0-9]+)*)")
_FILE_ENDS = frozenset({"gz", "tar", "tgz", "zip", "jar", "war", "asc", "pom", "log", "txt", "json", "xml", "csv",
                        "pdf", "png", "css", "js", "map", "ts", "msi", "dmg", "apk", "exe", "dll", "so", "rpm", "deb",
                        "whl", "lzma", "xz", "bz2", "zst", "sig", "sha1", "md5", "final", "release", "noarch"})
# Private, loopback and link-local networks: a node's own name, which redaction keeps on purpose.
_PRIVATE = re.compile(r"0*(?:10|127)[.-]|0*172[.-]0*(?:1[6-9]|2[0-9]|3[01])[.-]|0*192[.-]0*168[.-]|0*169[.-]0*254[.-]")


@dataclass
class CorpusScore:
    """How one redactor did on the labelled corpus."""

    name: str
    positives: int = 0
    caught: int = 0
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    """kind → (cases, caught)."""
    missed: list[Positive] = field(default_factory=list)
    negatives: int = 0
    touched: list[tuple[Negative, str]] = field(default_factory=list)
    micros_per_text: float = 0.0

    @property
    def recall(self) -> float:
        return self.caught / self.positives if self.positives else 0.0


@dataclass
class RealScore:
    """What redaction did to one source of real public text."""

    source: str
    texts: int = 0
    changed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    addresses_left: list[str] = field(default_factory=list)
    """Redacted texts that still spell a public address in a host name."""

    @property
    def credential_placeholders(self) -> int:
        """Placeholders of a credential kind: false positives, as public logs carry no credentials."""
        return sum(count for kind, count in self.kinds.items() if kind not in PERSONAL_KINDS)


@dataclass
class RedactionReport:
    """The product's corpus score, the prefilter check, real data and the peers' scores."""

    product: CorpusScore
    prefilter_mismatches: list[str]
    real: list[RealScore]
    peers: list[CorpusScore]
    skipped: list[str]


def score(name: str, redact: Callable[[str], str]) -> CorpusScore:
    """`redact` on every positive and negative of the corpus."""
    result = CorpusScore(name)
    counts: dict[str, list[int]] = {}
    cases = positives()
    started = time.perf_counter()
    for case in cases:
        out = redact(case.text)
        tally = counts.setdefault(case.kind, [0, 0])
        tally[0] += 1
        if any(secret in out for secret in case.secrets):
            result.missed.append(case)
        else:
            tally[1] += 1
    for negative in NEGATIVES:
        out = redact(negative.text)
        if out != negative.text:
            result.touched.append((negative, out))
    result.micros_per_text = (time.perf_counter() - started) / (len(cases) + len(NEGATIVES)) * 1e6
    result.positives, result.negatives = len(cases), len(NEGATIVES)
    result.caught = result.positives - len(result.missed)
    result.by_kind = {kind: (total, caught) for kind, (total, caught) in sorted(counts.items())}
    return result


def prefilter_mismatches(redactor: Redactor) -> list[str]:
    """Corpus texts on which the prefiltered redaction differs from every rule applied in turn."""
    texts = [case.text for case in positives()] + [negative.text for negative in NEGATIVES]
    return [text for text in texts if Redactor(redactor.config).redact(text) != redactor.every_rule(text)]


def real_data(root: Path, redactor: Redactor, samples: int = 3) -> list[RealScore]:
    """Redaction of loghub's log lines, Sentry's event payloads and Defects4J's traces under `root`."""
    scores = []
    for source, texts in (("loghub", _loghub(root / "loghub")), ("sentry", _sentry(root / "sentry")),
                          ("defects4j", _defects4j(root / "defects4j"))):
        result = RealScore(source)
        for text in texts:
            result.texts += 1
            out = redactor.redact(text)
            if host_addresses(out):
                result.addresses_left.append(out)
            if out == text:
                continue
            result.changed += 1
            for kind in _PLACEHOLDER.findall(out):
                result.kinds[kind] += 1
                kept = result.samples.setdefault(kind, [])
                if len(kept) < samples:
                    kept.append((text, out))
        scores.append(result)
    return scores


def host_addresses(text: str) -> list[str]:
    """The public IPv4 addresses `text` spells in host names (`dsl-198-51-100-7.example.net`): four numbers
    followed by a domain, a last label of letters once a file's extensions and numbers are dropped."""
    found = []
    for match in _HOST_ADDRESS.finditer(text):
        octets = [int(match.group(group)) for group in (1, 3, 4, 5)]
        labels = re.split(r"[.-]", match.group(6))[1:]
        while labels and (labels[-1].lower() in _FILE_ENDS or labels[-1].isdigit()):
            labels.pop()
        address = text[match.start() : match.start(6)]
        if octets[0] > 0 and max(octets) <= 255 and not _PRIVATE.match(address) and "." in match.group(6) \
                and labels and labels[-1].isalpha() and len(labels[-1]) >= 2:
            found.append(address)
    return found


def _loghub(folder: Path) -> Iterator[str]:
    for path in sorted(folder.glob("*/*_structured.csv")):
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            for row in csv.DictReader(handle):
                yield row["Content"]


def _sentry(folder: Path) -> Iterator[str]:
    for path in sorted((folder / "grouping_inputs").glob("*.json")):
        yield from _strings(orjson.loads(path.read_bytes()))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _defects4j(folder: Path) -> Iterator[str]:
    for line in (folder / "bugs.jsonl").read_text(encoding="utf-8").splitlines():
        yield orjson.loads(line)["stack_trace"]


def _detect_secrets() -> Callable[[str], str]:
    """detect-secrets 1.x with its default plugins, each found secret replaced where it occurs."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    def redact(text: str) -> str:
        with default_settings():
            found = {secret.secret_value for line in text.split("\n") for secret in scan_line(line)}
        for secret in sorted((s for s in found if s), key=len, reverse=True):
            text = text.replace(secret, "[REDACTED]")
        return text

    return redact


def _kingfisher() -> Callable[[str], str]:
    """Kingfisher's bundled catalog at its default confidence, each finding replaced."""
    from kingfisher_sdk import Rules, Scanner

    scanner = Scanner(Rules())

    def redact(text: str) -> str:
        for secret in sorted({finding.secret for finding in scanner.scan(text)}, key=len, reverse=True):
            text = text.replace(secret, "[REDACTED]")
        return text

    return redact


_PEERS = {"detect-secrets": ("detect_secrets", _detect_secrets), "kingfisher": ("kingfisher_sdk", _kingfisher)}


def evaluate(corpora: Path | None = None, peers: bool = False) -> RedactionReport:
    """Score the product on the corpus; with `corpora`, on real data; with `peers`, the peers too."""
    redactor = Redactor()
    report = RedactionReport(score("log-agent", Redactor().redact), prefilter_mismatches(redactor), [], [], [])
    if corpora is not None:
        if (corpora / "loghub").is_dir():
            report.real = real_data(corpora, redactor)
        else:
            report.skipped.append(f"real data: no loghub folder under {corpora}")
    if peers:
        for name, (module, build) in _PEERS.items():
            if importlib.util.find_spec(module) is None:
                report.skipped.append(f"{name}: not installed (make bench-deps)")
            else:
                report.peers.append(score(name, build()))
    return report
