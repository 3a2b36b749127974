"""Bound parameters printed apart from their statement: the values of secret-named columns.

SQLAlchemy's errors (`sqlalchemy.exc.StatementError` and its subclasses) end with the statement and its
positional parameters, which carry no names, so no keyed rule sees a secret among them:

    [SQL: INSERT INTO users (email, password) VALUES (?, ?)]
    [parameters: ('bob@example.com', 'hunter2')]

Each placeholder (`?`, `%s`, `$1`, `:1`) is tied to the column it binds: by its place in an INSERT's
`VALUES` rows, or by the `column =` (or `<>`, `<`, `LIKE`, …) just before it. A parameter bound to a
secret-named column is redacted (one with a name secret only when its value looks generated, `code`, `key`,
when it does). A parameter tied to no column is redacted when the statement names a secret column that no
placeholder was tied to (`SET password = crypt(?, gen_salt('bf'))`), and every parameter of a row whose count
differs from the placeholders' when the statement names any. `None` and the booleans stay (a `NOT NULL
constraint failed` reads them). Named parameters print as a dict, which the keyed rules read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["PATTERN", "redact_parameters"]

# The statement runs to the `]` that the parameters follow (a SQL Server name holds brackets of its own), never
# over another `[SQL: ` (so each start reads its own text only: linear on hostile runs); the parameters follow
# on the next line, or after `\n` or spaces when a log writes the error on one line, and run to the line's end
# (their own brackets say where they stop).
_BETWEEN = r"(?:\r?\n|\\n|[ \t]{1,8})\[parameters: "
PATTERN = (rf"(?P<head>\[SQL: (?P<sql>(?:[^\[\]]|\[(?!SQL: )|\](?!{_BETWEEN})){{1,16384}}+)\]{_BETWEEN})"
           r"(?P<params>[^\r\n]++)")  # the whole line: what is not read goes whole

_PLACEHOLDER = re.compile(r"'(?:[^']|'')*+'|\"[^\"]*+\"|(?P<mark>\?|%s|[$:][0-9]{1,4}(?![0-9]))", re.ASCII)
_COMPARED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_$]*)[\"`\]]?[ \t\r\n]*(?:=|<>|!=|<=|>=|<|>|(?i:[ \t]+i?like))"
                       r"[ \t\r\n]*\Z", re.ASCII)
_INSERT = re.compile(r"(?i:insert[ \t\r\n]+(?:[a-z]+[ \t\r\n]+)?into)[ \t\r\n]+[^(]{1,256}?"
                     r"\((?P<columns>[^()]{1,4096})\)[ \t\r\n]*(?i:values)[ \t\r\n]*", re.ASCII)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_NO_VALUE = frozenset({"None", "True", "False"})  # shown: `NOT NULL constraint failed` reads them

Span = tuple[int, int]


def redact_parameters(match: re.Match[str], secret_key: Callable[[str], str | None],
                      looks_generated: Callable[[str], bool], hidden: str) -> str:
    """The match with the parameters of secret-named columns replaced by `hidden` (see the module doc); the
    rules' own `secret_key` and `looks_generated` say which names and values hold secrets."""
    sql, params = match.group("sql"), match.group("params")
    secret_words = {word for word in set(_WORD.findall(sql)) if secret_key(word) == "strong"}
    if not secret_words and not any(secret_key(word) for word in set(_WORD.findall(sql))):
        return match.group()
    columns = _bound_columns(sql)
    kinds = {position: secret_key(name) for position, name in columns.items() if name is not None}
    untied = bool(secret_words - {name for name in columns.values() if name in secret_words})
    rows = _rows(params)
    if rows is None:  # parameters this reader does not follow: all of them go
        return match.group("head") + hidden
    out, last = [match.group("head")], 0
    for row in rows:
        whole = len(row) != len(columns) and bool(secret_words)
        for position, (start, end) in enumerate(row):
            kind = kinds.get(position)
            if params[start:end] in _NO_VALUE:
                continue
            if whole or kind == "strong" or (untied and columns.get(position) is None) or \
                    (kind == "weak" and looks_generated(params[start:end].strip("'\""))):
                out += [params[last:start], hidden]
                last = end
    return "".join([*out, params[last:]])


def _bound_columns(sql: str) -> dict[int, str | None]:
    """Each placeholder's position among the parameters, and the column it binds (None: not known)."""
    inserted = _INSERT.search(sql)
    names = [part.strip().strip("\"`[]").rpartition(".")[2] for part in inserted.group("columns").split(",")] \
        if inserted else []
    rows = _ValuesRows(sql, inserted.end()) if inserted else None
    bound: dict[int, str | None] = {}
    for order, found in enumerate(m for m in _PLACEHOLDER.finditer(sql) if m.group("mark")):
        mark = found.group("mark")
        position = int(mark[1:]) - 1 if mark[0] in "$:" else order
        name = None
        if rows is not None and found.start() >= rows.start:
            item = rows.item_at(found.start())
            name = names[item] if item is not None and item < len(names) else None
        elif (compared := _COMPARED.search(sql, max(0, found.start() - 256), found.start())) is not None:
            name = compared.group("name")
        bound[position] = name
    return bound


class _ValuesRows:
    """Which item of its `VALUES` row a place is in, for places asked in increasing order (one pass)."""

    def __init__(self, sql: str, start: int) -> None:
        self.sql, self.start = sql, start
        self._at, self._depth, self._item = start, 0, 0

    def item_at(self, at: int) -> int | None:
        for char in self.sql[self._at : at]:
            if char == "(":
                self._depth += 1
                if self._depth == 1:
                    self._item = 0
            elif char == ")":
                self._depth -= 1
            elif char == "," and self._depth == 1:
                self._item += 1
        self._at = at
        return self._item if self._depth >= 1 else None


def _rows(params: str) -> list[list[Span]] | None:
    """The spans of each row's values: one tuple, or a list of them (executemany, perhaps with SQLAlchemy's
    `... displaying 10 of 500 total bound parameter sets ...` between); [] for named parameters (a dict, or
    a list of them); None when the text is none of those."""
    if params.startswith("{"):
        return []
    if params.startswith("("):
        row = _values(params, 0)
        return [row[0]] if row is not None else None
    if not params.startswith("["):
        return None
    rows, index = [], 1
    while index < len(params) and params[index] != "]":
        if params[index] == "(":
            row = _values(params, index)
            if row is None:
                return None
            rows.append(row[0])
            index = row[1]
        elif params[index] in "{'\"":
            end = _skip(params, index)
            if end is None:
                return None
            index = end
        else:
            index += 1  # separators, and the note of rows not displayed
    return rows


def _values(text: str, start: int) -> tuple[list[Span], int] | None:
    """The spans of the values of the tuple opening at `start`, and the index past it; None if it never closes."""
    spans, index, item = [], start + 1, start + 1
    while index < len(text):
        char = text[index]
        if char in ",)":
            if text[item:index].strip():
                spans.append(_trimmed(text, item, index))
            if char == ")":
                return spans, index + 1
            item = index = index + 1
        else:
            end = _skip(text, index)
            if end is None:
                return None
            index = end
    return None


def _skip(text: str, index: int) -> int | None:
    """The index past the value part at `index`: a quoted string, a bracketed group (strings and groups
    inside it skipped whole), or one character; None when it never ends."""
    closers: list[str] = []
    while index < len(text):
        char = text[index]
        if char in "'\"":
            end = text.find(char, index + 1)
            while end > 0 and _escaped(text, end):
                end = text.find(char, end + 1)
            if end < 0:
                return None
            index = end + 1
        elif char in _CLOSE:
            closers.append(_CLOSE[char])
            index += 1
        else:
            if closers and char == closers[-1]:
                closers.pop()
            index += 1
        if not closers:
            return index
    return None


def _escaped(text: str, at: int) -> bool:
    """Whether the character at `at` follows an odd run of backslashes."""
    run = at
    while run > 0 and text[run - 1] == "\\":
        run -= 1
    return (at - run) % 2 == 1


def _trimmed(text: str, start: int, end: int) -> Span:
    while text[start] in " \t":
        start += 1
    while text[end - 1] in " \t":
        end -= 1
    return start, end
