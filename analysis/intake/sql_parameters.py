"""Bound parameters printed apart from their statement: the values of secret-named columns.

SQLAlchemy's errors (`sqlalchemy.exc.StatementError` and its subclasses) end with the statement and its
parameters, positional ones without names, so no keyed rule sees a secret among them:

    [SQL: INSERT INTO users (email, password) VALUES (?, ?)]
    [parameters: ('bob@example.com', 'hunter2')]

Each bind mark (`?`, `?2`, `%s`, `$1`, `:1`, `:name`, `%(name)s`) is tied to the column it binds: by its
place in an INSERT's `VALUES` rows, or by the `column =` (`<>`, `<`, `LIKE`, …, perhaps through one call:
`= lower(?)`) just before it. Redaction fails closed:

- a value tied to a secret-named column goes (one secret only when generated, `code`, `key`: when it looks so);
- when the statement names any secret-like word, so does every value not tied to a column (`? = password`,
  `IN (?, ?)`, `crypt(?, …)`), and every value of a row whose count is not the marks';
- a statement this reader cannot take whole (cut by SQLAlchemy, `… characters truncated …`; over 16 kB; more
  than 4,096 marks) or parameters without a statement before them (a log that broke the pair apart) lose
  every value;
- `None` and the booleans stay: `NOT NULL constraint failed` reads them.

A dict of named parameters (psycopg2's and others' style) is read the same way, by key; its keys that name
secrets are the keyed rules' as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["PATTERN", "redact_parameters"]

# Between the statement and its parameters: a line break (also escaped, `#012` as rsyslog writes it) and the
# prefix a log repeats on each line (`  | ` of an exception group, a container runtime's time and stream), or
# spaces when a log writes the error on one line. The statement runs to the `]` the parameters follow (a SQL
# Server name holds brackets of its own), never over another `[SQL: ` (so each start reads its own text only);
# the parameters run to the line's end (their own brackets say where they stop). Parameters that no statement
# precedes match alone (`lone`).
_GAP = r"(?:(?:\r?\n|\r|\\r\\n|\\n|\\r|#012)[^\[\]\r\n]{0,80}?|[ \t]{1,8})\[parameters: "
PATTERN = (rf"(?P<head>\[SQL: (?P<sql>(?:[^\[\]]|\[(?!SQL: )|\](?!{_GAP})){{1,16384}}+)\]{_GAP})"
           r"(?P<params>[^\r\n]++)|(?P<lone>\[parameters: )(?P<lparams>[^\r\n]++)")

_MARK = (r"\?[0-9]{0,4}|%s|\$[0-9]{1,4}|(?<!:):[0-9]{1,4}|(?<!:):[A-Za-z_][A-Za-z0-9_]{0,63}"
         r"|%\([A-Za-z_][A-Za-z0-9_]{0,63}\)s")
# The statement's tokens: string literals and comments (skipped), bind marks, brackets and commas.
_TOKENS = re.compile(rf"'(?:[^']|'')*+'|\"[^\"\r\n]*+\"|--[^\r\n]*+|/\*(?:[^*]|\*(?!/))*+\*/"
                     rf"|(?P<mark>(?:{_MARK})(?![A-Za-z0-9_]))|(?P<punct>[(),])", re.ASCII)
_NAME = r"\\?[\"`\[]?(?P<name>[A-Za-z_][A-Za-z0-9_$]*+)\\?[\"`\]]?"
_OPERATOR = r"[ \t\r\n]*+(?:=|<>|!=|<=|>=|<|>|(?i:[ \t\r\n]++(?:not[ \t\r\n]++)?i?like))[ \t\r\n]*+"
# `column <op> mark`, perhaps through one call (`= lower(?)`, `= crypt(?, …)`): one pass over the statement.
_COMPARED = re.compile(rf"(?<![A-Za-z0-9_$\"`\]\\]){_NAME}{_OPERATOR}(?:[A-Za-z_][A-Za-z0-9_.]{{0,63}}+\()?"
                       rf"(?P<mark>{_MARK})(?![A-Za-z0-9_])", re.ASCII)
_INSERT = re.compile(r"(?i:insert[ \t\r\n]+(?:[a-z]+[ \t\r\n]+){0,2}into)[ \t\r\n]+[^(]{1,256}?"
                     r"\((?P<columns>[^()]{1,4096})\)[ \t\r\n]*(?i:values)[ \t\r\n]*", re.ASCII)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_CUT = "characters truncated"  # SQLAlchemy's mark of a statement or value it shortened
_MAX_MARKS = 4096
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_NO_VALUE = frozenset({"None", "True", "False"})

Span = tuple[int, int]
Row = list[tuple[Span, str | None]]
"""A row's values: each one's span, and its key in a dict (None in a tuple)."""


Test = Callable[[int, str | None, str], bool]
"""Whether the value at a position (with its key, in a dict) is to go."""


def redact_parameters(match: re.Match[str], secret_key: Callable[[str], str | None],
                      looks_generated: Callable[[str], bool], hidden: str) -> str:
    """The match with the parameters of secret-named columns replaced by `hidden` (see the module doc); the
    rules' own `secret_key` and `looks_generated` say which names and values hold secrets."""
    if match.group("lone") is not None:
        return match.group("lone") + _hide(match.group("lparams"), _every_value, hidden)
    sql, params = match.group("sql"), match.group("params")
    bound = None if _CUT in sql else _bound_columns(sql)
    if bound is None:
        return match.group("head") + _hide(params, _every_value, hidden)
    if not any(secret_key(word) for word in set(_WORD.findall(sql))):
        return match.group()
    positional = sum(1 for mark in bound if isinstance(mark, int))

    def secret(position: int, key: str | None, value: str) -> bool:
        name = bound.get(key if key is not None else position)
        if name is None:
            return True  # tied to no column, in a statement that names a secret
        kind = secret_key(name)
        return kind == "strong" or (kind == "weak" and looks_generated(value.strip("'\"")))

    def test(row: Row) -> Test:
        return _always if row and row[0][1] is None and len(row) != positional else secret

    return match.group("head") + _hide(params, test, hidden)


def _always(_position: int, _key: str | None, _value: str) -> bool:
    return True


def _every_value(_row: Row) -> Test:
    return _always


def _hide(params: str, test_of: Callable[[Row], Test], hidden: str) -> str:
    """`params` with each value its row's test names replaced by `hidden`; all of it when it is no tuple,
    dict or list of them."""
    rows = _rows(params)
    if rows is None:
        return hidden
    out, last = [], 0
    for row in rows:
        test = test_of(row)
        for position, ((start, end), key) in enumerate(row):
            value = params[start:end]
            if value not in _NO_VALUE and test(position, key, value):
                out += [params[last:start], hidden]
                last = end
    return "".join([*out, params[last:]])


def _bound_columns(sql: str) -> dict[int | str, str | None] | None:
    """Each bind mark (its position among positional parameters, or its name) and the column it binds
    (None: not known); None when there are more marks than this reader takes."""
    compared = {found.start("mark"): found.group("name") for found in _COMPARED.finditer(sql)}
    inserted = _INSERT.search(sql)
    names = [part.strip(" \t\r\n\"`[]\\").rpartition(".")[2] for part in inserted.group("columns").split(",")] \
        if inserted else []
    rows_from = inserted.end() if inserted else len(sql) + 1
    bound: dict[int | str, str | None] = {}
    order = depth = item = 0
    rows_open, last_close = inserted is not None, -1
    for count, token in enumerate(_TOKENS.finditer(sql)):
        if count > 4 * _MAX_MARKS or len(bound) > _MAX_MARKS:
            return None
        punct, mark = token.group("punct"), token.group("mark")
        in_rows = rows_open and token.start() >= rows_from
        if in_rows and depth == 0 and last_close >= 0 and (punct is None or punct == ")" or
                                                            sql[last_close:token.start()].strip(", \t\r\n")):
            rows_open = in_rows = False  # the rows are over (`ON CONFLICT …`, `RETURNING …`)
        if not in_rows:
            if mark is not None:
                bound[_position(mark, order)] = compared.get(token.start())
                order += mark in ("?", "%s")
            continue
        if punct == "(":
            depth += 1
            item = 0 if depth == 1 else item
        elif punct == ")":
            depth = max(0, depth - 1)
            last_close = token.end() if depth == 0 else last_close
        elif punct == "," and depth == 1:
            item += 1
        elif mark is not None:
            bound[_position(mark, order)] = names[item] if depth >= 1 and item < len(names) else None
            order += mark in ("?", "%s")
    return bound


def _position(mark: str, order: int) -> int | str:
    """A mark's key among the parameters: its name (`:name`, `%(name)s`), its number (`$2`, `:2`, `?2`), or
    its place among the positional marks."""
    if mark.startswith("%("):
        return mark[2:-2]
    if mark[1:].isdigit():
        return int(mark[1:]) - 1
    return mark[1:] if mark.startswith(":") else order


def _rows(params: str) -> list[Row] | None:
    """Each row's values: one tuple or dict, or a list of them (executemany, perhaps with SQLAlchemy's
    `... displaying 10 of 500 total bound parameter sets ...` between); None when the text is none of those."""
    if params.startswith(("(", "{")):
        row = _values(params, 0)
        return [row[0]] if row is not None else None
    if not params.startswith("["):
        return None
    rows, index = [], 1
    while index < len(params) and params[index] != "]":
        if params[index] in "({":
            row = _values(params, index)
            if row is None:
                return None
            rows.append(row[0])
            index = row[1]
        elif params[index] in "'\"[":
            end = _skip(params, index)
            if end is None:
                return None
            index = end
        else:
            index += 1  # separators, and the note of rows not displayed
    return rows


def _values(text: str, start: int) -> tuple[Row, int] | None:
    """The values of the tuple or dict opening at `start` (a dict's with their keys), and the index past it;
    None if it never closes."""
    close = _CLOSE[text[start]]
    row: Row = []
    index = item = start + 1
    key: str | None = None
    while index < len(text):
        char = text[index]
        if char in ",)}" and char in (",", close):
            if text[item:index].strip():
                row.append((_trimmed(text, item, index), key))
            if char == close:
                return row, index + 1
            item, key = index + 1, None
            index += 1
        elif char == ":" and close == "}" and key is None:
            key = text[item:index].strip().strip("'\"")
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
