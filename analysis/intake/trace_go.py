"""Go panics and goroutine dumps: the panicking goroutine's frames, re-panics as a chain."""

from __future__ import annotations

import re

from analysis.cache import memoize
from analysis.event import Frame, new_exception
from analysis.intake.trace_dialect import MAX_CHAIN, RARE_BREAK, Chain, Split, Stacks, TraceDialect

_RUNNING = " [running]:\n"
# The argument words ending a function line (`(0xc000ab2ecc, {0x9a5e40?, 0x5})`, `(...)`): pointers and
# lengths, fresh in every event of a burst, which no frame reads (`_go_function` cuts them off). Of hex
# digits, braces and punctuation only, they hold no text the language detection looks for.
_ARGUMENTS = re.compile(r"\([0-9a-fx{}?., ]+\)$", re.MULTILINE)
_INDENTED_CALL = re.compile(r"^[^\S\n].*\(\)$", re.MULTILINE)  # a location line reads its parentheses


def _go_function(line: str) -> tuple[str, str]:
    name = line
    if name.endswith(")"):
        name = name[: name.rfind("(")]
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot <= 0:
        return "", name
    return name[:dot], name[dot + 1 :]


@memoize("trace_go.frame", 16384, 8 << 20)
def _go_frame(function_line: str, location_line: str) -> Frame:
    module, function = _go_function(function_line)
    location = location_line.strip().partition(" +0x")[0]
    path, sep, line_text = location.rpartition(":")
    if not sep:
        path, line_text = location, ""
    lineno = int(line_text) if line_text.isdigit() and len(line_text) < 10 else None
    return Frame(function, path, path, module, lineno)


def go_panics(lines: list[str]) -> list[tuple[str, str]]:
    """The panic lines, newest first: a re-panic prints the earlier one (`[recovered]`) first."""
    panics: list[tuple[str, str]] = []
    for line in lines:
        if line.startswith("goroutine "):
            break
        stripped = line.strip()
        for prefix, kind in (("panic: ", "panic"), ("fatal error: ", "fatal error")):
            if stripped.startswith(prefix) and len(panics) < MAX_CHAIN:
                value = stripped[len(prefix) :].removesuffix(" [recovered]").removesuffix(" [recovered, repanicked]")
                if value.startswith("runtime error: "):
                    kind, value = "runtime.Error", value[len("runtime error: ") :]
                panics.append((kind, value))
    return list(reversed(panics))


def parse_go(text: str, max_frames: int) -> Chain:
    """The panics of a Go crash, newest first, each with the panicking goroutine's frames."""
    lines = text.splitlines()
    panics = go_panics(lines)
    start = -1
    for index, line in enumerate(lines):
        if line.startswith("goroutine ") and line.rstrip().endswith(":"):
            if start < 0:
                start = index
            if "[running" in line:  # the goroutine that panicked
                start = index
                break
    frames: list[Frame] = []
    if start >= 0:
        index = start + 1
        while index + 1 < len(lines) and len(frames) < max_frames:
            function_line, location_line = lines[index].strip(), lines[index + 1]
            if not function_line or function_line.startswith("goroutine "):
                break
            if function_line.startswith("created by ") or not location_line[:1].isspace():
                index += 1 if not location_line[:1].isspace() else 2
                continue
            frames.append(_go_frame(function_line, location_line))
            index += 2
    if not panics:
        if not frames:
            return ()
        panics = [("panic", "")]
    frozen = tuple(frames)
    return tuple(new_exception(kind, value, frozen) for kind, value in panics)


def _split(text: str) -> Split | None:
    """The panic lines, and the running goroutine's frames with their argument words left out: the region
    stands for every text whose frames differ from it only there. Not when an argument list may end a line
    the full parser could read otherwise than as a function line (an indented one, which a location line
    is, or one a rare line break splits): the text is then cached whole."""
    running = text.find(_RUNNING)
    line_start = text.rfind("\n", 0, running) + 1
    if running < 0 or not text.startswith("goroutine ", line_start):
        return None
    body = running + len(_RUNNING)
    end = text.find("\n\n", body)
    region = _ARGUMENTS.sub("()", text[body : end if end >= 0 else len(text)])
    if RARE_BREAK.search(region) is not None or _INDENTED_CALL.search(region) is not None:
        return None
    return [text[:line_start]], [region]


def _match(text: str, regions: tuple[str, ...]) -> Split | None:
    """`_split`'s header when the running goroutine's frames are the cached region but for their argument
    words (a function line's last parentheses, whose content the frame never reads)."""
    (region,) = regions
    running = text.find(_RUNNING)
    line_start = text.rfind("\n", 0, running) + 1
    if running < 0 or not text.startswith("goroutine ", line_start):
        return None
    body = running + len(_RUNNING)
    # Leaving out argument words only shortens a frame region: a text whose region ends (at a blank line)
    # before this one's length cannot match it, so the search starts there, not at `body` (a blank line
    # before it stays in the text compared, which then differs: the region holds none).
    end = text.find("\n\n", body + len(region))
    if end < 0:
        end = len(text)
    if _ARGUMENTS.sub("()", text[body:end]) != region:
        return None
    header = text[:line_start]
    if "[running" in header:  # an earlier goroutine line the full parser might pick instead
        return None
    if RARE_BREAK.search(text, 0, body) is not None:  # the full parser also splits lines there
        return None
    return [header], [text[:body], text[end:]]


def _rebuild(headers: list[str], stacks: Stacks) -> Chain:
    panics = go_panics(headers[0].splitlines()) or [("panic", "")]
    return tuple(new_exception(kind, value, stacks[0]) for kind, value in panics)


def _stacks(chain: Chain) -> Stacks:
    return tuple(exception.frames for exception in chain)[:1]


DIALECT = TraceDialect("go", parse_go, _split, _match, _rebuild, _stacks)
