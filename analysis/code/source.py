"""One source file as the localiser reads it: methods by name, the statement at a line, who a name is.

Pure over a file's lines. `Source` blanks strings and comments once (`analysis.code.mask`), so brace
matching and the patterns here never trip over a `{` in a string or a call in a comment. It is not a
parser: it finds a method's extent and parameters, the statement around a line, and whether a name read
at a line is a parameter, a local or the object's state. Java, Kotlin, Scala, C#, JS/TS and Go share the
C-like rules; Python uses indentation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from analysis.code.expression import CONSTANT_NAME, IDENT, param_name, split_args
from analysis.code.mask import mask

_C_LIKE = {
    "java": "java", "kt": "java", "kts": "java", "scala": "java", "groovy": "java", "cs": "java",
    "js": "js", "mjs": "js", "cjs": "js", "jsx": "js", "ts": "js", "tsx": "js", "go": "go",
}  # fmt: skip
_RESERVED = {
    "java": "if else for while do switch case default return throw throws new try catch finally break continue "
            "this super null true false instanceof synchronized class interface enum assert var yield",
    "js": "if else for while do switch case default return throw new try catch finally break continue this "
          "super null true false instanceof typeof undefined function class let const var await async delete "
          "void in of yield",
    "go": "if else for switch case default return go defer func range select struct type chan map nil true "
          "false var const break continue",
    "python": "if else elif for while return raise try except finally with as def class lambda pass yield "
              "from import not and or is in None True False assert del global nonlocal await async",
}  # fmt: skip
_NOT_A_METHOD = {lang: frozenset(words.split()) for lang, words in _RESERVED.items()}
_DECL_PREFIX = re.compile(
    r"^(?:@[\w.]++(?:\([^)]*+\))?\s++)*+(?:(?:public|protected|private|static|final|abstract|synchronized|native"
    r"|default|strictfp|override|open|suspend|inline|internal|operator|async|get|set|export|fun|def)\s++)*+"
    r"(?:<[^>]*+>\s*+)?(?:[\w$.\[\]?,]++(?:<[^;=()]*>)?(?:\[\])*\s+)?$"
)
_MODIFIERS = frozenset(("public", "protected", "private", "static", "final", "abstract", "synchronized", "native",
                        "default", "strictfp", "override", "open", "suspend", "inline", "internal", "operator"))
_NOT_DECL = re.compile(r"(?:^|\s)(?:return|new|throw|else|case|await|yield|typeof|delete|in|of)\s*$|[=.!&|?:+\-*/%,(]$")
_JS_DECLS = (
    re.compile(r"\bfunction\s*+\*?\s*+(?P<name>" + IDENT + r"+)\s*+(?P<open>\()"),
    re.compile(r"(?:^|[\s.])(?P<name>" + IDENT + r")\s*[:=]\s*(?:async\s+)?function\s*\*?\s*(?:" + IDENT
               + r")?\s*(?P<open>\()"),
    re.compile(r"(?:^|[\s.])(?P<name>" + IDENT + r")\s*[:=]\s*(?:async\s+)?(?P<open>\()[^()]*\)\s*=>"),
    re.compile(r"^\s*(?:static\s+|async\s+|get\s+|set\s+)*(?!(?:if|for|while|switch|catch|return|function)\b)"
               r"(?P<name>" + IDENT + r")\s*(?P<open>\()(?=[^;]*\)\s*\{)"),
)
_PY_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(" + IDENT + r")\s*\(")
_GO_FUNC = re.compile(r"^func\s*(?:\((\w+)?[^)]*\)\s*)?$")
_BODY_HEAD = re.compile(r"^\s*+(?:throws\s++[\w$.,\s<>]++)?(?::[\s\w$.<>\[\]|,?]++)?\s*+(=>|\{)")


def language_of(path: str) -> str | None:
    """'java' (JVM and C# class languages), 'js', 'go', 'python', or None for files not read as code."""
    ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if ext in ("py", "pyw"):
        return "python"
    return _C_LIKE.get(ext)


@dataclass(frozen=True, slots=True)
class Method:
    """A function or method declared in a file; lines are 1-based and inclusive."""

    name: str
    start: int
    end: int
    params: tuple[str, ...]
    returns: str = ""
    """The declared return type (typed languages), or empty."""
    receiver: str = ""
    """Go: the receiver's name, through which the object's state is read."""
    body: int = 0
    """The line the parameter list closes on; the body follows (a signature may span lines)."""

    def contains(self, line: int) -> bool:
        """Whether `line` is inside the declaration or the body."""
        return self.start <= line <= self.end


MAX_LINE_CHARS = 2000
"""Longer lines are not code a person wrote (minified or generated): they read as blank lines, so the
rules here, which look for methods and statements, never scan one and cost at most linear in the file."""


@dataclass(frozen=True)
class Source:
    """One file's lines, raw and masked, with the lookups a stack frame needs."""

    path: str
    lines: tuple[str, ...]
    lang: str

    def __post_init__(self) -> None:
        if any(len(line) > MAX_LINE_CHARS for line in self.lines):
            object.__setattr__(self, "lines", tuple("" if len(line) > MAX_LINE_CHARS else line for line in self.lines))

    @cached_property
    def code(self) -> tuple[str, ...]:
        """The lines with string contents and comments blanked."""
        return tuple(mask(list(self.lines), self.lang))

    def text(self, line: int) -> str:
        """Raw text of a 1-based line, or '' outside the file."""
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""

    def masked(self, line: int) -> str:
        """Masked text of a 1-based line, or '' outside the file."""
        return self.code[line - 1] if 1 <= line <= len(self.code) else ""

    @cached_property
    def methods(self) -> tuple[Method, ...]:
        """Every function and method declared in the file, in order."""
        return tuple(self._python_methods() if self.lang == "python" else self._c_like_methods())

    def named(self, name: str) -> list[Method]:
        """Methods called `name` (constructors by their class's name, `constructor` in JS)."""
        return [m for m in self.methods if m.name == name]

    def enclosing(self, line: int) -> Method | None:
        """The innermost method whose extent holds `line`."""
        holding = [m for m in self.methods if m.contains(line)]
        return max(holding, key=lambda m: m.start) if holding else None

    # -- declarations ---------------------------------------------------------------------------------

    def _python_methods(self) -> list[Method]:
        found: list[Method] = []
        for index, line in enumerate(self.code):
            match = _PY_DEF.match(line)
            if not match:
                continue
            indent = len(match.group(1))
            params_text, close = self._balanced(index, line.index("(", match.end(2)))
            end = close[0]
            for later in range(close[0] + 1, len(self.code)):
                text = self.code[later]
                if text.strip():
                    if len(text) - len(text.lstrip()) <= indent:
                        break
                    end = later
            params = tuple(p for p in (param_name(p, "python") for p in split_args(params_text)) if p)
            found.append(Method(match.group(2), index + 1, end + 1, params, "", "", close[0] + 1))
        return found

    def _c_like_methods(self) -> list[Method]:
        found: list[Method] = []
        for index, line in enumerate(self.code):
            head = self._js_head(line) if self.lang == "js" else self._head(line)
            if head is not None:
                method = self._declaration(index, *head)
                if method is not None:
                    found.append(method)
        return found

    @staticmethod
    def _js_head(line: str) -> tuple[str, int, str] | None:
        for pattern in _JS_DECLS:
            match = pattern.search(line)
            if match:
                return match.group("name"), match.start("open"), ""
        return None

    def _head(self, line: str) -> tuple[str, int, str] | None:
        """(name, column of its '(', prefix or Go receiver) when a JVM or Go line declares a method."""
        for match in re.finditer(r"(?<![\w$.])(" + IDENT + r")\s*\(", line):
            name = match.group(1)
            if name in _NOT_A_METHOD[self.lang]:
                continue
            prefix = line[: match.start()].strip()
            if self.lang == "go":
                go = _GO_FUNC.match(prefix)
                if go:
                    return name, match.end() - 1, go.group(1) or ""
            elif _DECL_PREFIX.match(prefix + " ") and not _NOT_DECL.search(prefix):
                return name, match.end() - 1, prefix
        return None

    def _declaration(self, index: int, name: str, open_col: int, extra: str) -> Method | None:
        params_text, close = self._balanced(index, open_col)
        li, ci = close
        after = " ".join([self.code[li][ci + 1 :], *self.code[li + 1 : li + 4]])
        receiver = returns = ""
        if self.lang == "go":
            go = re.match(r"^\s*+([^{]*+)\{", after)
            if go is None:
                return None
            receiver, returns = extra, go.group(1).strip()
        elif _BODY_HEAD.match(after) is None:
            return None
        elif self.lang == "java" and extra.split() and extra.split()[-1] not in _MODIFIERS:
            returns = extra.split()[-1]
        end = self._body_end(close)
        if end is None:
            return None
        params = tuple(p for p in (param_name(p, self.lang) for p in split_args(params_text)) if p)
        return Method(name, index + 1, end + 1, params, returns, receiver, li + 1)

    def _balanced(self, index: int, col: int) -> tuple[str, tuple[int, int]]:
        """Text inside the parenthesis opening at (index, col), and the (line, column) of its close."""
        depth = 0
        parts: list[str] = []
        for li in range(index, min(len(self.code), index + 40)):
            text = self.code[li]
            for ci in range(col if li == index else 0, len(text)):
                ch = text[ci]
                if ch in "([{":
                    depth += 1
                    if depth == 1 and ch == "(":
                        continue
                elif ch in ")]}":
                    depth -= 1
                    if depth == 0:
                        return "".join(parts), (li, ci)
                parts.append(ch)
            parts.append(" ")
        return "".join(parts), (index, max(0, len(self.code[index]) - 1))

    def _body_end(self, close: tuple[int, int]) -> int | None:
        """0-based line of the brace closing the body after `close` (an arrow's expression: its line)."""
        li, ci = close
        depth = 0
        opened = False
        for line_index in range(li, len(self.code)):
            for ch in self.code[line_index][ci + 1 if line_index == li else 0 :]:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
                    if opened and depth == 0:
                        return line_index
                elif ch == ";" and not opened:
                    return line_index if self.lang == "js" else None
            if not opened and line_index > li + 3:
                return None
        return len(self.code) - 1 if opened else None

    # -- statements -----------------------------------------------------------------------------------

    def statement(self, line: int) -> tuple[int, int]:
        """First and last line of the statement holding `line` (a few lines either way at most)."""
        if self.lang == "python":
            return self._python_statement(line)
        first = line
        while first > 1 and line - first < 4:
            before = self.masked(first - 1).rstrip()
            if not before or before.endswith((";", "{", "}", ":")) or before.lstrip().startswith(("@", "case ")):
                break
            continues = re.search(r"[(,+\-*/=&|?.]$|^\s*[.)]", before) or self.masked(first).lstrip().startswith(
                (".", "+", "-", "?", ":", "&&", "||", ")"))
            if not continues:
                break
            first -= 1
        last = line
        depth = sum(t.count("(") - t.count(")") for t in self.code[first - 1 : line])
        while last < len(self.code) and last - line < 6:
            text = self.masked(last).rstrip()
            if depth <= 0 and (text.endswith((";", "{", "}")) or not text):
                break
            last += 1
            depth += self.masked(last).count("(") - self.masked(last).count(")")
        return first, last

    def _python_statement(self, line: int) -> tuple[int, int]:
        def opened(rows: tuple[str, ...]) -> int:
            return sum(t.count("(") + t.count("[") + t.count("{") - t.count(")") - t.count("]") - t.count("}")
                       for t in rows)

        first = line
        while first > 1 and line - first < 4:
            if opened(self.code[first - 2 : line - 1]) <= 0 and not self.code[first - 2].rstrip().endswith("\\"):
                break
            first -= 1
        last = line
        depth = opened(self.code[first - 1 : line])
        while depth > 0 and last < len(self.code) and last - line < 6:
            last += 1
            depth += opened((self.masked(last),))
        return first, last

    def statement_text(self, line: int, masked: bool = True) -> str:
        """The statement at `line` on one line; masked: strings and comments blanked."""
        first, last = self.statement(line)
        rows = self.code[first - 1 : last] if masked else self.lines[first - 1 : last]
        return " ".join(r.strip() for r in rows)

    def as_written(self, line: int, fragments: Sequence[str]) -> list[str]:
        """`fragments` of the masked statement at `line` (`statement_text`), in order, as the code writes
        them: string contents shown again (a fragment not found in it is kept as it is)."""
        first, last = self.statement(line)
        masked_rows, raw_rows = [], []
        for masked_row, raw_row in zip(self.code[first - 1 : last], self.lines[first - 1 : last], strict=True):
            start, end = len(masked_row) - len(masked_row.lstrip()), len(masked_row.rstrip())
            masked_rows.append(masked_row[start:end])
            raw_rows.append(raw_row[start:end])
        masked, raw = " ".join(masked_rows), " ".join(raw_rows)
        written, at = [], 0
        for fragment in fragments:
            found = masked.find(fragment, at) if fragment else -1
            if found < 0:
                written.append(fragment)
                continue
            written.append(raw[found : found + len(fragment)])
            at = found + len(fragment)
        return written

    # -- names ----------------------------------------------------------------------------------------

    def assignment(self, method: Method, name: str, before: int) -> int | None:
        """The last line in `method` before line `before` that assigns or declares the local `name`."""
        n = re.escape(name)
        if self.lang == "python":
            # Repeats are bounded (an annotation or a target list is short) so each start costs a constant.
            pattern = re.compile(rf"(?:^|[\s,(]){n}\s*+(?::[^=]{{1,200}}+)?=(?!=)"
                                 rf"|\bfor\s++(?:[\w,\s]{{0,60}}\b)?{n}\b[\w,\s]{{0,60}}\bin\b"
                                 rf"|\bas\s++{n}\b|\b{n}\s*+,[\w\s,]{{0,200}}+=(?!=)")
        elif self.lang == "go":
            pattern = re.compile(rf"\b{n}\b(?:\s*,\s*\w+)*\s*:?=(?!=)|\bvar\s+{n}\b|\bfor\s+(?:\w+\s*,\s*)?{n}\b.*:=")
        else:
            pattern = re.compile(rf"(?<![\w$.]){n}\s*(?:[+\-*/|&]?=)(?!=)|(?:[\w$]>?|\])\s+{n}\s*[;:=,]"
                                 rf"|\bcatch\s*\([^)]*\b{n}\s*\)")
        for line in range(before - 1, max(method.start, method.body), -1):
            if pattern.search(self.masked(line)):
                return line
        return None

    def role(self, method: Method, name: str, line: int) -> str:
        """'param', 'local', 'field' or 'constant' for a name read at `line` inside `method`."""
        if name.startswith(("this.", "self.")) or (method.receiver and name == method.receiver):
            return "field"
        assigned = self.assignment(method, name, line)
        # A parameter reassigned before the line is a local from there on, unless it is only reshaped
        # (`msg = format(msg, args)`).
        if assigned is not None and not (name in method.params and _self_derived(self.statement_text(assigned), name)):
            return "local"
        if name in method.params:
            return "param"
        if CONSTANT_NAME.fullmatch(name):
            return "constant"
        return "field"


def _self_derived(statement: str, name: str) -> bool:
    """Whether an assignment to `name` computes it from itself (`x = f(x)`, `x += 1`)."""
    match = re.search(r"(?<![\w$.])" + re.escape(name) + r"\s*([+\-*/|&]?)=(?!=)(.*)", statement)
    if match is None:
        return False
    return bool(match.group(1)) or re.search(r"(?<![\w$.])" + re.escape(name) + r"\b", match.group(2)) is not None
