"""Ranking stack frames as culprit suspects. Pure: frames, file matches and the code's verdict in, scores out.

`candidates_from` ranks the frames of one exception around what `analysis.code.blame` decided from the
code: the blamed frame first, then where its value was made, the callers above it (the value's origins),
the application's entry frame, the raising frame, the frames below; frames that only reported the failure
come last. A chained (wrapping) exception's frames count less than the root cause's callers.

`rank_exception` is the fallback when no frame's file can be read as code: the deepest in-app frame of the
root cause, moved to the caller when a helper's name says it checks on the caller's behalf. Test and
generated code never rank.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from analysis.code.blame import Blame
from analysis.code.filemap import FileMatch, is_generated_path, is_test_path
from analysis.code.site import Site
from analysis.event import ExceptionInfo, Frame

_LIBRARY_PARSER = re.compile(
    r"(Integer|Long|Double|Float|Short|Byte|Boolean)\.(parse\w*|valueOf)|BigDecimal\.<init>|UUID\.fromString"
    r"|Local(Date|DateTime|Time)\.parse|Instant\.parse|readValue|fromJson|JSON\.parse|json\.(loads|load)\b"
    r"|json\.decoder\.|strptime|fromisoformat|strconv\.\w+|encoding/json\.|json\.Unmarshal|parseInt|parseFloat"
    r"|decimal\.Decimal|uuid\.UUID|NumberFormatException\.forInputString",
)
_LIBRARY_CHECK = re.compile(
    r"Objects\.requireNonNull|Preconditions\.\w+|Validate\.\w+|Assert\.\w+|Assertions\.\w+|Verify\.\w+"
    r"|(^|\.)(assert\w*|require\w*|invariant|must\w*)$",
    re.IGNORECASE,
)
_HELPER_OWNER = re.compile(
    r"(Validate|Validator|Validators|Validation|Preconditions|Checks?|Guards?|Asserts?|Assertions|Require"
    r"|Ensure|Utils?|Helpers?)$",
    re.IGNORECASE,
)
_HELPER_FUNCTION = re.compile(
    r"^(validate|require|check|ensure|assert|verify|must)(_|[A-Z]|$)|^(notNull|notBlank|notEmpty|isTrue"
    r"|not_none|not_empty|is_true)$",
)
_DEPTH_DECAY = 0.55
_CHAIN_DECAY = 0.5
_HELPER_DEMOTION = 0.35
_TOP_SCORE = 0.9
_ENTRY_WEIGHT = 0.2
"""The application's entry frame ranks after the blamed frame's first two callers (every input came in
through it)."""


@dataclass
class Candidate:
    """A suspect under construction: one file line with its score and the evidence for it."""

    path: str
    line: int | None
    function: str
    score: float
    reasons: list[str] = field(default_factory=list)


def frame_name(frame: Frame) -> str:
    """A readable qualified name: `Class.method`, `pkg.func` or `module.function`."""
    function = frame.function or "?"
    if frame.module and not function.startswith(frame.module):
        return f"{frame.module}.{function}"
    if "." in function or "/" in function or not frame.filename:
        return function
    path = (frame.abs_path or frame.filename).replace("\\", "/")
    parts = [p for p in path.split("/") if p]
    stem = parts[-1].rsplit(".", 1)[0] if parts else ""
    owner = parts[-2] if stem == "__init__" and len(parts) > 1 else stem
    if stem not in ("__init__", "") and len(parts) > 1 and parts[-2] not in ("src", "lib", "app"):
        owner = f"{parts[-2]}.{stem}"
    return f"{owner}.{function}" if owner else function


def _owner_and_function(frame: Frame, path: str) -> tuple[str, str]:
    """The owning class (JVM) or file stem, and the bare function name."""
    name = frame_name(frame)
    function = re.split(r"[.:]", name)[-1]
    owner = ""
    for part in name.split("."):
        if part[:1].isupper():
            owner = part.split("$", 1)[0]
            break
    if not owner:
        owner = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return owner, function


def is_helper(frame: Frame, path: str) -> bool:
    """Whether an in-app frame is a checking/utility helper that throws for its caller's mistake."""
    owner, function = _owner_and_function(frame, path)
    return bool(_HELPER_OWNER.search(owner) or _HELPER_FUNCTION.search(function))


def library_thrower(frames: Sequence[Frame], first_mapped: int) -> tuple[str, str] | None:
    """('parser'|'check', name) when a library parser or check raised below the first in-app frame."""
    for frame in reversed(frames[:first_mapped]):  # the API the app called, not its internals
        name = frame_name(frame)
        if _LIBRARY_PARSER.search(name):
            return "parser", name
        if _LIBRARY_CHECK.search(name):
            return "check", name
    return None


def map_frames(
    exc: ExceptionInfo, locate: Callable[[Frame], FileMatch | None]
) -> tuple[list[tuple[int, Frame, FileMatch]], list[str]]:
    """The exception's frames that map to repository files, innermost first, and notes on the test and
    generated code that was left out."""
    mapped: list[tuple[int, Frame, FileMatch]] = []
    notes: list[str] = []
    for i, frame in enumerate(exc.frames):
        match = locate(frame)
        if match is None:
            continue
        if is_test_path(match.path) or is_generated_path(match.path):
            kind = "test" if is_test_path(match.path) else "generated"
            note = f"{kind} code {match.path} in the trace was not considered as culprit"
            if note not in notes:
                notes.append(note)
            continue
        mapped.append((i, frame, match))
    return mapped, notes


def rank_exception(
    exc: ExceptionInfo, chain_position: int, locate: Callable[[Frame], FileMatch | None]
) -> tuple[list[Candidate], list[str]]:
    """Scored candidates for one exception of the chain (0 = root cause), and notes on skipped frames."""
    weight = _CHAIN_DECAY**chain_position
    where = "the root cause" if chain_position == 0 else f"chained exception {exc.type}"
    mapped, notes = map_frames(exc, locate)
    if not mapped:
        return [], notes
    thrower = library_thrower(exc.frames, mapped[0][0])
    helpers = 0
    while helpers < len(mapped) - 1 and is_helper(mapped[helpers][1], mapped[helpers][2].path):
        helpers += 1
    candidates: list[Candidate] = []
    for rank, (index, frame, match) in enumerate(mapped):
        reasons: list[str] = []
        effective = rank - helpers if rank >= helpers else 0
        score = _TOP_SCORE * (_DEPTH_DECAY**effective) * weight
        if rank < helpers:
            score *= _HELPER_DEMOTION
            reasons.append("helper that raised on behalf of its caller")
        elif rank == helpers:
            if helpers:
                reasons.append(f"calls {frame_name(mapped[0][1])}, which raised on its behalf")
            reasons.append(f"deepest in-app frame of {where}" if not helpers else f"caller in {where}")
            if index > 0 and mapped[0][0] == index and thrower:
                kind, name = thrower
                reasons.append(
                    f"passes bad input to {name}"
                    if kind == "parser"
                    else f"{name} rejected an argument it passed"
                )
            elif index == 0:
                reasons.append("raised here")
        else:
            reasons.append("caller, 1 frame above" if effective == 1 else f"caller, {effective} frames above")
        if match.ambiguous:
            score *= 0.8
            reasons.append("file name matches several files")
        candidates.append(Candidate(match.path, frame.lineno, frame.function, min(score, 1.0), reasons))
    return candidates, notes


def candidates_from(verdict: Blame, sites: Sequence[Site], weight: float, where: str) -> list[Candidate]:
    """Candidates for one exception, ranked around the blamed frame (see the module docstring)."""
    blamed = verdict.site
    top = _TOP_SCORE * weight
    reasons = [*verdict.evidence, *_unverified(blamed), f"blamed frame of {where}"]
    out = [Candidate(blamed.path, verdict.line, blamed.frame.function, top, reasons)]
    if verdict.producer:
        path, line = verdict.producer
        out.append(Candidate(path, line, blamed.frame.function, top * 0.6,
                             [f"the value was produced here, then used at {blamed.where}"]))
    position = sites.index(blamed)
    above = list(sites[position + 1 :])
    entry = sites[-1]
    if entry is not blamed and entry.path != blamed.path and len(above) > 1:
        # The outermost application frame: every input of the failing call came in through it.
        out.append(Candidate(entry.path, entry.line, entry.frame.function, top * _ENTRY_WEIGHT,
                             [f"entry point of the application in this trace ({frame_name(entry.frame)})",
                              *_unverified(entry)]))
        above.remove(entry)
    raiser = verdict.raiser
    if raiser is not None and raiser not in verdict.passed:
        # Below the first callers: the value came from above, the raise is only where it was noticed.
        out.append(Candidate(raiser.path, raiser.line, raiser.frame.function, top * 0.2,
                             [f"raised here ({frame_name(raiser.frame)}), on behalf of {blamed.who}",
                              *_unverified(raiser)]))
    name = blamed.who
    for rank, site in _by_line(above):
        if rank == 1:
            why = "loads the module whose top-level code failed" if blamed.top_level else f"calls {name}"
        else:
            why = f"leads to {name}, {rank} frames up the stack"
        out.append(Candidate(site.path, site.line, site.frame.function, top * 0.5 * _DEPTH_DECAY ** (rank - 1),
                             [why, *_unverified(site)]))
    for rank, site in _by_line([s for s in reversed(sites[:position]) if s is not raiser]):
        reported = site in verdict.passed
        score = top * (0.02 if reported else 0.3 * _DEPTH_DECAY ** (rank - 1))
        why = "only passed the value on, or reported" if reported else \
            f"called by {name}" if rank == 1 else f"runs under {name}, {rank} frames down the stack"
        out.append(Candidate(site.path, site.line, site.frame.function, score, [why, *_unverified(site)]))
    return out


def _by_line(sites: Sequence[Site]) -> list[tuple[int, Site]]:
    """The sites with their distance from the blamed frame (1: next to it), the nearest of each line only: a
    generator expression runs on the line of the call that consumes it, and one line is one suspect."""
    seen: set[tuple[str, int | None]] = set()
    out = []
    for rank, site in enumerate(sites, 1):
        if (site.path, site.line) not in seen:
            seen.add((site.path, site.line))
            out.append((rank, site))
    return out


def _unverified(site: Site) -> list[str]:
    return [site.note] if site.note and not site.verified else []


def merge(candidates: Sequence[Candidate]) -> list[Candidate]:
    """One candidate per (path, line): the best score, every reason; best first, stable for ties."""
    merged: dict[tuple[str, int | None], Candidate] = {}
    for cand in candidates:
        key = (cand.path, cand.line)
        if key not in merged:
            merged[key] = Candidate(cand.path, cand.line, cand.function, cand.score, list(cand.reasons))
            continue
        have = merged[key]
        have.score = max(have.score, cand.score)
        have.reasons.extend(r for r in cand.reasons if r not in have.reasons)
    return sorted(merged.values(), key=lambda c: -c.score)


# --- the callee on a null-dereferencing line --------------------------------------------------------

_NULL_MESSAGES = re.compile(
    r"NoneType|nil pointer|null pointer|Cannot read propert(y|ies) of (undefined|null)|is (undefined|null)\b"
    r"|undefined is not an object|null is not an object",  # `is null` covers Java's `because "x" is null`
    re.IGNORECASE,
)
_JAVA_RETURN_NULL = re.compile(r'the return value of "([\w.$]+)\.([\w$]+)\(')
_JAVA_VAR_NULL = re.compile(r'because "([A-Za-z_]\w*)" is null')
_ATTRIBUTE = re.compile(
    r"has no attribute '(\w+)'|\(reading '([^']+)'\)|Cannot read property '([^']+)'"
    r"|evaluating '[\w.]*?\.(\w+)'",
)


def is_null_dereference(exc_type: str, message: str) -> bool:
    """Whether the root cause reads as a null/None/undefined/nil dereference."""
    if exc_type.endswith("NullPointerException"):
        return True
    return bool(_NULL_MESSAGES.search(f"{exc_type}: {message}"))


def java_null_callee(message: str) -> tuple[str, str] | None:
    """(class, method) of a helpful-NPE 'because the return value of "X.m(...)" is null' message."""
    match = _JAVA_RETURN_NULL.search(message)
    return (match.group(1), match.group(2)) if match else None


def null_callee(message: str, line: str, before: Sequence[str]) -> str | None:
    """The function whose return value the culprit line dereferences, from the line and the lines above."""
    attr_match = _ATTRIBUTE.search(message)
    attr = next((g for g in attr_match.groups() if g), None) if attr_match else None
    var_match = _JAVA_VAR_NULL.search(message)
    receivers: list[str] = []
    if var_match:
        receivers.append(var_match.group(1))
    if attr:
        # Each name starts after a non-name character, and an index holds no bracket: both keep these linear.
        direct = re.search(r"(?<![\w.])([\w.]+)\s*\([^()]*\)\s*\??\." + re.escape(attr) + r"\b", line)
        if direct:
            return direct.group(1).rsplit(".", 1)[-1]
        receivers += re.findall(r"(?<!\w)([A-Za-z_]\w*)\??(?:\[[^\][]*\])?\." + re.escape(attr) + r"\b", line)
    if not receivers:
        receivers = re.findall(r"\b([A-Za-z_]\w*)\.\w+", line)
    for receiver in receivers:
        assign = re.compile(
            r"\b" + re.escape(receiver) + r"\s*(?:,\s*\w+\s*)*(?::=|=(?!=))\s*(?:await\s+)?"
            r"(?:new\s+)?([\w.]+)\s*\("
        )
        for text in reversed(before):
            found = assign.search(text)
            if found:
                return found.group(1).rsplit(".", 1)[-1]
    return None


_LINE_COMMENT = re.compile(r"(?://|#).*")


def receiver_type(name: str, lines: Sequence[str]) -> str | None:
    """The declared type of the object the last call to `name` in `lines` is made on: for
    `customers.findById(id)` with `private final CustomerRepository customers;` (or `customers:
    CustomerRepository`, `self.customers = CustomerRepository(...)`) above, `CustomerRepository`. The
    declaration nearest above the call wins; comments are not read."""
    text = "\n".join(_LINE_COMMENT.sub("", line) for line in lines)
    calls = list(re.finditer(r"(?<![\w.])(?:this\.|self\.)?([A-Za-z_]\w*)\s*\.\s*" + re.escape(name) + r"\s*\(", text))
    if not calls:
        return None
    receiver = re.escape(calls[-1].group(1))
    declarations = re.findall(
        rf"\b([A-Z]\w*)(?:<[^<>\n]*>)?\s+{receiver}\s*[;=,)]"  # Java, C#, Go fields and parameters
        rf"|\b{receiver}\s*[?!]?\s*:\s*(?:Optional\[)?([A-Z]\w*)"  # TypeScript, Kotlin, Python annotations
        rf"|\b{receiver}\s*=\s*(?:new\s+)?([A-Z]\w*)\s*\(",  # assigned a new instance
        text[: calls[-1].start()],
    )
    return "".join(declarations[-1]) if declarations else None  # one group of the three matched


def definition_pattern(name: str, extension: str) -> str | None:
    """A regex finding where function `name` is defined in a file with `extension`."""
    n = re.escape(name)
    if extension == "py":
        return rf"^\s*(async\s+)?def\s+{n}\s*\("
    if extension == "go":
        return rf"^func\s+(\([^)]*\)\s*)?{n}\s*\("
    if extension in ("js", "mjs", "cjs", "jsx", "ts", "tsx"):
        return (
            rf"function\s*\*?\s+{n}\s*\(|\b{n}\s*[:=]\s*(async\s*)?(function\b|\([^)]*\)\s*=>|\w+\s*=>)"
            rf"|^\s*(async\s+|static\s+)*{n}\s*\([^)]*\)\s*\{{"
        )
    if extension in ("kt", "kts"):
        return rf"\bfun\s+(<[^>]*>\s*)?([\w.]+\.)?{n}\s*\("
    if extension in ("java", "scala", "groovy", "cs"):
        return rf"^\s*(?!return\b)[\w<>\[\],.?@ ]+\s+{n}\s*\([^;]*$"
    return None
