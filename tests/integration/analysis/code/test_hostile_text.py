"""Hostile text through the localiser: a megabyte line in the repository, a megabyte exception message.

Both are untrusted (a minified bundle committed next to the code, a message built from user input). The
localiser's rules run on source lines and messages, so each case is timed through `find_suspects` on a
real repository: a megabyte of the pieces its rules are made of must cost CPU time linear in its size.
"""

from __future__ import annotations

from functools import cache, partial
from pathlib import Path

import pytest

from analysis.code.localiser import find_suspects
from analysis.code.repo import Checkout, open_local
from analysis.code.source import MAX_LINE_CHARS, Source
from analysis.code.tools import FileTools
from analysis.event import ErrorEvent, ExceptionInfo, Frame
from tests.gitrepo import GitRepo
from tests.linear import assert_linear, repeated

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_SIZE = 1 << 20
# Runs of what the rules look for: calls, members, indexes, generics, raises, assignments, braces, quotes.
_UNITS = ("a(", "a.", "a[", "a.b(c).", "<>", "throw ", "x = ", "{", "'", " ", "_", "name,", "for ")
_JAVA = """\
package shop;

public class Orders {
    public int total(Order order, int[] prices) {
        int sum = 0;
        {line}
        return order.items().get(prices[sum]).price() / sum;
    }
}
"""


def _event(value: str) -> ErrorEvent:
    frame = Frame(function="total", module="shop.Orders", filename="Orders.java", lineno=7, in_app=True)
    return ErrorEvent(server_id="shop", timestamp=1.0, message=value,
                      exceptions=(ExceptionInfo(type="java.lang.ArithmeticException", value=value, frames=(frame,)),))


def _orders(path: Path, line: str) -> Checkout:
    repo = GitRepo(path)
    repo.write({"src/main/java/shop/Orders.java": _JAVA.replace("{line}", line)})
    repo.commit("the method")
    return open_local(repo.path)


def _locate(checkout: Checkout, event: ErrorEvent) -> None:
    """The localiser on new tools (nothing cached from an earlier run) finds the culprit line."""
    tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit)
    suspects = [(s.path, s.line) for s in find_suspects(event, tools).suspects]
    assert suspects[:1] == [("src/main/java/shop/Orders.java", 7)]


@pytest.mark.parametrize("unit", _UNITS)
def test_a_megabyte_line_beside_the_culprit_costs_linear_time(tmp_path: Path, unit: str) -> None:
    @cache  # a repository per size: each run's new tools read it afresh
    def checkout(size: int) -> Checkout:
        return _orders(tmp_path / str(size), repeated(unit, size))

    assert_linear(partial(_locate, event=_event("/ by zero")), checkout, _SIZE, 2.0, f"a line of {unit!r}")


@pytest.mark.parametrize("unit", _UNITS)
def test_a_megabyte_message_costs_linear_time(tmp_path: Path, unit: str) -> None:
    def event(size: int) -> ErrorEvent:
        return _event(repeated(unit, size))

    assert_linear(partial(_locate, _orders(tmp_path, "sum += 1;")), event, _SIZE, 2.0,
                  f"a message of {unit!r}")


def test_a_line_over_the_cap_reads_blank_and_keeps_the_numbering() -> None:
    lines = ("int a = 1;", "x" * (MAX_LINE_CHARS + 1), "int b = 2;", "y" * MAX_LINE_CHARS)
    source = Source("A.java", lines, "java")
    assert source.lines == ("int a = 1;", "", "int b = 2;", "y" * MAX_LINE_CHARS)
