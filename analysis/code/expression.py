"""Expressions as text: operands, calls and their arguments, parameter names, literals.

Pure string functions over one statement whose strings and comments are already blanked (see
`analysis.code.source`), language-blind except where a parameter list says otherwise.
"""

from __future__ import annotations

import re

IDENT = r"[A-Za-z_$][\w$]*"
# Words that are never a variable read in any of the languages read here.
KEYWORDS = frozenset((
    "if", "else", "elif", "for", "while", "do", "switch", "case", "default", "return", "throw", "raise", "new",
    "try", "catch", "except", "finally", "this", "self", "super", "null", "true", "false", "None", "True", "False",
    "nil", "undefined", "instanceof", "typeof", "not", "and", "or", "is", "in",
))
_MAX_CALLS = 8
_IDENT_AT = re.compile(r"(?:this\.|self\.)?" + IDENT)
# Matched right after an operand (never after a space), so a run of spaces is tried from its start only.
_MEMBER = re.compile(r"(?<!\s)\s*+(?:\?\.|\.)\s*+[A-Za-z_$][\w$]*+")
_OPENER = re.compile(r"(?<!\s)\s*+([(\[])")
_NUMBER = re.compile(r"\d[\w.]*")
_LITERAL = re.compile(
    r"-?\d[\d_.eExXa-fA-FlLfFdD]*|\"[^\"]*\"|'[^']*'|`[^`]*`|null|None|nil|true|false|True|False|undefined"
)
# An ALL_CAPS name; the lookbehind tries a run of underscores from its start only.
CONSTANT_NAME = re.compile(r"(?<!_)_*+[A-Z][A-Z0-9_]*+")


def split_args(text: str) -> list[str]:
    """Top-level comma-separated parts of an argument or parameter list (generics' commas kept)."""
    parts: list[str] = []
    depth = angle = 0
    current: list[str] = []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and depth == 0:
            angle += 1
        elif ch == ">" and depth == 0 and angle:
            angle -= 1
        if ch == "," and depth == 0 and angle == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    tail = "".join(current).strip()
    if tail or parts:
        parts.append(tail)
    return parts


def param_name(text: str, lang: str) -> str:
    """The name one parameter declares: types, defaults, annotations and modifiers dropped."""
    text = re.sub(r"@[\w.]+(?:\([^)]*\))?", " ", text).strip()
    if not text:
        return ""
    if lang == "python":
        name = re.split(r"[:=]", text, maxsplit=1)[0].strip().lstrip("*")
    elif lang == "js":
        name = text.split("=", 1)[0].strip().lstrip(".").split(":", 1)[0].strip().rstrip("?")
    elif lang == "go":
        name = text.split()[0]
    else:
        kotlin = re.match(r"^(?:va[lr]\s+)?(" + IDENT + r")\s*:", text)
        if kotlin:
            return kotlin.group(1)
        names = [n for n in re.findall(IDENT, text.split("=", 1)[0]) if n not in ("final", "in", "out", "ref")]
        return names[-1] if len(names) >= 2 else ""
    return name if re.fullmatch(IDENT, name) else ""


def closing(text: str, open_at: int) -> int | None:
    """Index of the bracket closing the one at `open_at`, or None when the text ends first."""
    depth = 0
    for k in range(open_at, len(text)):
        if text[k] in "([{":
            depth += 1
        elif text[k] in ")]}":
            depth -= 1
            if depth == 0:
                return k
    return None


def bracket_pairs(text: str) -> dict[int, int]:
    """Index of every opening bracket that closes, to the index of its closing one (as `closing` finds it),
    in one pass, so a statement with many calls is not rescanned once per call."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    for k, ch in enumerate(text):
        if ch in "([{":
            opened.append(k)
        elif ch in ")]}" and opened:
            pairs[opened.pop()] = k
    return pairs


def calls_in(text: str, name: str) -> list[tuple[str, list[str]]]:
    """(receiver, arguments) of the calls to `name` in a statement (the first _MAX_CALLS); receiver '' for a
    bare call."""
    found: list[tuple[str, list[str]]] = []
    # The receiver starts a word and has at most 6 links, so each position costs a bounded amount.
    pattern = re.compile(
        r"(?:(?<![\w$])((?:[\w$]++(?:\([^()]*+\))?(?:\[[^\][]*+\])?\??\.){0,6})|new\s++)(?<![\w$])" + re.escape(name)
        + r"\s*+(?:<[^<>()]*+>)?\s*+\("
    )
    pairs: dict[int, int] | None = None
    for match in pattern.finditer(text):
        open_at = match.end() - 1
        pairs = bracket_pairs(text) if pairs is None else pairs
        close = pairs.get(open_at)
        inner = text[open_at + 1 : close] if close is not None else text[open_at + 1 :]
        found.append(((match.group(1) or "").rstrip(".?"), split_args(inner)))
        if len(found) == _MAX_CALLS:  # each call's arguments are split once: a bounded number stays linear
            break
    return found


def call_args(expr: str) -> list[str]:
    """Arguments of the call an operand ends with (`a.b(x, y)` → ['x', 'y']); [] when it is no call."""
    if not expr.rstrip().endswith(")"):
        return []
    depth = 0
    for k in range(len(expr) - 1, -1, -1):
        if expr[k] == ")":
            depth += 1
        elif expr[k] == "(":
            depth -= 1
            if depth == 0:
                return [a for a in split_args(expr[k + 1 : -1]) if a]
    return []


def operands(text: str) -> list[str]:
    """The primary expressions of an expression, in order: `a.b(c)[i].d`, `f(x)`, `this.x`, `"lit"`, `3`.

    Operators split operands; a call's or a subscript's brackets stay with its operand.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        after_word = i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_$.")
        if ch in "\"'`":
            end = text.find(ch, i + 1)
            end = n - 1 if end < 0 else end
            out.append(text[i : end + 1])
            i = end + 1
            continue
        match = _IDENT_AT.match(text, i) if (ch.isalpha() or ch in "_$") and not after_word else None
        if match is None:
            number = _NUMBER.match(text, i) if ch.isdigit() and not after_word else None
            out += [number.group(0)] if number else []
            i = number.end() if number else i + 1
            continue
        j = match.end()
        while j < n:
            member = _MEMBER.match(text, j)
            if member:
                j = member.end()
                continue
            opener = _OPENER.match(text, j)
            if opener is None:
                break
            close = closing(text, opener.end(1) - 1)
            j = n if close is None else close + 1
        out.append(text[i:j].strip())
        i = j
    return out


def receivers_in(text: str) -> list[str]:
    """Expressions dereferenced in a statement (`a.b`, `a[i]`, `f(x).y`), in order of appearance."""
    out: list[str] = []
    pattern = r"(?<![\w$.])((?:this\.|self\.)?" + IDENT + r"(?:\([^()]*\))?)\s*\??(?:\.|\[)"
    for match in re.finditer(pattern, text):
        expr = match.group(1)
        base = re.match(IDENT, expr.removeprefix("this.").removeprefix("self."))
        if base is None or base.group(0) in KEYWORDS - {"this", "self"}:
            continue
        if base.group(0)[:1].isupper() and not base.group(0).isupper() and "(" not in expr:
            continue  # a class name: a static member, not a value (an ALL_CAPS constant is a value)
        if expr not in out:
            out.append(expr)
    return out


def is_literal(expr: str) -> bool:
    """Whether an expression is a constant: number, string, null, boolean, object or list literal."""
    expr = expr.strip()
    return bool(_LITERAL.fullmatch(expr)) or (len(expr) >= 2 and expr[0] + expr[-1] in ("{}", "[]"))
