"""Tracebacks loguru really writes with `diagnose` (its default): the values noted under a source line are
redacted when the name they are noted under holds a secret, as printed, colored, and in `serialize`'s JSON."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from loguru import logger

from analysis.intake.stacktrace import parse_trace
from consumer.cli import main
from tests.linear import PART, assert_linear, scaled
from tests.redacting import REDACTOR, redact_anew, redacted

PASSWORD = "S3cr3t-Passw0rd!"  # a test value
API_TOKEN = "Zq8vN2rL5tX1cW7m"
SESSION_KEY = "sess-4f9a1c7e2b8d6035"


def connect(host: str, user: str, password: str, api_token: str) -> float:
    attempts = 0
    return len(host + user + password + api_token) / attempts


def handler() -> float:
    db_password = PASSWORD
    api_token = API_TOKEN
    user_name = "alice"
    return connect("db.internal", user_name, db_password, api_token)


def session_lookup() -> str:
    key = SESSION_KEY
    session_key = SESSION_KEY
    code = "404"
    return key + session_key + code + 1  # type: ignore[operator]


class Settings:
    def __init__(self) -> None:
        self.db_password = PASSWORD


class Grid:
    def __repr__(self) -> str:
        return "Grid(\n  rows=2\n)"


class Vault:
    def __repr__(self) -> str:  # a blank line inside, as pandas' truncated frames print
        return f"Vault(\n\n  v={PASSWORD}\n)"


def blank_line_and_short_name() -> str:
    password = Vault()
    pwd = "/srv/app"
    return pwd + password  # type: ignore[operator]


def with_attribute(settings: Settings) -> float:
    return len(settings.db_password) / 0


def after_a_long_repr(grid: Grid) -> float:
    secret_key = ("AKIAIOSFODNN7EXAMPLE", API_TOKEN)
    return len(str(grid)) + len(secret_key) / 0


def logged(fail: Callable[[], object], encoding: str = "utf-8", **sink: bool) -> str:
    """What loguru writes for the exception `fail` raises, with `diagnose` on, to a stream of `encoding`
    (where that cannot write its box drawing, loguru draws with `|` and `->`)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, write_through=True)
    sink_id = logger.add(out, diagnose=True, backtrace=False, **sink)
    try:
        fail()
    except Exception:
        logger.exception("request failed")
    finally:
        logger.remove(sink_id)
    return out.buffer.getvalue().decode(encoding)  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logger.remove()  # loguru's default sink writes to stderr


class TestDiagnose:
    def test_values_under_secret_names_go_and_the_rest_stay(self) -> None:
        out = redacted(logged(handler), PASSWORD, API_TOKEN)
        assert "└ 'alice'" in out and "└ 'db.internal'" in out and "└ 0" in out
        assert "<function connect at 0x" in out  # code is no value
        assert out.count("└ [REDACTED:secret]") == 4  # db_password and api_token, then password and api_token

    def test_drawn_in_ascii(self) -> None:
        out = redacted(logged(handler, encoding="ascii"), PASSWORD, API_TOKEN)
        assert "-> 'alice'" in out and "└" not in out
        assert out.count("-> [REDACTED:secret]") == 4

    def test_colored(self) -> None:
        text = logged(handler, colorize=True)
        assert "\x1b[" in text
        redacted(text, PASSWORD, API_TOKEN)

    def test_serialized_json(self) -> None:
        """`serialize=True`: the traceback is in the record's `text`, its line breaks written out."""
        line = logged(handler, serialize=True)
        out = redacted(line, PASSWORD, API_TOKEN)
        text = orjson.loads(out)["text"]
        assert "└ 'alice'" in text and text.count("└ [REDACTED:secret]") == 4

    def test_weak_names_only_when_the_value_looks_generated(self) -> None:
        out = redacted(logged(session_lookup), SESSION_KEY)
        assert "└ '404'" in out  # `code`: a weak name, a value that is no secret
        assert out.count("└ [REDACTED:secret]") == 2


    def test_an_attribute(self) -> None:
        """`settings.db_password` is noted under the attribute's name."""
        out = redacted(logged(lambda: with_attribute(Settings())), PASSWORD)
        assert "└ [REDACTED:secret]" in out

    def test_a_value_of_several_lines_and_one_partly_redacted(self) -> None:
        """A repr of several lines goes on under its note (later notes are still read); a value another rule
        redacted in part (a key's id) is hidden whole."""
        out = redacted(logged(lambda: after_a_long_repr(Grid())), API_TOKEN)
        assert "rows=2" in out  # not a secret's
        assert "└ [REDACTED:secret]" in out


class TestValuesOfSeveralLines:
    def test_a_blank_line_in_a_repr_does_not_end_it_and_a_short_name_is_weak(self) -> None:
        """A second review: a repr's blank line (spaces) ended the notes and the rest of the value showed; and
        `pwd` (a working directory as often as a password) hid `os.getcwd()`."""
        out = redacted(logged(blank_line_and_short_name), PASSWORD)
        assert "└ '/srv/app'" in out and "└ [REDACTED:secret]" in out


class TestTheTrace:
    @pytest.mark.parametrize("backtrace", [False, True])
    def test_is_read_as_python_s(self, backtrace: bool) -> None:
        """loguru marks the frame that caught the error with `>` (`@logger.catch`, `backtrace`): that line is a
        frame, not the exception's message (a new-user trial: the trace read as a log message)."""
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
        sink_id = logger.add(out, diagnose=True, backtrace=backtrace)
        try:
            logger.catch(handler)()
        finally:
            logger.remove(sink_id)
        text = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
        assert ('> File "' in text) is backtrace
        root = parse_trace(text)[-1]
        assert (root.type, root.value) == ("ZeroDivisionError", "division by zero")
        assert [frame.function for frame in root.frames[:2]] == ["connect", "handler"]


class TestTheRedactCommand:
    @pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
    def test_a_pasted_traceback(self, encoding: str, tmp_path: Path,
                                capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """`logagent redact` reads text line by line: a note is redacted with the source line above it, as the
        service redacts the whole trace (a new-user trial: it printed the password)."""
        text = logged(lambda: after_a_long_repr(Grid()), encoding=encoding) + logged(handler, encoding=encoding)
        path = tmp_path / "pasted.log"
        path.write_text(text)
        assert main(["redact", str(path)]) == 0
        out = capsysbinary.readouterr().out.decode()
        assert len(out.splitlines()) == len(text.splitlines())
        assert PASSWORD not in out and API_TOKEN not in out and "rows=2" in out


class TestHostile:
    @pytest.mark.parametrize("text", [
        scaled(("a", 4000), "\n", ("-> x\n", 249_000)),  # a name's length times its notes: both grow
        scaled(("a" * 500 + "\n" + "-> x\n" * 200, 1000)),
        scaled('{"text": "', ("a" * 500 + "\\n" + "-> x\\n" * 200, 800), '"}'),
        scaled("    password(x)\n    -> 'v'\n", ("       more\n", 80_000)),
    ], ids=["one-long-name", "many-blocks", "serialized", "continued-repr"])
    def test_a_megabyte_of_notes_costs_linear_time(self, text: Callable[[int], str]) -> None:
        """A review: `secret_key` read the whole name at each note's column again (370 s for a megabyte)."""
        assert_linear(redact_anew, text, PART, 1.0)


class TestLookAlikes:
    @pytest.mark.parametrize("text", [
        # a box drawing that is no traceback: the line above names nothing there
        "┌ config\n│ └ 'S3cr3t-Passw0rd!'\n",
        # a name that holds no secret
        "    return lookup(user)\n    │      └ 'alice'\n    └ <function lookup at 0x7f00>\n",
    ])
    def test_stay(self, text: str) -> None:
        assert REDACTOR.redact(text) == text == REDACTOR.every_rule(text)

    def test_none_and_empty_values_stay(self) -> None:
        """That a password was None or empty is what the failure is about."""
        def login() -> float:
            password, token = None, ""
            return len(token) / len(password or "")
        out = logged(login)
        assert "└ None" in out and "└ ''" in out
        assert REDACTOR.redact(out) == out
