"""Errors SQLAlchemy really raises over SQLite: the secrets among their positional parameters are redacted."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import CheckConstraint, Column, Connection, MetaData, Table, Text, create_engine, insert, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError

from analysis.intake.redact import Redactor

REDACTOR = Redactor()
_TABLE = ("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT UNIQUE, password TEXT NOT NULL "
          "CHECK (length(password) >= 8), api_key TEXT)")


@pytest.fixture
def connection() -> Iterator[Connection]:
    with create_engine("sqlite://").connect() as connection:
        connection.execute(text(_TABLE))
        connection.execute(text("INSERT INTO users (name, password, api_key) VALUES (:n, :p, :k)"),
                           {"n": "bob", "p": "0riginalPass", "k": "k-0riginal-key"})
        yield connection


def _trace_of(action: Callable[[], Any]) -> str:
    """The traceback a service would log for the error `action` raises."""
    try:
        action()
    except DBAPIError:
        return traceback.format_exc()
    raise AssertionError("the statement did not fail")


def _redacted(trace: str, *secrets: str) -> str:
    """The trace redacted, after checking that it held each secret (so the test shows them removed)."""
    for secret in secrets:
        assert secret in trace
    redacted = REDACTOR.redact(trace)
    assert redacted == REDACTOR.every_rule(trace)
    for secret in secrets:
        assert secret not in redacted
    return redacted


class TestRealErrors:
    def test_a_unique_violation_on_insert(self, connection: Connection) -> None:
        """`[parameters: ('bob', 'S3cretPass!', 'zzz-key-123')]`: the name stays."""
        trace = _trace_of(lambda: connection.execute(
            text("INSERT INTO users (name, password, api_key) VALUES (:n, :p, :k)"),
            {"n": "bob", "p": "S3cretPass!", "k": "zzz-key-123"}))
        assert "[parameters: ('bob', [REDACTED:secret], [REDACTED:secret])]" in \
            _redacted(trace, "S3cretPass!", "zzz-key-123")

    def test_a_check_failure_on_update_through_the_driver(self, connection: Connection) -> None:
        """`UPDATE users SET password = ? …` with the parameters as the driver took them."""
        trace = _trace_of(lambda: connection.exec_driver_sql(
            "UPDATE users SET password = ?, name = ? WHERE id = ?", ("short1", "carol", 1)))
        assert "[parameters: ([REDACTED:secret], 'carol', 1)]" in _redacted(trace, "short1")

    def test_many_rows_with_the_ones_not_displayed(self, connection: Connection) -> None:
        """executemany of 40 rows: SQLAlchemy shows 10 and a note; every password shown goes."""
        rows = [{"n": f"user{i}", "p": f"Pa55word-{i:02d}", "k": None} for i in range(39)]
        rows.append({"n": "bob", "p": "Pa55word-last", "k": None})
        trace = _trace_of(lambda: connection.execute(
            text("INSERT INTO users (name, password, api_key) VALUES (:n, :p, :k)"), rows))
        shown = [f"Pa55word-{i:02d}" for i in range(39) if f"Pa55word-{i:02d}" in trace]
        assert "total bound parameter sets" in trace and shown
        redacted = _redacted(trace, *shown, "Pa55word-last")
        assert "('user0', [REDACTED:secret], None)" in redacted

    def test_a_missing_password_stays_visible(self, connection: Connection) -> None:
        """NOT NULL constraint failed: users.password, and the None that explains it, are kept."""
        trace = _trace_of(lambda: connection.execute(
            text("INSERT INTO users (name, password) VALUES (:n, :p)"), {"n": "carol", "p": None}))
        assert "[parameters: ('carol', None)]" in _redacted(trace)


class TestWhatTheReviewRan:
    """Errors an attacker review of the first form raised for real: each kept a password."""

    def test_inside_an_exception_group(self, connection: Connection) -> None:
        """Python 3.11 prints each line of a grouped exception after `  | `."""
        try:
            connection.exec_driver_sql("UPDATE users SET password = ? WHERE id = ?",
                                       ("short7", 1))  # on a line of its own: the trace quotes the first
        except DBAPIError as error:
            group = ExceptionGroup("unhandled errors in a TaskGroup", [error])
            trace = "".join(traceback.format_exception(group))
        assert "  | [parameters: ('short7', 1)]" in trace
        assert "[parameters: ([REDACTED:secret], 1)]" in _redacted(trace, "short7")

    def test_an_upsert_sets_the_password_after_its_values(self, connection: Connection) -> None:
        statement = sqlite_insert(_users(connection)).values(name="bob", password="Hunter2Hunter2")
        upsert = statement.on_conflict_do_update(index_elements=["name"], set_={"password": "short7"})
        trace = _trace_of(lambda: connection.execute(upsert))
        _redacted(trace, "Hunter2Hunter2", "short7")

    def test_a_long_in_list_and_a_batch_cut_short(self, connection: Connection) -> None:
        """A statement over 16 kB, and SQLAlchemy's bulk insert, whose statement it prints cut to 250
        characters on a wide table (the password column in the part cut out): every value goes."""
        users = _users(connection)
        trace = _trace_of(lambda: connection.execute(
            update(users).where(users.c.id.in_(range(6000))).values(password="short7")))
        assert len(trace) > 16_384
        _redacted(trace, "short7")
        wide = Table("wide", MetaData(), *(Column(f"column_{i:02d}", Text) for i in range(20)),
                     Column("password", Text, CheckConstraint("length(password) >= 8")))
        wide.create(connection)
        rows = [{**{f"column_{i:02d}": f"v{i}" for i in range(20)}, "password": f"Pa55word-{n:04d}"} for n in range(20)]
        rows[-1]["password"] = "short7"
        trace = _trace_of(lambda: connection.execute(insert(wide).returning(wide.c.password), rows))
        assert "characters truncated" in trace
        _redacted(trace, "short7")
        assert "Pa55word" not in REDACTOR.redact(trace)


def _users(connection: Connection) -> Table:
    return Table("users", MetaData(), autoload_with=connection)
