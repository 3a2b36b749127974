"""The shape of the code around one line: the blocks enclosing it, the condition it runs under, whether
it always runs, whether its method returns a value. Pure functions over a `Source` and a `Method`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from analysis.code.source import Method, Source

RAISE = re.compile(r"(?<![\w$.])(?:throw|raise|panic)\b")
THROWABLE = re.compile(r"(?:Exception|Error|Throwable|Failure)(?:<[^>]*>)?$")
INLINE_CHECK = re.compile(
    r"(?<![\w$])(?:assert|checkState|checkArgument|checkNotNull|checkElementIndex|checkPositionIndex"
    r"|requireNonNull|isTrue|notNull|invariant)\s*\((.*)\)|^\s*assert\s+(.*)$"
)
_BRANCH = re.compile(r"^\s*(?:\}\s*)?(?:if|else|for|while|do|switch|case|default|catch|except|elif|foreach)\b")
_IF = re.compile(r"^(?:\}\s*)?(?:else\s+)?(?:if|elif)\b")
_BRACELESS = re.compile(r"^(?:\}\s*)?(?:else\s+)?(?:if|for|while)\b.*\)$|^(?:\}\s*)?else$")
_CALL_STATEMENT = re.compile(r"^(?:await\s+)?[\w$.]+(?:\([^;]*\))?(?:\.[\w$]+\([^;]*\))*\s*\(.*\)\s*;?$")


def headers(source: Source, method: Method, line: int) -> list[tuple[int, str]]:
    """Block headers (line, text) enclosing `line` inside `method`, innermost first."""
    out: list[tuple[int, str]] = []
    if source.lang == "python":
        text = source.masked(line)
        indent = len(text) - len(text.lstrip())
        for n in range(line - 1, method.start, -1):
            row = source.masked(n)
            level = len(row) - len(row.lstrip())
            if row.strip() and level < indent:
                out.append((n, row.strip()))
                indent = level
        return out
    stack: list[tuple[int, str]] = []
    previous = ""
    for n in range(max(method.body, method.start), line):
        row = source.masked(n)
        for col, ch in enumerate(row):
            if ch == "{":
                stack.append((n, row[:col].strip() or previous))
            elif ch == "}" and stack:
                stack.pop()
        if row.strip():
            previous = row.strip()
    out = list(reversed(stack[1:]))  # the first brace opens the method body
    above = source.masked(line - 1).strip()
    if _BRACELESS.match(above):
        out.insert(0, (line - 1, above))
    here = source.masked(line).strip()
    if re.match(r"^(?:\}\s*)?(?:else\s+)?if\s*\(", here) and RAISE.search(here):
        out.insert(0, (line, here))  # `if (x) throw ...` on one line
    return out


def branch(source: Source, method: Method, line: int) -> str:
    """The innermost loop or branch header around `line` in its method; '' when the line always runs."""
    return next((text for _, text in headers(source, method, line) if _BRANCH.match(text)), "")


class Condition(NamedTuple):
    """What a statement runs under; `caught`: the body of the `try` whose `catch` holds it, which it runs
    after when that fails."""

    text: str
    caught: bool = False


def condition(source: Source, method: Method, line: int) -> Condition | None:
    """The condition the statement at `line` runs under (a check's own argument, the enclosing `if`, the
    `try` a `catch` guards, a `switch` subject); None when it always runs."""
    inline = INLINE_CHECK.search(source.statement_text(line))
    if inline:
        return Condition(inline.group(1) or inline.group(2))
    for header_line, text in headers(source, method, line):
        if _IF.match(text):
            return Condition(_if_condition(text))
        if re.match(r"^(?:\}\s*)?else\b", text):
            for n in range(header_line, method.start, -1):
                row = source.masked(n).strip()
                if re.match(r"^(?:\}\s*)?(?:if|elif)\b", row):
                    return Condition(_if_condition(row))
            return None
        if re.match(r"^(?:\}\s*)?(?:catch|except)\b", text):
            for n in range(header_line - 1, method.start, -1):
                if re.match(r"^\s*(?:\}\s*)?try\b", source.masked(n)):
                    return Condition(" ".join(source.masked(k).strip() for k in range(n + 1, header_line)), True)
            return None
        if re.match(r"^(?:case\b|default\b|switch\b)", text):
            subject = _switch_subject(source, method, header_line)
            return Condition(subject) if subject is not None else None
    return None


def default_case(source: Source, method: Method, line: int) -> str | None:
    """The switch subject when `line` sits in a switch's default branch (a kind the code does not handle)."""
    for header_line, text in headers(source, method, line):
        found = re.match(r"^switch\s*\((.*)\)\s*$", text) or re.match(r"^match\s++(.*):$", text)
        if found is None:
            continue
        for n in range(line, header_line, -1):
            label = source.masked(n).strip()
            if re.match(r"^(?:case\b.*:|default\s*:|case\s+_\s*:)", label):
                return found.group(1) if re.match(r"^(?:default|case\s+_)\b", label) else None
        return None
    return None


def _switch_subject(source: Source, method: Method, case_line: int) -> str | None:
    for n in range(case_line, method.start, -1):
        found = re.search(r"\bswitch\s*\((.*)\)", source.masked(n))
        if found:
            return found.group(1)
    return None


def _if_condition(text: str) -> str:
    body = re.sub(r"^(?:\}\s*)?(?:else\s+)?(?:if|elif)\s*", "", text)
    if body.rstrip().endswith(("{", ":")):
        body = body.rstrip()[:-1].rstrip()
    body = re.split(r"\)\s*(?:throw|raise)\b", body)[0]
    return body.strip().removeprefix("(").removesuffix(")")


def returns_value(source: Source, method: Method, besides: int = 0) -> bool:
    """Whether the method returns a value anywhere but in the statement at `besides` (an exception
    factory returning its exception does not count)."""
    if method.returns and THROWABLE.search(method.returns):
        return False
    first, last = source.statement(besides) if besides else (0, -1)
    return any(re.search(r"\breturn\s+[^;\s]", source.masked(n))
               for n in range(method.start + 1, method.end + 1) if not first <= n <= last)


def only_exits_before(source: Source, method: Method, line: int) -> bool:
    """Whether only early exits and assignments run before `line` in its method: no loop, no call made
    for its effect."""
    n = max(method.body, method.start) + 1
    while n < line:
        text = source.masked(n).strip()
        if re.match(r"^(?:for|while|do)\b", text):
            return False
        if _CALL_STATEMENT.match(text) and not re.match(r"^(?:return|throw|raise|if|elif|else|assert)\b", text):
            return False
        n = max(n, source.statement(n)[1]) + 1
    return True
