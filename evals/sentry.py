"""Grouping against Sentry's own grouping fixtures: do we key on the frames Sentry keys on, and do we put
together the events Sentry puts together?

Each fixture's payload is converted to the native input shape (`convert`) and goes through the
product's `decode_message` and `fingerprint_event`. Two figures:

- Frame agreement: a fixture agrees when Log Agent keys on exactly the payload frames whose values
  Sentry's snapshot hashes (compared in Log Agent's own keys, innermost first, repeats counted once),
  each key ends in the function name Sentry hashed (Sentry trims names as Log Agent does), and no key
  keeps a part that Sentry masked as `<auto>`. No frames on both sides agrees too.
- Pairwise precision and recall of "same group" against Sentry's hash, leaving out the empty-fallback
  hash and Sentry's built-in fingerprint rules.

Both are counted on the platforms Log Agent parses; native, Cocoa and Dart fixtures are reported apart.
The fixtures are read from a checkout (default `../shared/corpora/sentry`), never copied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from analysis.errors import BadInput
from analysis.event import Frame
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.frame_key import frame_parts
from analysis.intake.signature import fingerprint_event
from evals.grouping import PairScore, score
from evals.sentry_snapshot import EMPTY_HASH, Case, SentryFrame, load_cases

APART = ("native", "cocoa", "dart")
"""Platforms Log Agent has no rules for: reported, not counted."""
_PLACEHOLDER = re.compile(r"<(?:auto|int|hex|float|uuid|date|ip|email|url)>")


@dataclass(frozen=True)
class Verdict:
    """One fixture: its platform, whether the frames agree and why not, and both group keys."""

    case: str
    platform: str
    agrees: bool
    reason: str
    ours: tuple[str, ...]
    sentry: tuple[str, ...]
    fingerprint: str
    group_hash: str
    counted_in_pairs: bool


@dataclass(frozen=True)
class SentryReport:
    """Frame agreement and pairwise scores, in scope and apart, and every pair that disagrees."""

    verdicts: list[Verdict]
    pairs: PairScore
    pairs_expressible: PairScore
    disagreeing_pairs: list[tuple[str, str, str, str]]
    """(kind FP|FN, case, case, why) for each pair Log Agent groups otherwise than Sentry."""
    left_out: list[str]

    def in_scope(self) -> list[Verdict]:
        """Fixtures of the platforms Log Agent parses."""
        return [v for v in self.verdicts if v.platform not in APART]


def evaluate(root: Path) -> SentryReport:
    """Score every fixture under `root` (a folder with MANIFEST.tsv, grouping_inputs/ and snapshots/)."""
    verdicts = []
    natives: dict[str, bytes] = {}
    left_out = []
    for case in load_cases(root):
        if case.built_in_fingerprint:
            left_out.append(f"{case.name}: grouped by Sentry's built-in ChunkLoadError fingerprint rule")
            continue
        native = orjson.dumps(convert(case.payload), option=orjson.OPT_SORT_KEYS)
        natives[case.name] = native
        verdicts.append(_verdict(case, native))
    counted = [v for v in verdicts if v.counted_in_pairs]
    pairs = score([v.group_hash for v in counted], [v.fingerprint for v in counted])
    # Fixtures whose native events are byte-identical yet carry different Sentry hashes differ only in
    # fields the native shape has no place for (exception-group ids, client fingerprints): any function
    # of the event puts them together. The second score leaves those fixtures out.
    ambiguous = {v.case for v in counted for w in counted
                 if v.case != w.case and natives[v.case] == natives[w.case] and v.group_hash != w.group_hash}
    expressible = [v for v in counted if v.case not in ambiguous]
    pairs_expressible = score([v.group_hash for v in expressible], [v.fingerprint for v in expressible])
    disagreeing = []
    for i, first in enumerate(counted):
        for second in counted[i + 1 :]:
            same, together = first.group_hash == second.group_hash, first.fingerprint == second.fingerprint
            if same != together:
                why = ("the native events are identical: Sentry told them apart by "
                       "exception-group ids or a client fingerprint" if natives[first.case] == natives[second.case]
                       else "grouped by a fixture whose native event is identical to one of the other group"
                       if first.case in ambiguous or second.case in ambiguous else "the events differ")
                disagreeing.append(("FP" if together else "FN", first.case, second.case, why))
    return SentryReport(verdicts, pairs, pairs_expressible, disagreeing, left_out)


def _verdict(case: Case, native: bytes) -> Verdict:
    platform = platform_of(case.payload)
    stacks = [frames for _, frames in _stacks(case.payload)]
    try:
        (event,) = decode_message(native, DecodeConfig(), received_at=0.0)
        signature = fingerprint_event(event)
        ours, fingerprint = signature.frames, signature.fingerprint
    except BadInput as bad:  # nothing to group on: Log Agent refuses the event, Sentry uses the empty hash
        ours, fingerprint = (), f"refused:{bad.reason}"
    agrees, reason, expected = _compare(case.frames, stacks, ours)
    counted = platform not in APART and case.group_hash != EMPTY_HASH
    return Verdict(case.name, platform, agrees, reason, ours, expected, fingerprint, case.group_hash, counted)


def _compare(sentry: tuple[SentryFrame, ...], stacks: list[list[dict[str, Any]]],
             ours: tuple[str, ...]) -> tuple[bool, str, tuple[str, ...]]:
    """Whether Log Agent keys on Sentry's frames, normalised alike; the reason when not."""
    matched: list[tuple[int, int, SentryFrame]] = []
    start: dict[int, int] = {}
    for frame in sentry:
        frames = stacks[frame.exception] if frame.exception < len(stacks) else []
        index = _match(frame, frames, start.get(frame.exception, 0))
        if index is None:
            return False, f"a frame Sentry hashed is not in the payload: {frame.values}", ()
        start[frame.exception] = index + 1
        matched.append((frame.exception, index, frame))
    expected: list[str] = []
    problems: list[str] = []
    # Log Agent reads the root cause (Sentry's first exception) first, each stack innermost first.
    for exception, index, frame in sorted(matched, key=lambda item: (item[0], -item[1])):
        parts = frame_parts(native_frame(stacks[exception][index]))
        if parts is None:
            problems.append(f"Log Agent leaves out a frame Sentry keys on: {frame.values}")
            continue
        location, function, separator = parts
        key = f"{location}{separator}{function}" if location and function else location or function
        if key not in expected:
            expected.append(key)
        hashed_function = frame.values.get("function")
        if hashed_function is not None and _PLACEHOLDER.sub("", hashed_function) != function.replace("<anonymous>", ""):
            problems.append(f"function {function!r} where Sentry hashes {hashed_function!r}")
        for kept in _masked_parts(frame, stacks[exception][index]):
            if kept.lower() in key.lower():
                problems.append(f"{key!r} keeps {kept!r}, which Sentry masks")
    if tuple(expected) != ours:
        extra = [key for key in ours if key not in expected]
        missing = [key for key in expected if key not in ours]
        if extra:
            problems.append(f"Log Agent also keys on {extra}")
        if missing:
            problems.append(f"Log Agent does not key on {missing}")
        if not extra and not missing:
            problems.append("same frames in another order")
    return not problems, "; ".join(problems), tuple(expected)


def _match(frame: SentryFrame, frames: list[dict[str, Any]], start: int) -> int | None:
    """The payload frame a hashed frame came from: the next one holding every hashed value."""
    pieces = [[piece.lower().strip() for piece in _PLACEHOLDER.split(value) if piece.strip()]
              for value in frame.values.values()]
    for index in range(start, len(frames)):
        raw = " ".join(str(frames[index].get(name) or "") for name in
                       ("function", "raw_function", "module", "filename", "abs_path", "context_line")).lower()
        raw = " ".join(raw.split())
        if all(piece in raw for value in pieces for piece in value):
            return index
    return None


def _masked_parts(frame: SentryFrame, payload: dict[str, Any]) -> Iterator[str]:
    """What Sentry replaced by `<auto>` in a hashed value, with the three characters before it."""
    for name, value in frame.values.items():
        if "<" not in value or not isinstance(payload.get(name), str):
            continue
        literal = [re.escape(piece) for piece in _PLACEHOLDER.split(value)]
        match = re.fullmatch("(.*?)".join(literal), payload[name], re.IGNORECASE | re.DOTALL)
        if match is None:
            continue
        for group in range(1, (match.lastindex or 0) + 1):
            if match.group(group):
                yield payload[name][max(0, match.start(group) - 3) : match.end(group)]


# ---------------------------------------------------------------- payload → native event


def convert(payload: dict[str, Any]) -> dict[str, Any]:
    """A Sentry event payload as the native input shape: the exception chain and its frames.

    Sentry lists exceptions innermost cause first; the native shape gives the outermost one with its
    causes in `chained`. A stack trace outside any exception (top-level, crashed thread, template) becomes
    an exception without type. The message is the log entry's template when it has one, else its text.
    """
    exceptions = [{"type": (exception or {}).get("type") or "", "value": (exception or {}).get("value") or "",
                   "stacktrace": [native_fields(frame) for frame in frames]}
                  for exception, frames in _stacks(payload)]  # fmt: skip
    logentry = payload.get("logentry")
    if not isinstance(logentry, dict):
        logentry = {}
    message = logentry.get("message") or logentry.get("formatted") or payload.get("message") or ""
    event: dict[str, Any] = {"server_id": "sentry-fixtures", "timestamp": 0, "message": message}
    if exceptions:
        event["exception"] = dict(exceptions[-1], chained=list(reversed(exceptions[:-1])))
    return event


def native_fields(frame: dict[str, Any]) -> dict[str, Any]:
    """The frame fields the native shape carries."""
    fields: dict[str, Any] = {name: frame[name] for name in ("function", "filename", "abs_path", "module")
                              if isinstance(frame.get(name), str)}  # fmt: skip
    if isinstance(frame.get("lineno"), int):
        fields["lineno"] = frame["lineno"]
    if isinstance(frame.get("in_app"), bool):
        fields["in_app"] = frame["in_app"]
    return fields


def native_frame(frame: dict[str, Any]) -> Frame:
    """A payload frame as the decoder builds it."""
    fields = native_fields(frame)
    return Frame(fields.get("function", ""), fields.get("filename", ""), fields.get("abs_path", ""),
                 fields.get("module", ""), fields.get("lineno"), fields.get("in_app"))


def _stacks(payload: dict[str, Any]) -> list[tuple[dict[str, Any] | None, list[dict[str, Any]]]]:
    """(exception, frames) in Sentry's order, innermost cause first; else the one stack it groups by."""
    exception = payload.get("exception")
    values = exception if isinstance(exception, list) else (exception or {}).get("values") or []
    if values:
        return [(value, _frames_of(value.get("stacktrace"))) for value in values]
    if isinstance(payload.get("stacktrace"), dict):
        return [(None, _frames_of(payload["stacktrace"]))]
    threads = payload.get("threads")
    for thread in (threads.get("values") or []) if isinstance(threads, dict) else []:
        if thread.get("crashed") and isinstance(thread.get("stacktrace"), dict):
            return [(None, _frames_of(thread["stacktrace"]))]
    template = payload.get("template")
    if isinstance(template, dict):  # a template error: its file and line are where it happened
        location = {"filename": template.get("filename"), "lineno": template.get("lineno"),
                    "context_line": template.get("context_line")}  # fmt: skip
        return [(None, [location])]
    return []


def _frames_of(stacktrace: Any) -> list[dict[str, Any]]:
    frames = stacktrace.get("frames") if isinstance(stacktrace, dict) else None
    return [frame for frame in frames or [] if isinstance(frame, dict)]


def platform_of(payload: dict[str, Any]) -> str:
    """The fixture's platform: its `platform` field, else what its frames and types show; Dart (Flutter)
    frames count as Dart even where the payload says `javascript`."""
    frames = [frame for _, stack in _stacks(payload) for frame in stack]
    files = " ".join(str(f.get("abs_path") or f.get("filename") or f.get("module") or "") for f in frames)
    declared = payload.get("platform")
    if ".dart" in files or "/flutter/" in files or declared == "other":
        return "dart"
    if declared in ("javascript", "node"):
        return "javascript"
    if declared in ("native", "cocoa", "python"):
        return str(declared)
    if declared in ("java", "csharp"):
        return {"java": "jvm", "csharp": ".net"}[declared]
    exception = payload.get("exception")
    values = exception if isinstance(exception, list) else (exception or {}).get("values") or []
    mechanisms = {str((value.get("mechanism") or {}).get("type")) for value in values}
    if any(str(value.get("type", "")).startswith("System.") for value in values) or "chained" in mechanisms:
        return ".net"  # .NET SDKs report inner exceptions with the `chained` mechanism
    if "NSError" in mechanisms:
        return "cocoa"
    if mechanisms & {"onerror", "onunhandledrejection"} or ".js" in files:
        return "javascript"
    if ".py" in files or "template" in payload:
        return "python"
    if ".java" in files:
        return "jvm"
    return "message" if not frames else "other"
