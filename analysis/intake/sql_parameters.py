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
# The statement's tokens: string literals and comments (skipped; one left open runs to the end, so a run of
# openers is read once), bind marks, brackets and commas.
_TOKENS = re.compile(rf"'(?:[^']|'')*+(?:'|\Z)|\"[^\"\r\n]*+(?:\"|$)|--[^\r\n]*+|/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)"
                     rf"|(?P<mark>(?:{_MARK})(?![A-Za-z0-9_]))|(?P<punct>[(),])", re.ASCII)
_NAME = r"\\?[\"`\[]?(?P<name>[A-Za-z_][A-Za-z0-9_$]*+)\\?[\"`\]]?"
_OPERATOR = r"[ \t\r\n]*+(?:=|<>|!=|<=|>=|<|>|(?i:[ \t\r\n]++(?:not[ \t\r\n]++)?i?like))[ \t\r\n]*+"
# `column <op> mark`, perhaps through one call (`= lower(?)`, `= crypt(?, …)`): one pass over the statement.
_COMPARED = re.compile(rf"(?<![A-Za-z0-9_$\"`\]\\]){_NAME}{_OPERATOR}(?:[A-Za-z_][A-Za-z0-9_.]{{0,63}}+\()?"
                       rf"(?P<mark>{_MARK})(?![A-Za-z0-9_])", re.ASCII)
_INSERT = re.compile(r"(?i:insert[ \t\r\n]+(?:[a-z]+[ \t\r\n]+){0,2}into)[ \t\r\n]+[^(]{1,256}?"
                     r"\((?P<columns>[^()]{1,4096})\)[ \t\r\n]*(?i:values)[ \t\r\n]*", re.ASCII)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_COMMENT = re.compile(r"--[^\r\n]*+|/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)")
_COLUMN = re.compile(r"(?:\"[^\"]*+(?:\"|\Z)|`[^`]*+(?:`|\Z)|\[[^\]]*+(?:\]|\Z)|[^,\"`\[])++")
# Personal data a column may hold that no pattern finds without its name (nine digits, a date).
_PERSONAL = re.compile(r"(?i:ssn|ssns|social_?security(?:_?number)?|tax_?id|taxpayer_?id|itin|date_?of_?birth|dob)",
                       re.ASCII)
_CUT = "characters truncated"  # SQLAlchemy's mark of a statement or value it shortened
_MAX_MARKS = 4096
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_NO_VALUE = frozenset({"None", "True", "False"})

_SELF = re.compile(PATTERN, re.ASCII)
Span = tuple[int, int]
Row = list[tuple[Span, str | None]]
"""A row's values: each one's span, and its key in a dict (None in a tuple)."""


Test = Callable[[int, str | None, str], bool]
"""Whether the value at a position (with its key, in a dict) is to go."""
Bound = dict[int | str, set[str | None]]
"""Each bind mark's key (its position, or its name) and every column it is tied to (None: one not known)."""


def redact_parameters(match: re.Match[str], secret_key: Callable[[str], str | None],
                      looks_generated: Callable[[str], bool], hidden: str) -> str:
    """The match with the parameters of secret-named columns replaced by `hidden` (see the module doc); the
    rules' own `secret_key` and `looks_generated` say which names and values hold secrets. The parameters
    stop where their brackets close: what follows on the line is read again (a JSON line may hold the error
    twice, or a chain of them)."""
    text, out, at = match.group(), [], 0
    while (found := _SELF.search(text, at)) is not None:
        done, stop = _one(found, secret_key, looks_generated, hidden)
        out += [text[at:found.start()], done]
        at = stop
    return "".join([*out, text[at:]])


def _one(match: re.Match[str], secret_key: Callable[[str], str | None], looks_generated: Callable[[str], bool],
         hidden: str) -> tuple[str, int]:
    """One statement's parameters (or parameters alone) redacted, and where in the text that reading ended."""
    if match.group("lone") is not None:
        done, end = _hide(match.group("lparams"), _every_value, hidden)
        return match.group("lone") + done, match.start("lparams") + end
    sql, params = match.group("sql"), match.group("params")
    bound = None if _CUT in sql else _bound_columns(sql)
    words = set(_WORD.findall(sql))
    if bound is None or "parameters truncated" in params:  # a shortened dict shifts its keys
        done, end = _hide(params, _every_value, hidden)
        return match.group("head") + done, match.start("params") + end
    if not any(secret_key(word) or _PERSONAL.fullmatch(word) for word in words):
        _, end = _hide(params, _every_value, hidden)
        return match.string[match.start():match.start("params") + end], match.start("params") + end
    positional = sum(1 for mark in bound if isinstance(mark, int))

    def secret(position: int, key: str | None, value: str) -> bool:
        for name in bound.get(key if key is not None else position, {None}):
            kind = secret_key(name) or ("strong" if _PERSONAL.fullmatch(name) else None) if name else "unknown"
            plain = value.removeprefix("b").strip("'\"")
            if kind in ("strong", "unknown") or (kind == "weak" and (looks_generated(plain) or _CUT in plain)):
                return True  # a secret column, or one not known in a statement that names a secret
        return False

    def test(row: Row) -> Test:
        return _always if row and row[0][1] is None and len(row) != positional else secret

    done, end = _hide(params, test, hidden)
    return match.group("head") + done, match.start("params") + end


def _always(_position: int, _key: str | None, _value: str) -> bool:
    return True


def _every_value(_row: Row) -> Test:
    return _always


def _hide(params: str, test_of: Callable[[Row], Test], hidden: str) -> tuple[str, int]:
    """The parameters with each value its row's test names replaced by `hidden`, and where they ended in
    `params`; all of the line when they are no tuple, list, dict or list of them."""
    read = _rows(params)
    if read is None:
        return hidden, len(params)
    rows, stop = read
    out, last = [], 0
    for row in rows:
        test = test_of(row)
        for position, ((start, end), key) in enumerate(row):
            value = params[start:end]
            if value not in _NO_VALUE and test(position, key, value):
                out += [params[last:start], hidden]
                last = end
    return "".join([*out, params[last:stop]]), stop


def _bound_columns(sql: str) -> Bound | None:
    """Each bind mark and the columns it is tied to; None when there are more marks than this reader takes."""
    compared = {found.start("mark"): found.group("name") for found in _COMPARED.finditer(sql)}
    inserted = _INSERT.search(sql)
    names = _columns(inserted.group("columns")) if inserted else []
    rows_from = inserted.end() if inserted else len(sql) + 1
    bound: Bound = {}
    order = depth = item = 0
    rows_open, closed, dirty, previous = inserted is not None, False, False, 0
    for count, token in enumerate(_TOKENS.finditer(sql)):
        if count > 4 * _MAX_MARKS or len(bound) > _MAX_MARKS:
            return None
        punct, mark = token.group("punct"), token.group("mark")
        in_rows = rows_open and token.start() >= rows_from
        if in_rows and depth == 0 and closed:
            # After a row: only `, (` goes on to the next one (`ON CONFLICT …`, `RETURNING …` end them).
            dirty = dirty or punct not in (",", "(") or bool(sql[previous:token.start()].strip(", \t\r\n"))
            if dirty:
                rows_open = in_rows = False
        previous = token.end()
        if not in_rows:
            if mark is not None:
                bound.setdefault(_position(mark, order), set()).add(compared.get(token.start()))
                order += mark in ("?", "%s")
            continue
        if punct == "(":
            depth += 1
            item = 0 if depth == 1 else item
        elif punct == ")":
            depth = max(0, depth - 1)
            closed, dirty = closed or depth == 0, False if depth == 0 else dirty
        elif punct == "," and depth == 1:
            item += 1
        elif mark is not None:
            name = names[item] if depth >= 1 and item < len(names) else None
            bound.setdefault(_position(mark, order), set()).add(name)
            order += mark in ("?", "%s")
    return bound


def _columns(listed: str) -> list[str]:
    """An INSERT's column names, comments dropped and quoted names kept whole (`"a,b"`)."""
    listed = _COMMENT.sub(" ", listed)
    return [part.strip(" \t\r\n\"`[]\\").rpartition(".")[2] for part in _COLUMN.findall(listed)]


def _position(mark: str, order: int) -> int | str:
    """A mark's key among the parameters: its name (`:name`, `%(name)s`), its number (`$2`, `:2`, `?2`), or
    its place among the positional marks."""
    if mark.startswith("%("):
        return mark[2:-2]
    if mark[1:].isdigit():
        return int(mark[1:]) - 1
    return mark[1:] if mark.startswith(":") else order


def _rows(params: str) -> tuple[list[Row], int] | None:
    """Each row's values, and where the parameters end: one tuple, list or dict, or a list of them
    (executemany, perhaps with SQLAlchemy's `... displaying 10 of 500 total bound parameter sets ...` between);
    None when the text is none of those."""
    if not params.startswith(("(", "{", "[")):
        return None
    if params.startswith("[") and not params[1:].lstrip(" ").startswith(("(", "{", "[")):
        read = _values(params, 0)  # a list of values: one row (a dialect that binds lists)
        return ([read[0]], read[1]) if read is not None else None
    if not params.startswith("["):
        read = _values(params, 0)
        return ([read[0]], read[1]) if read is not None else None
    rows, index = [], 1
    while index < len(params) and params[index] != "]":
        if params[index] in "({[":
            read = _values(params, index)
            if read is None:
                return None
            rows.append(read[0])
            index = read[1]
        elif params[index] in "'\"":
            end = _skip(params, index)
            if end is None:
                return None
            index = end
        else:
            index += 1  # separators, and the note of rows not displayed
    return (rows, index + 1) if index < len(params) else None


def _values(text: str, start: int) -> tuple[Row, int] | None:
    """The values of the tuple, list or dict opening at `start` (a dict's with their keys), and the index
    past it; None if it never closes, or when a dict's entry holds a second key."""
    close = _CLOSE[text[start]]
    row: Row = []
    index = item = start + 1
    key: str | None = None
    while index < len(text):
        char = text[index]
        if char in (",", close):
            if text[item:index].strip():
                row.append((_trimmed(text, item, index), key))
            if char == close:
                return row, index + 1
            item, key = index + 1, None
            index += 1
        elif char == ":" and close == "}":
            if key is not None:
                return None  # a value holding a key: the dict was shortened
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
