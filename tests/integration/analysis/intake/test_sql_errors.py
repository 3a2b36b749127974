"""Errors SQLAlchemy really raises over SQLite: the secrets among their positional parameters are redacted."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, text
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
