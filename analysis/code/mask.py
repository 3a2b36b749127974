"""Source lines with string contents and comments blanked, each line keeping its length.

Brace matching and every pattern of the localiser read these masked lines, so a `{` in a string or a
call in a comment is never code. Quotes stay, so a literal is still visible as one; the code inside an
f-string's or a template literal's braces stays too.
"""

from __future__ import annotations

import re


def mask(lines: list[str], lang: str) -> list[str]:
    """The lines of a file in `lang` ('python' or a C-like language: 'java', 'js', 'go'), masked."""
    return _mask_python(lines) if lang == "python" else _mask_c_like(lines, lang)


def _blank_string(chars: list[str], start: int, quote: str, code_open: str = "") -> int:
    """Blank a string's contents from `start` (after its opening quote); returns the closing index.

    With `code_open` ('{' for an f-string, '${' for a template literal) the code inside its braces stays.
    """
    j = start
    while j < len(chars) and chars[j] != quote:
        width = len(code_open)
        if code_open and "".join(chars[j : j + width]) == code_open and chars[j + width : j + width + 1] != ["{"]:
            depth, j = 1, j + width
            while j < len(chars) and depth:
                depth += {"{": 1, "}": -1}.get(chars[j], 0)
                j += 1
            continue
        if chars[j] == "\\" and j + 1 < len(chars):
            chars[j] = " "
            j += 1
        chars[j] = " "
        j += 1
    return j


def _mask_c_like(lines: list[str], lang: str) -> list[str]:
    """Lines with comments and string contents blanked; quotes stay, so literals remain visible."""
    out: list[str] = []
    block = False  # inside /* */
    raw = False  # inside a multi-line Go raw string or JS template
    for line in lines:
        chars = list(line)
        i = 0
        while i < len(chars):
            c = chars[i]
            if block or raw:
                closing = "*/" if block else "`"
                if line.startswith(closing, i):
                    if block:
                        chars[i] = chars[i + 1] = " "
                    block = raw = False
                    i += len(closing)
                    continue
                chars[i] = " "
                i += 1
            elif line.startswith("//", i):
                chars[i:] = " " * (len(chars) - i)
                break
            elif line.startswith("/*", i):
                chars[i] = chars[i + 1] = " "
                block = True
                i += 2
            elif c == "`" and lang == "js":
                i = _blank_string(chars, i + 1, "`", "${") + 1
                raw = i > len(chars)  # a template literal going on past this line
            elif c == "`" and lang == "go":
                raw = True
                i += 1
            elif c == '"' or c == "'":
                i = _blank_string(chars, i + 1, c) + 1
            else:
                i += 1
        out.append("".join(chars))
    return out


def _mask_python(lines: list[str]) -> list[str]:
    out: list[str] = []
    triple: str | None = None
    for line in lines:
        chars = list(line)
        i = 0
        while i < len(chars):
            if triple is not None:
                if line.startswith(triple, i):
                    triple = None
                    i += 3
                else:
                    chars[i] = " "
                    i += 1
            elif chars[i] == "#":
                chars[i:] = " " * (len(chars) - i)
                break
            elif line.startswith(('"""', "'''"), i):
                triple = line[i : i + 3]
                i += 3
            elif chars[i] in "\"'":
                formatted = re.match(r"(?i)(?:rf|fr|f)$", line[max(0, i - 2) : i].lstrip(" (=,[{:+"))
                i = _blank_string(chars, i + 1, chars[i], "{" if formatted else "") + 1
            else:
                i += 1
        out.append("".join(chars))
    return out
