"""Positional SQL parameters: the values bound to secret-named columns go, the others stay."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from analysis.intake.redact import Redactor
from tests.linear import PART, assert_linear, scaled
from tests.redacting import redact_anew

REDACTOR = Redactor()


def _error(statement: str, parameters: str) -> str:
    return (f"sqlalchemy.exc.IntegrityError: (sqlite3.IntegrityError) constraint failed\n[SQL: {statement}]\n"
            f"[parameters: {parameters}]\n(Background on this error at: https://sqlalche.me/e/20/gkpj)")


def _redacted(statement: str, parameters: str) -> str:
    text = _error(statement, parameters)
    redacted = REDACTOR.redact(text)
    assert redacted == REDACTOR.every_rule(text)  # the prefilter names the rule wherever it matches
    return redacted.split("[parameters: ")[1].partition("]\n")[0]


class TestColumns:
    def test_an_insert_binds_each_value_to_its_column(self) -> None:
        """The password and the API key go; the name and the count stay."""
        assert _redacted("INSERT INTO users (name, password, api_key, logins) VALUES (?, ?, ?, ?)",
                         "('bob', 'S3cretPass!', 'k-123', 4)") == "('bob', [REDACTED:secret], [REDACTED:secret], 4)"

    def test_rows_of_values_and_of_parameter_sets(self) -> None:
        """`VALUES (…), (…)` over one flat tuple, and executemany's list with SQLAlchemy's note of rows not shown."""
        assert _redacted("INSERT INTO t (a, token) VALUES (?, ?), (?, ?)", "('x', 'tok1', 'y', 'tok2')") == \
            "('x', [REDACTED:secret], 'y', [REDACTED:secret])"
        assert _redacted("INSERT INTO t (a, token) VALUES (?, ?)",
                         "[('x', 'tok1'), ('y', 'tok2')  ... displaying 10 of 100 total bound parameter sets ...  "
                         "('z', 'tok3')]") == \
            "[('x', [REDACTED:secret]), ('y', [REDACTED:secret])  ... displaying 10 of 100 total bound parameter " \
            "sets ...  ('z', [REDACTED:secret])]"

    @pytest.mark.parametrize(("statement", "parameters", "expected"), [
        ("UPDATE users SET password_hash = %s WHERE users.id = %s", "('9b2a3c4d', 7)", "([REDACTED:secret], 7)"),
        ('SELECT 1 FROM "users" WHERE "users"."secret" = :1 AND id = :2', "('x1', 7)", "([REDACTED:secret], 7)"),
        ("SELECT 1 FROM users WHERE id = $2 AND api_key LIKE $1", "('ab%', 7)", "([REDACTED:secret], 7)"),
    ])
    def test_a_compared_column_binds_its_placeholder(self, statement: str, parameters: str, expected: str) -> None:
        """`column = %s`, quoted names, numbered placeholders (`:1`, `$2`) in any order."""
        assert _redacted(statement, parameters) == expected

    def test_a_weak_name_takes_only_a_generated_value(self) -> None:
        """`code` holds a secret when its value looks generated, not an HTTP status."""
        statement = "SELECT * FROM sessions WHERE code = ? AND user_id = ?"
        assert _redacted(statement, "('a8F3kQ9zLm2Xp7Rt', 7)") == "([REDACTED:secret], 7)"
        assert _redacted(statement, "('404', 7)") == "('404', 7)"

    def test_none_and_booleans_stay(self) -> None:
        """`NOT NULL constraint failed: users.password` is explained by the None bound to it."""
        assert _redacted("INSERT INTO users (name, password, active) VALUES (?, ?, ?)", "('bob', None, True)") == \
            "('bob', None, True)"

    def test_statements_without_secret_columns_are_left_alone(self) -> None:
        assert _redacted("SELECT orders.id FROM orders WHERE orders.customer_id = ? AND orders.status = ?",
                         "(34227, 'pending')") == "(34227, 'pending')"


class TestTheStatement:
    @pytest.mark.parametrize("mark", ["?", "%s", "$1", ":1", "%(password)s"])
    def test_a_bind_mark_after_a_secret_name_stays(self, mark: str) -> None:
        """`password = ?` names no value (the keyed rules once made it `password = [REDACTED:secret]`); the
        value bound to it is the parameters', and goes."""
        statement = "UPDATE users SET password = " + mark + ", name = ? WHERE id = ?"  # noqa: S608 - log text, not a query
        text = _error(statement, "('hunter2xyz', 'bob', 7)")
        redacted = REDACTOR.redact(text)
        assert f"SET password = {mark}, name" in redacted and "hunter2xyz" not in redacted

    @pytest.mark.parametrize("value", ["?abc", "%secret", "%(x)sy", "$1a"])
    def test_a_value_that_only_starts_like_a_mark_goes(self, value: str) -> None:
        assert REDACTOR.redact(f"password={value} rejected").startswith("password=[REDACTED:secret]")

    @pytest.mark.parametrize(("text", "kept"), [
        ("login failed for user=bob, pin=$1234", "$1234"), ("login(user=bob, password=:letmein) failed", ":letmein"),
        ("where token=:abcDEF123xyz", ":abcDEF123xyz"), ("user=bob, password=$1::Tr0ub4dor_and_3", "Tr0ub4dor"),
    ])
    def test_a_value_like_a_mark_outside_a_statement_goes(self, text: str, kept: str) -> None:
        """Reviews: marks are kept only in a statement (a `SELECT`, `UPDATE`, … before them on the line), of up to
        three digits, with a known cast."""
        assert kept not in REDACTOR.redact(text)


class TestWhenInDoubt:
    def test_a_secret_column_no_placeholder_is_tied_to_takes_the_untied_ones(self) -> None:
        """`password = crypt(?, …)`: the placeholder sits inside a call."""
        assert _redacted("UPDATE users SET password = crypt(?, gen_salt('bf')) WHERE id = ?", "('hunter2', 7)") == \
            "([REDACTED:secret], 7)"

    def test_a_row_of_another_length_goes_whole(self) -> None:
        assert _redacted("INSERT INTO t (a, token) VALUES (?, ?)", "('x', 'tok1', 'extra')") == \
            "([REDACTED:secret], [REDACTED:secret], [REDACTED:secret])"

    def test_parameters_that_do_not_close_go_whole(self) -> None:
        """To the end of their line, however long."""
        for tail in ("'unclosed", "'a', " * 30_000 + "'unclosed'"):
            text = _error("INSERT INTO t (a, token) VALUES (?, ?)", f"('x', {tail}")
            assert "unclosed" not in REDACTOR.redact(text)

    def test_quotes_escapes_and_brackets_inside_values(self) -> None:
        assert _redacted("INSERT INTO t (a, token) VALUES (?, ?)", "('x, (y', 'to\\'k, ]')") == \
            "('x, (y', [REDACTED:secret])"

    def test_named_parameters_are_read_by_their_marks(self) -> None:
        """A dict's keys are the statement's marks: `%(password)s`, SQLAlchemy's `:password__0` of a batch,
        a generic name bound through a call (`password = upper(:upper_1)`; the second attacker review)."""
        assert _redacted("INSERT INTO users (name, password) VALUES (%(name)s, %(password)s)",
                         "{'name': 'bob', 'password': 'hunter2xyz'}") == \
            "{'name': 'bob', 'password': [REDACTED:secret]}"
        assert _redacted("INSERT INTO users (name, password) VALUES (:name__0, :password__0), (:name__1, "
                         ":password__1)", "{'name__0': 'a', 'password__0': 'Pa55word-0', 'name__1': 'b', "
                         "'password__1': 'Pa55word-1'}") == \
            "{'name__0': 'a', 'password__0': [REDACTED:secret], 'name__1': 'b', 'password__1': [REDACTED:secret]}"
        assert _redacted("UPDATE users SET password=upper(:upper_1) WHERE users.id = :id_1",
                         "{'upper_1': 'short7', 'id_1': 3}") == "{'upper_1': [REDACTED:secret], 'id_1': 3}"
        assert _redacted("SELECT 1 FROM users WHERE users.token = :param_1", "[{'param_1': 'abc'}, {'param_1': 'd'}]") \
            == "[{'param_1': [REDACTED:secret]}, {'param_1': [REDACTED:secret]}]"

    def test_on_one_line(self) -> None:
        """A log that writes the error on one line: spaces or an escaped newline between the two parts."""
        statement = "[SQL: INSERT INTO t (a, token) VALUES (?, ?)]"
        for between in (" ", "\\n"):
            text = f"{statement}{between}[parameters: ('x', 'tok123456')] (Background"
            assert "tok123456" not in REDACTOR.redact(text)
            assert "'x'" in REDACTOR.redact(text)


class TestTheSecondReview:
    """An attacker review of the first form found values kept wherever the reader lost its way; it now fails
    closed: a value tied to no column goes when the statement names a secret."""

    @pytest.mark.parametrize("between", [
        "\n  | ", "\n2024-06-01T12:00:00.000Z stderr F ", "\\r\\n", "\r", "#012", " | ", "\n    ",
    ], ids=["exception-group", "cri", "escaped-crlf", "cr", "rsyslog", "joined", "indented"])
    def test_a_line_prefix_between_statement_and_parameters(self, between: str) -> None:
        """Python 3.11's exception groups prefix each line with `  | `; container runtimes with a time. Where
        the two parts are joined otherwise (` | `), the parameters stand alone and every value goes."""
        statement = "  | [SQL: INSERT INTO users (name, password) VALUES (?, ?)]"
        text = f"{statement}{between}[parameters: ('bob', 'short7')]"
        redacted = REDACTOR.redact(text)
        assert "short7" not in redacted and ("'bob'" in redacted) == (between != " | ")
        assert redacted == REDACTOR.every_rule(text)

    @pytest.mark.parametrize(("statement", "parameters", "expected"), [
        ("INSERT INTO users (name, password) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET password = ?",
         "('bob', 'Hunter2Hunter2', 'short7')", "('bob', [REDACTED:secret], [REDACTED:secret])"),
        ("UPDATE users SET password=? WHERE users.password = trim(?)", "('short7', '0riginalPass')",
         "([REDACTED:secret], [REDACTED:secret])"),
        ("SELECT 1 FROM users WHERE ? = password AND id = ?", "('short7', 7)", "([REDACTED:secret], 7)"),
        ("SELECT 1 FROM users WHERE (password) = ? AND id = ?", "('short7', 7)", "([REDACTED:secret], 7)"),
        ("SELECT 1 FROM users WHERE password IN (?, ?) AND id = ?", "('a1', 'b2', 7)",
         "([REDACTED:secret], [REDACTED:secret], 7)"),
        ("SELECT 1 FROM users WHERE password BETWEEN ? AND ?", "('a1', 'b2')",
         "([REDACTED:secret], [REDACTED:secret])"),
        ("UPDATE users SET name = ?2, password = ?1 WHERE id = ?3", "('short7', 'carol', 1)",
         "([REDACTED:secret], 'carol', 1)"),
        ("INSERT INTO users (role, name, password) VALUES ('admin, ops', ?, ?)", "('bob', 'short7')",
         "('bob', [REDACTED:secret])"),
        ("INSERT INTO users (role, name, password) VALUES (':-(', ?, ?)", "('bob', 'short7')",
         "('bob', [REDACTED:secret])"),
        ("INSERT OR REPLACE INTO users (name, password) VALUES (?, ?)", "('bob', 'short7')",
         "('bob', [REDACTED:secret])"),
        ("INSERT INTO users (name, password) VALUES (?, ?) RETURNING users.id", "('bob', 'short7')",
         "('bob', [REDACTED:secret])"),
    ], ids=["on-conflict", "old-password", "reversed", "bracketed", "in-list", "between", "numbered",
            "comma-literal", "paren-literal", "or-replace", "returning"])
    def test_values_the_first_form_kept(self, statement: str, parameters: str, expected: str) -> None:
        assert _redacted(statement, parameters) == expected

    def test_quoted_names_in_json(self) -> None:
        """A traceback written into JSON: the statement's quoted names are escaped."""
        text = ('{"exc": "[SQL: INSERT INTO accounts (\\"userName\\", \\"passwordHash\\") VALUES (?, ?)]\\n'
                '[parameters: (\'bob\', \'short7\')]"}')
        assert "short7" not in REDACTOR.redact(text) and "'bob'" in REDACTOR.redact(text)

    @pytest.mark.parametrize("statement", [
        "UPDATE users SET password = ? WHERE users.id IN (" + ", ".join(["?"] * 6000) + ")",  # noqa: S608 - log text
        "INSERT INTO users (a, b, c) VALUES (?, ?, ?) ... (3120 characters truncated) ... assword) VALUES (?, ?)",
    ], ids=["over-16-kB", "cut-by-sqlalchemy"])
    def test_a_statement_not_read_whole_loses_every_value(self, statement: str) -> None:
        text = _error(statement, "('short7', 'a', None)")
        redacted = REDACTOR.redact(text)
        assert "short7" not in redacted and "'a'" not in redacted and "None" in redacted

    def test_parameters_without_their_statement_lose_every_value(self) -> None:
        assert REDACTOR.redact("[parameters: ('bob', 'short7', None, 3)] at x") == \
            "[parameters: ([REDACTED:secret], [REDACTED:secret], None, [REDACTED:secret])] at x"


class TestTheFailClosedFormReviewed:
    """A second attacker review, of the fail-closed form, kept a password or a token these ways."""

    def test_the_error_twice_on_one_line(self) -> None:
        """`logger.exception("…: %s", e)` as JSON: the message and the traceback both hold the pair."""
        pair = "[SQL: INSERT INTO users (name, password) VALUES (?, ?)]\\n[parameters: ('bob', 'Hunter2-xyz')]"
        text = f'{{"message": "db write failed: {pair}", "exc_info": "Traceback …\\n{pair}\\n(Background …)"}}'
        redacted = REDACTOR.redact(text)
        assert "Hunter2-xyz" not in redacted and redacted.count("'bob'") == 2
        assert "Hunter2-xyz" not in REDACTOR.redact("[parameters: ('a', 'b')] then [parameters: ('Hunter2-xyz',)]")

    @pytest.mark.parametrize(("parameters", "expected"), [
        ("['bob', 'Hunter2!']", "['bob', [REDACTED:secret]]"),
        ("[['bob', 'Hunter2!'], ['al', 'Hunter3!']]", "[['bob', [REDACTED:secret]], ['al', [REDACTED:secret]]]"),
    ], ids=["a-list", "lists"])
    def test_lists_of_values(self, parameters: str, expected: str) -> None:
        """Dialects that bind lists (`execute_sequence_format = list`: cx_Oracle, oracledb)."""
        assert _redacted("INSERT INTO users (name, password) VALUES (:1, :2)", parameters) == expected

    def test_a_dict_sqlalchemy_shortened(self) -> None:
        """Past 100 entries SQLAlchemy cuts the dict: the keys after the cut would be read as values."""
        parameters = ("{'name_m24': 'user24' ... 20 parameters truncated ... 'password_m35': 'Secret-35!', "
                      "'name_m35': 'u'}")
        redacted = REDACTOR.redact(_error("INSERT INTO users (password, name) VALUES (:password_m0, :name_m0)",
                                          parameters))
        assert "Secret-35!" not in redacted and "user24" not in redacted

    @pytest.mark.parametrize(("statement", "parameters", "expected"), [
        ("INSERT INTO sessions (user_id, token, token_hint) VALUES (?2, ?1, NULL) ON CONFLICT (user_id) DO UPDATE "
         "SET token = ?1, token_hint = substr(?1, -4)", "('s3ss-Zk8sQ2pLm4', 7)", "([REDACTED:secret], 7)"),
        ("UPDATE api_keys SET token = $1 WHERE token_prefix = left($1, 8) AND id = $2", "('tok-abc', 7)",
         "([REDACTED:secret], 7)"),
        ("INSERT INTO users (\n name, -- display name, shown publicly\n password\n) VALUES (?, ?)",
         "('bob', 'Hunter2!')", "('bob', [REDACTED:secret])"),
        ('INSERT INTO u2 ("a,b", password, name) VALUES (?, ?, ?)', "(1, 'Hunter2!', 'bob')",
         "(1, [REDACTED:secret], 'bob')"),
        ("SELECT 1 FROM sessions WHERE session = ? AND id = ?", "(b'vLjgQ8zK2mPx9RtY4wNs', 7)",
         "([REDACTED:secret], 7)"),
        ("SELECT 1 FROM sessions WHERE session = ? AND id = ?",
         "('vLjgQ8zK2mPx9RtY4wNs ... (302 characters truncated) ... Q8zK2mPx9RtY', 7)", "([REDACTED:secret], 7)"),
        ("UPDATE people SET ssn = ? WHERE id = ?", "('123456789', 7)", "([REDACTED:secret], 7)"),
    ], ids=["reused-numbered", "reused-dollar", "commented-columns", "quoted-comma-column", "weak-bytes",
            "weak-truncated", "personal-column"])
    def test_values_the_fail_closed_form_kept(self, statement: str, parameters: str, expected: str) -> None:
        assert _redacted(statement, parameters) == expected

    def test_commas_after_a_row_stay_linear(self) -> None:
        """A megabyte of statements of 16,000 commas after their row took 24.6 s (each comma re-read the text
        since the row): now about 1 s."""

        def text(commas: int) -> str:
            return ("[SQL: INSERT INTO t (a) VALUES (?)" + "," * commas + "]\n[parameters: ('x',)]\n") * 61

        assert_linear(redact_anew, text, 16_356, 4.0)


class TestTheThirdReview:
    """A third attacker review: what the reader still tied wrongly, and a line read once per pair."""

    @pytest.mark.parametrize(("statement", "parameters", "expected"), [
        ("INSERT INTO users (\\n    name,\\n    password\\n) VALUES (?, ?)", "('bob', 'Hunter2!')",
         "('bob', [REDACTED:secret])"),
        ("INSERT INTO users (#012    name,#012    password#012) VALUES (?, ?)", "('bob', 'Hunter2!')",
         "('bob', [REDACTED:secret])"),
        ("SELECT nosuch FROM users WHERE password COLLATE NOCASE = ? AND id = ?", "('Hunter2!', 1)",
         "([REDACTED:secret], 1)"),
        ("SELECT 1 FROM users WHERE password::text = %s AND id = %s", "('Hunter2!', 1)", "([REDACTED:secret], 1)"),
        ("INSERT INTO users (name, customer_ssn) VALUES (?, ?)", "('carol', '123456789')",
         "('carol', [REDACTED:secret])"),
        ("INSERT INTO users (name, ssnLast4, birth_date) VALUES (?, ?, ?)", "('carol', '6789', '1970-01-01')",
         "('carol', [REDACTED:secret], [REDACTED:secret])"),
        ("INSERT INTO devices (name, hmac) VALUES (?, ?)", "('d1', b'\\xc8\\xc9\\x01\\x02\\x03\\x04\\x05\\x06')",
         "('d1', [REDACTED:secret])"),
        ("UPDATE settings SET value = ? WHERE name = 'smtp_password'", "('Hunter2!',)", "([REDACTED:secret],)"),
        ("UPDATE settings SET value = :value WHERE name = :name_1", "{'value': 'Hunter2!', 'name_1': 'smtp_password'}",
         "{'value': [REDACTED:secret], 'name_1': 'smtp_password'}"),
    ], ids=["escaped-newlines", "rsyslog-newlines", "collate", "cast", "customer-ssn", "ssn-and-birth",
            "weak-bytes", "settings-literal", "settings-named"])
    def test_values_the_third_review_kept(self, statement: str, parameters: str, expected: str) -> None:
        assert _redacted(statement, parameters) == expected

    @pytest.mark.parametrize("text", ["worker started [parameters: --queue emails --concurrency 4] ok",
                                      "request done [parameters: none] user=bob"])
    def test_other_tools_parameters_stay(self, text: str) -> None:
        """A lone `[parameters:` that is no bracketed repr is another tool's: nothing of it goes."""
        assert REDACTOR.redact(text) == text == REDACTOR.every_rule(text)

    @pytest.mark.parametrize("text", [
        scaled(("[parameters: (1)] ", 55_555)), scaled(("Arguments: (1) ", 66_666)),
        scaled(("[SQL: SELECT 1 WHERE password = ?] [parameters: ('x',)] ", 18_000)),
        # Under the 256 kB the reader parses whole at both sizes (over it, every value goes, a cheaper path).
        scaled("[SQL: password = ?]\n[parameters: [", ("(1),", 62_000), "]]"),
        scaled("[SQL: password = ?]\n[parameters: ['a',", ("'a',", 62_000), "]"),
    ], ids=["lone-pairs", "arguments", "pairs", "rows", "values"])
    def test_a_long_line_is_read_once(self, text: Callable[[int], str]) -> None:
        """Each pair read the rest of its line again: 62 s for a megabyte of lone pairs; now linear."""
        assert_linear(redact_anew, text, PART, 4.0)


class TestUnnamedValues:
    @pytest.mark.parametrize("statement", [
        "INSERT INTO users VALUES (?, ?, ?)", 'insert or replace into "users" values (:1, :2, :3)',
        "REPLACE INTO users VALUES (%s, %s, %s)", "INSERT INTO users SELECT ?, ?, ? WHERE NOT EXISTS (SELECT 1)",
        "INSERT INTO users SELECT * FROM (VALUES (?, ?, ?))", "INSERT /* batch */ INTO users VALUES (?, ?, ?)",
        "UPSERT INTO users VALUES ($1, $2, $3)", "INSERT INTO users (name, note) SELECT ?, ?, ?",
        "INSERT INTO users (name) VALUES (?) ; INSERT INTO creds VALUES (?, ?)"])
    def test_an_insert_without_a_column_list_loses_every_value(self, statement: str) -> None:
        """No column list is read, so no word says which value is the password: every one goes (an attacker
        review found the SELECT forms, a comment and CockroachDB's UPSERT keeping theirs)."""
        assert _redacted(statement, "('bob', 'Sup3rS3cret', 7, None)") == \
            "([REDACTED:secret], [REDACTED:secret], [REDACTED:secret], None)"

    def test_a_python_logging_error_loses_its_arguments(self) -> None:
        """Python's logging prints a call's arguments when its format string does not take them, in a run of
        the real interpreter; a mapping (the single argument a `%(name)s` format reads) goes value by value."""
        program = ("import logging; logging.basicConfig(); log = logging.getLogger('auth')\n"
                   "log.error('login failed for %s', 'bob@example.com', 'Hunter2-Secret!', None)\n"
                   "log.warning('token %d', {'api_key': 'zzz-123-key', 'attempts': 5})\n")
        printed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stderr
        assert "Arguments: ('bob@example.com', 'Hunter2-Secret!', None)" in printed  # what the interpreter printed
        redacted = REDACTOR.redact(printed)
        assert redacted == REDACTOR.every_rule(printed)
        assert "Arguments: ([REDACTED:secret], [REDACTED:secret], None)" in redacted
        assert "Arguments: {'api_key': [REDACTED:secret], 'attempts': [REDACTED:secret]}" in redacted
        for line in redacted.splitlines():  # each line alone, as a log shipper sends them
            assert "Hunter2" not in REDACTOR.redact(line) and "zzz-123" not in REDACTOR.redact(line)

    @pytest.mark.parametrize(("text", "expected"), [
        ('{"log": "Message: \'card %s\'\\nArguments: (\'4111\', \'Jane Doe\')\\n"}',
         '{"log": "Message: \'card %s\'\\nArguments: ([REDACTED:secret], [REDACTED:secret])\\n"}'),
        ("Message: 'x'#012Arguments: ('Jane Doe', None)", "Message: 'x'#012Arguments: ([REDACTED:secret], None)"),
        ("2024-06-01T10:00:00.000000000Z stderr F Arguments: ('bob', 'hunter2')",
         "2024-06-01T10:00:00.000000000Z stderr F Arguments: ([REDACTED:secret], [REDACTED:secret])"),
        ('{"log":"Arguments: (\'bob\', \'hunter2\')\\n","stream":"stderr"}',
         '{"log":"Arguments: ([REDACTED:secret], [REDACTED:secret])\\n","stream":"stderr"}'),
        ("Arguments: (<User sam :)>, 'hunter2', 'Jane Q. Public')", "Arguments: ([REDACTED:secret])[REDACTED:secret]"),
        ("Jan 01 12:00:00 web1 gunicorn[812]: Arguments: ('bob', 'hunter2')",
         "Jan 01 12:00:00 web1 gunicorn[812]: Arguments: ([REDACTED:secret], [REDACTED:secret])"),
        ("web-1  | Arguments: ('bob', 'hunter2')", "web-1  | Arguments: ([REDACTED:secret], [REDACTED:secret])"),
    ], ids=["json-shipped", "rsyslog", "cri", "docker-json", "bracket-in-a-repr", "syslog", "compose"])
    def test_arguments_wherever_their_line_starts(self, text: str, expected: str) -> None:
        """An attacker review: a shipper's JSON or rsyslog's `#012` put `n` or `2` before `Arguments:`, which the
        first form took for a word; a repr's own `)` closed the tuple early and left the rest of it."""
        assert REDACTOR.redact(text) == expected == REDACTOR.every_rule(text)

    @pytest.mark.parametrize("text", ["Invalid Arguments: --port 8080", "parseArguments: (see --help)",
                                      "Arguments: none given", "Arguments: ['train.py', '--model', 'resnet50']",
                                      "Job finished. Arguments: ('backup', '/var/lib/db'), exit code 0",
                                      "INFO:root:Arguments: {'lr': 0.001}", '    logger.info(f"Arguments: {args}")'])
    def test_other_arguments_stay(self, text: str) -> None:
        """Only a tuple or a mapping (what logging keeps) where a line starts is read: a script's own log of its
        command line, a sentence that names its arguments, or a traceback's source line, stays (an attacker review
        and the real lines of installed packages found them redacted)."""
        assert REDACTOR.redact(text) == text == REDACTOR.every_rule(text)


class TestHostileInput:
    @pytest.mark.parametrize("text", [
        scaled("[SQL: INSERT INTO t (a, password) VALUES ", ("(?, ?), ", 2000), "]\n[parameters: (", ("'a', ", 30000),
               ")]"),
        scaled("[SQL: SELECT 1 WHERE password = ", ("?", 16000), "]\n[parameters: ", ("(", 60000), "]"),
        scaled("[SQL: SELECT 1 WHERE password = ?]\n[parameters: ('", ("\\", 60000), "')]"),
        scaled("[SQL: ", ("a = ? AND ", 1600), "password = ?]\n[parameters: [", ("('a', 'b'), ", 5000), "]]"),
        scaled(("[SQL: x]\n[parameters: ", 4000)),
        scaled(("[SQL: x", 150_000)), scaled(("[SQL: x] ", 100_000)),
        scaled(("[SQL: password " + "_$1" * 5400 + "]\n[parameters: ('x')]\n", 61)),
        scaled(("[SQL: code " + ("a" * 250 + "?") * 64 + "]\n[parameters: ('x')]\n", 61)),
        scaled(("[SQL: password = ?]\n  | ", 40_000)), scaled(("]\n[parameters: ", 70_000)),
    ], ids=["many-rows", "deep-brackets", "backslashes", "many-placeholders", "repeated-heads", "heads-alone",
            "heads-closed", "dollar-names", "long-names", "prefixes", "closers"])
    def test_cpu_grows_linearly(self, text: Callable[[int], str]) -> None:
        """Statements of thousands of placeholders, brackets 60,000 deep, runs of backslashes, a megabyte of
        statements that no parameters follow (each read to the end of the text once took 18-23 s)."""
        assert_linear(redact_anew, text, PART, 1.5)

