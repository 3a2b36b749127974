"""Bound parameters printed apart from their statement: the values of secret-named columns.

SQLAlchemy's errors (`sqlalchemy.exc.StatementError` and its subclasses) end with the statement and its
parameters, positional ones without names, so no keyed rule sees a secret among them:

    [SQL: INSERT INTO users (email, password) VALUES (?, ?)]
    [parameters: ('bob@example.com', 'hunter2')]

Each bind mark (`?`, `?2`, `%s`, `$1`, `:1`, `:name`, `%(name)s`) is tied to the column it binds: by its
place in an INSERT's `VALUES` rows, or by the `column =` (`<>`, `<`, `LIKE`, …, after a cast or a `COLLATE`,
perhaps through one call: `= lower(?)`) just before it. Redaction fails closed:

- a value tied to a secret-named column goes (one secret only when generated, `code`, `key`: when it looks so),
  and so does one tied to a column of personal data (`ssn`, `customer_ssn`, `birth_date`);
- when the statement or its values name any secret-like word (`WHERE name = 'smtp_password'`), so does every
  value not tied to a column (`? = password`, `IN (?, ?)`, `crypt(?, …)`) or tied to a generic one (`value`),
  and every value of a row whose count is not the marks';
- a statement this reader cannot take whole (cut by SQLAlchemy, `… characters truncated …`; over 16 kB; more
  than 4,096 marks), a dict it shortened, and parameters without a statement before them (a log that broke
  the pair apart) lose every value;
- an INSERT without a column list (`INSERT INTO users VALUES (?, ?)`) ties no value to a column: every
  value goes;
- `None` and the booleans stay: `NOT NULL constraint failed` reads them.

Python's logging prints a call's arguments apart from its format string in the same way when formatting
fails (`--- Logging error ---`, then `Message: 'login %s'` and `Arguments: ('bob', 'hunter2')`): every value
of such `Arguments:` goes, as parameters alone do, and so does whatever follows the tuple on its line (a repr
holding a `)` of its own closes it early). It is read where that line starts: a line of its own, an event of
its own (as a log shipper often sends it), a JSON value's start (`"log":"Arguments: …`; not any string's: a
traceback's source line `logger.info(f"Arguments: {args}")` stays), after a line break written out (`\n`,
`#012`), a container runtime's `F ` tag, syslog's `prog[pid]: ` or docker-compose's `web-1  | `; and only a
tuple or a mapping, which is what logging keeps
(`Arguments: ['train.py', '--lr', …]` in a script's own log stays).

Other printers of parameters apart from their statement lose every value the same way: SQLAlchemy's echo
(`[generated in 0.0001s] ('bob', 'x')`, the line after the statement's), Django's `…; args=(…)`, knex's
`bindings: [ … ]`, and PostgreSQL's `parameters: $1 = 'x', …` (`redact_pg_parameters`). A statement with its
values written in (`INSERT INTO users (email, password) VALUES ('a@b.c', 'x')`, as a statement log prints
it) loses the values of its secret and personal columns (`redact_literal_values`); without a column list
(`pg_dump --inserts`) every value but numbers, NULL and the booleans.

A dict of named parameters (psycopg2's and others' style) is read the same way, by key. Parameters are read
by index, jumping from one bracket, quote or separator to the next, and stop where their brackets close: the
rest of the line is read again (a JSON line may hold the error twice).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["LITERAL_INSERT", "PATTERN", "PG_PARAMETERS", "redact_literal_values", "redact_parameters",
           "redact_pg_parameters"]

# Between the statement and its parameters: a line break (also escaped, `#012` as rsyslog writes it) and the
# prefix a log repeats on each line (`  | ` of an exception group, a container runtime's time and stream), or
# spaces when a log writes the error on one line. The statement runs to the `]` the parameters follow (a SQL
# Server name holds brackets of its own), never over another `[SQL: ` (so each start reads its own text only).
# Parameters that no statement precedes match alone (`lone`), and so do a Python logging error's `arguments`
# (see the module doc for where). The rule's match runs to the line's end; the heads within it are found again
# by `_HEAD`, which stops at them.
_GAP = r"(?:(?:\r?\n|\r|\\r\\n|\\n|\\r|#012)[^\[\]\r\n]{0,80}?|[ \t]{1,8})\[parameters: "
_HEADS = (rf"(?P<head>\[SQL: (?P<sql>(?:[^\[\]]|\[(?!SQL: )|\](?!{_GAP})){{1,16384}}+)\]{_GAP})"
          # SQLAlchemy's echo (the `sqlalchemy.engine` logger), a line after its statement's; Django's
          # `django.db.backends` debug line (`…; args=(…)`); knex's debug object (`bindings: [ … ]`)
          r"|(?P<lone>\[parameters: |\[(?:generated in|cached since|no key) [0-9.]{1,16}s(?: ago)?\] "
          r"|\[(?:raw sql|insertmanyvalues [^\]\r\n]{1,64})\] |; args=(?=[(\[])|(?<![A-Za-z_])bindings: (?=\[))"
          r"|(?P<arguments>(?:(?<![^\n\r])|(?<=\\[nr])|(?<=#012)|(?<= [FP] )|(?<=\":\")|(?<=\": \")|(?<=\]: )"
          r"|(?<=\| ))Arguments: (?=[({]))")
PATTERN = rf"(?:{_HEADS})[^\r\n]++"
_HEAD = re.compile(_HEADS, re.ASCII)

_MARK = (r"\?[0-9]{0,4}|%s|\$[0-9]{1,4}|(?<!:):[0-9]{1,4}|(?<!:):[A-Za-z_][A-Za-z0-9_]{0,63}"
         r"|%\([A-Za-z_][A-Za-z0-9_]{0,63}\)s")
# The statement's tokens: string literals and comments (skipped; one left open runs to the end, so a run of
# openers is read once), bind marks, brackets and commas.
_TOKENS = re.compile(rf"'(?:[^']|'')*+(?:'|\Z)|\"[^\"\r\n]*+(?:\"|$)|--[^\r\n]*+|/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)"
                     rf"|(?P<mark>(?:{_MARK})(?![A-Za-z0-9_]))|(?P<punct>[(),])", re.ASCII)
_NAME = r"\\?[\"`\[]?(?P<name>[A-Za-z_][A-Za-z0-9_$]*+)\\?[\"`\]]?"
_CAST = r"(?:::[A-Za-z_][A-Za-z0-9_]{0,63}|[ \t\r\n]++(?i:collate)[ \t\r\n]++[\"A-Za-z_][\"A-Za-z0-9_.-]{0,63})?"
_OPERATOR = r"[ \t\r\n]*+(?:=|<>|!=|<=|>=|<|>|(?i:[ \t\r\n]++(?:not[ \t\r\n]++)?i?like))[ \t\r\n]*+"
# `column <op> mark`, perhaps through one call (`= lower(?)`, `= crypt(?, …)`): one pass over the statement.
_COMPARED = re.compile(rf"(?<![A-Za-z0-9_$\"`\]\\:]){_NAME}{_CAST}{_OPERATOR}(?:[A-Za-z_][A-Za-z0-9_.]{{0,63}}+\()?"
                       rf"(?P<mark>{_MARK})(?![A-Za-z0-9_])", re.ASCII)
# A statement that inserts (`INSERT`, `UPSERT`, `REPLACE INTO`): unless `_INSERT` reads its column list, no
# value is tied to a column (`INSERT INTO t VALUES (?, ?)`, `INSERT INTO t SELECT ?, ?`), so every value goes.
_INSERTS = re.compile(r"(?<![A-Za-z0-9_])(?:(?i:insert|upsert)|(?<![Oo][Rr] )(?i:replace)(?=[ \t\r\n]++(?i:into)\b))"
                      r"(?![A-Za-z0-9_])", re.ASCII)  # (SQLite's `INSERT OR REPLACE` is one)
# Where a logging error's `Arguments:` line ends (a break, also written out), and what may close the JSON
# string or object around it.
_LINE_END = re.compile(r"[\r\n]|\\[rn]|#012")
_AFTER_A_LINE = " \t\"'}],"
_INSERT = re.compile(r"(?i:insert[ \t\r\n]+(?:[a-z]+[ \t\r\n]+){0,2}into)[ \t\r\n]+[^(]{1,256}?"
                     r"\((?P<columns>[^()]{1,4096})\)[ \t\r\n]*(?i:values)[ \t\r\n]*", re.ASCII)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_ESCAPED_SPACE = re.compile(r"\\[nrt]|#012")  # a line break as a JSON string or rsyslog writes it
_COMMENT = re.compile(r"--[^\r\n]*+|/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)")
_COLUMN = re.compile(r"(?:\"[^\"]*+(?:\"|\Z)|`[^`]*+(?:`|\Z)|\[[^\]]*+(?:\]|\Z)|[^,\"`\[])++")
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Words of a column name that say personal data no pattern finds without its name (nine digits, a date).
_PERSONAL = frozenset({"ssn", "ssns", "itin", "itins", "dob", "birthdate", "birthday", "socialsecurity", "taxid",
                       "taxids", "taxpayerid", "dateofbirth", "birth date", "social security", "tax id",
                       "taxpayer id", "date of birth"})
# Columns that hold whatever their row names (`UPDATE settings SET value = ? WHERE name = 'smtp_password'`).
_GENERIC = frozenset({"value", "val", "data", "setting_value", "config_value", "content", "payload"})
_CUT = "characters truncated"  # SQLAlchemy's mark of a statement or value it shortened
_MAX_MARKS = 4096
_MAX_PARAMETERS = 256 * 1024  # characters of parameters read; past that, every value goes
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_NEXT = re.compile(r"[\"'()\[\]{},:]")  # what a value's reading stops at
_NO_VALUE = frozenset({"None", "True", "False"})

Span = tuple[int, int]
Row = list[tuple[Span, str | None]]
"""A row's values: each one's span in the text, and its key in a dict (None in a tuple or list)."""
Test = Callable[[int, str | None, str], bool]
"""Whether the value at a position (with its key, in a dict) is to go."""
Bound = dict[int | str, set[str | None]]
"""Each bind mark's key (its position, or its name) and every column it is tied to (None: one not known)."""


def redact_parameters(match: re.Match[str], secret_key: Callable[[str], str | None],
                      looks_generated: Callable[[str], bool], hidden: str) -> str:
    """The match with the parameters of secret-named columns replaced by `hidden` (see the module doc); the
    rules' own `secret_key` and `looks_generated` say which names and values hold secrets."""
    text, out, at = match.group(), [], 0
    while (found := _HEAD.search(text, at)) is not None:
        done, stop = _one(text, found, secret_key, looks_generated, hidden)
        out += [text[at:found.start()], done]
        at = stop
    return "".join([*out, text[at:]])


def _one(text: str, head: re.Match[str], secret_key: Callable[[str], str | None],
         looks_generated: Callable[[str], bool], hidden: str) -> tuple[str, int]:
    """One statement's parameters (or parameters alone) redacted from its head on, and where that reading
    ended in `text`."""
    start = head.end()
    if head.group("lone") is not None and text[start:start + 1] not in ("(", "[", "{"):
        return head.group(), start  # another tool's `[parameters: --queue x]`
    read = _rows(text, start)
    if read is None:  # not a tuple, list or dict, or one that does not close: the rest of the line goes
        end = text.find("\n", start)
        return head.group() + hidden, end if end >= 0 else len(text)
    rows, stop = read
    if head.group("arguments") is not None:  # the line holds the repr alone: what follows it is part of it
        found = _LINE_END.search(text, stop)
        end = found.start() if found is not None else len(text)
        rest = hidden if text[stop:end].strip(_AFTER_A_LINE) else text[stop:end]
        return _hide(text, start, stop, head.group(), rows, _every_value, hidden) + rest, end
    if head.group("lone") is not None:
        return _hide(text, start, stop, head.group(), rows, _every_value, hidden), stop
    sql = _ESCAPED_SPACE.sub("  ", head.group("sql"))
    unlisted = len(_INSERTS.findall(sql)) > len(_INSERT.findall(sql))  # one INSERT of several is enough
    bound = None if _CUT in sql or unlisted else _bound_columns(sql)
    if bound is None or "parameters truncated" in text[start:stop]:  # a shortened dict shifts its keys
        return _hide(text, start, stop, head.group(), rows, _every_value, hidden), stop
    words = set(_WORD.findall(sql)) | set(_WORD.findall(text, start, stop))
    if not any(secret_key(word) or _personal(word) for word in words):
        return text[head.start():stop], stop
    positional = sum(1 for mark in bound if isinstance(mark, int))

    def secret(position: int, key: str | None, value: str) -> bool:
        for name in bound.get(key if key is not None else position, {None}):
            if name is None or name.lower() in _GENERIC or _personal(name):
                return True  # not known, or a column holding anything, in a statement that names a secret
            kind = secret_key(name)
            if kind == "strong" or (kind == "weak" and _generated(value, looks_generated)):
                return True
        return False

    def test(row: Row) -> Test:
        return _always if row and row[0][1] is None and len(row) != positional else secret

    return _hide(text, start, stop, head.group(), rows, test, hidden), stop


# PostgreSQL's log of a statement's parameters (`log_statement`, the slow-query log, `DETAIL:  parameters:
# $1 = 'x', $2 = NULL`; `CONTEXT:  unnamed portal with parameters: …`): every value but NULL.
PG_PARAMETERS = r"(?<![A-Za-z])parameters: (?=\$[0-9])[^\r\n]{1,131072}"
_PG_VALUE = re.compile(r"(\$[0-9]{1,4} = )'(?:[^']|'')*+(?:'|\Z)", re.ASCII)


def redact_pg_parameters(match: re.Match[str], hidden: str) -> str:
    """Each quoted value of PostgreSQL's `parameters: $1 = '…', …` replaced by `hidden`."""
    return _PG_VALUE.sub(lambda value: value.group(1) + hidden, match.group())


# An INSERT with its values written in (a statement log's, MariaDB's general log, `log_statement`): its rows
# are read from their first `(` on, to the end of the line.
LITERAL_INSERT = (rf"(?:{_INSERT.pattern}|(?i:insert[ \t\r\n]+(?:[a-z]+[ \t\r\n]+){{0,2}}into)[ \t\r\n]+[^(\s]{{1,256}}"
                  r"[ \t\r\n]+(?i:values)[ \t\r\n]*)(?=\()[^\r\n]{1,131072}")  # a column list, or none (pg_dump's)
_SQL_KEPT = frozenset({"NULL", "DEFAULT", "TRUE", "FALSE"})
_NUMBER = re.compile(r"-?[0-9]{1,18}(?:\.[0-9]{1,18})?\Z")  # an unlisted row's ids and counts: a card goes by its rule
_MARK_ONLY = re.compile(rf"(?:{_MARK})\Z", re.ASCII)  # a bind mark, which the parameters' reading ties


def redact_literal_values(match: re.Match[str], secret_key: Callable[[str], str | None],
                          looks_generated: Callable[[str], bool], hidden: str) -> str:
    """The match with each literal value of a secret-named or personal column replaced by `hidden`
    (`INSERT INTO users (email, password) VALUES ('a@b.c', 'x'), (…)`); a row that cannot be read whole and
    the rest of the line after it go."""
    text, listed = match.group(), match.group("columns")
    names = _columns(listed) if listed is not None else []  # without a list, no value is tied to a column
    after = match.end("columns") - match.start() + 1 if listed is not None else text.lower().index("values")
    index = text.index("(", after)  # the first row's: VALUES is all between
    out: list[str] = []
    last = 0
    while True:
        read = _values(text, index, len(text))
        if read is None:
            return "".join([*out, text[last:index], hidden])
        row, index = read
        for position, ((begin, end), _) in enumerate(row):
            name = names[position] if position < len(names) else None
            value = text[begin:end]
            kind = secret_key(name) if name else None
            kept = value.upper() in _SQL_KEPT or _MARK_ONLY.match(value) or (listed is None and _NUMBER.match(value))
            if not kept and (name is None or kind == "strong" or _personal(name)
                             or (kind == "weak" and _generated(value, looks_generated))):
                out += [text[last:begin], hidden]
                last = end
        index = _past_spaces(text, index)  # by index: slicing the rest per row made 100k rows quadratic
        if text[index:index + 1] != ",":
            return "".join([*out, text[last:]])
        index = _past_spaces(text, index + 1)
        if text[index:index + 1] != "(":
            return "".join([*out, text[last:]])


def _past_spaces(text: str, index: int) -> int:
    while text[index:index + 1] in (" ", "\t"):
        index += 1
    return index


def _personal(name: str) -> bool:
    """Whether a column's name says it holds personal data: `ssn`, `customer_ssn`, `ssnLast4`, `birth_date`."""
    low = name.lower()
    if not any(part in low for part in ("ssn", "itin", "dob", "birth", "social", "tax")):
        return False
    words = [word.lower() for part in _HUMP.split(name) for word in re.split(r"[^A-Za-z0-9]+", part) if word]
    return any(word in _PERSONAL or " ".join(words[i:i + n]) in _PERSONAL or "".join(words[i:i + n]) in _PERSONAL
               for i, word in enumerate(words) for n in (2, 3))


def _generated(value: str, looks_generated: Callable[[str], bool]) -> bool:
    """Whether a weak column's value reads as generated: a token, bytes of a digest's length or more, or a
    value SQLAlchemy cut (its ends are what is left of one)."""
    if value.startswith(("b'", 'b"', "bytearray(")):
        return len(value) >= 19
    return _CUT in value or looks_generated(value.strip("'\""))


def _always(_position: int, _key: str | None, _value: str) -> bool:
    return True


def _every_value(_row: Row) -> Test:
    return _always


def _hide(text: str, start: int, stop: int, head: str, rows: list[Row], test_of: Callable[[Row], Test],
          hidden: str) -> str:
    """`head` and the parameters from `start` to `stop`, each value its row's test names replaced by `hidden`."""
    out, last = [head], start
    for row in rows:
        test = test_of(row)
        for position, ((begin, end), key) in enumerate(row):
            value = text[begin:end]
            if value not in _NO_VALUE and test(position, key, value):
                out += [text[last:begin], hidden]
                last = end
    return "".join([*out, text[last:stop]])


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


def _columns(listed: str) -> list[str | None]:
    """An INSERT's column names, comments dropped and quoted names kept whole (`"a,b"`); None for a part that
    names no column."""
    listed = _COMMENT.sub(" ", listed)
    return [words[-1] if (words := _WORD.findall(part)) else None for part in _COLUMN.findall(listed)]


def _position(mark: str, order: int) -> int | str:
    """A mark's key among the parameters: its name (`:name`, `%(name)s`), its number (`$2`, `:2`, `?2`), or
    its place among the positional marks."""
    if mark.startswith("%("):
        return mark[2:-2]
    if mark[1:].isdigit():
        return int(mark[1:]) - 1
    return mark[1:] if mark.startswith(":") else order


def _rows(text: str, start: int) -> tuple[list[Row], int] | None:
    """Each row's values in the parameters at `start`, and where they end: one tuple, list or dict, or a list
    of them (executemany, perhaps with SQLAlchemy's `... displaying 10 of 500 total bound parameter sets ...`
    between); None when they are none of those, or longer than this reader takes."""
    if text[start:start + 1] not in ("(", "[", "{"):
        return None
    limit = min(len(text), start + _MAX_PARAMETERS)
    if text[start] != "[" or not text[start + 1:start + 64].lstrip(" ").startswith(("(", "{", "[")):
        read = _values(text, start, limit)  # one row (a list of values, as dialects that bind lists print it)
        return ([read[0]], read[1]) if read is not None else None
    rows, index = [], start + 1
    while index < limit and text[index] != "]":
        if text[index] in "({[":
            read = _values(text, index, limit)
            if read is None:
                return None
            rows.append(read[0])
            index = read[1]
        elif text[index] in "'\"":
            end = _skip(text, index, limit)
            if end is None:
                return None
            index = end
        else:
            found = _NEXT.search(text, index + 1, limit)  # separators, and the note of rows not displayed
            index = found.start() if found is not None else limit
    return (rows, index + 1) if index < limit else None


def _values(text: str, start: int, limit: int) -> tuple[Row, int] | None:
    """The values of the tuple, list or dict opening at `start` (a dict's with their keys), and the index
    past it; None if it does not close before `limit`, or when a dict's entry holds a second key."""
    close = _CLOSE[text[start]]
    row: Row = []
    item = start + 1
    key: str | None = None
    found = _NEXT.search(text, item, limit)
    while found is not None:
        index, char = found.start(), found.group()
        if char in (",", close):
            if text[item:index].strip():
                row.append((_trimmed(text, item, index), key))
            if char == close:
                return row, index + 1
            item, key, resume = index + 1, None, index + 1
        elif char == ":" and close == "}":
            if key is not None:
                return None  # a value holding a key: the dict was shortened
            key = text[item:index].strip().strip("'\"")
            item = resume = index + 1
        elif char in "'\"([{":
            end = _skip(text, index, limit)
            if end is None:
                return None
            resume = end
        else:
            resume = index + 1  # a stray closer, or `:` in a tuple
        found = _NEXT.search(text, resume, limit)
    return None


def _skip(text: str, index: int, limit: int) -> int | None:
    """The index past the quoted string or bracketed group at `index` (strings and groups inside it skipped
    whole); None when it does not end before `limit`."""
    closers: list[str] = []
    while index < limit:
        char = text[index]
        if char in "'\"":
            end = text.find(char, index + 1, limit)
            while end > 0 and _escaped(text, end):
                end = text.find(char, end + 1, limit)
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
        found = _NEXT.search(text, index, limit)
        index = found.start() if found is not None else limit
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
