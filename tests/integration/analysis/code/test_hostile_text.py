"""Hostile text through the localiser: a megabyte line in the repository, a megabyte exception message.

Both are untrusted (a minified bundle committed next to the code, a message built from user input). The
localiser's rules run on source lines and messages, so each case is timed through `find_suspects` on a
real repository: a megabyte of the pieces its rules are made of must cost well under a second of CPU.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from analysis.code.localiser import find_suspects
from analysis.code.repo import open_local
from analysis.code.source import MAX_LINE_CHARS, Source
from analysis.code.tools import FileTools
from analysis.event import ErrorEvent, ExceptionInfo, Frame
from tests.gitrepo import GitRepo

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_SIZE = 1 << 20
_BUDGET_S = 1.0
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


def _megabyte(unit: str) -> str:
    return (unit * (_SIZE // len(unit) + 1))[:_SIZE]


def _event(value: str) -> ErrorEvent:
    frame = Frame(function="total", module="shop.Orders", filename="Orders.java", lineno=7, in_app=True)
    return ErrorEvent(server_id="shop", timestamp=1.0, message=value,
                      exceptions=(ExceptionInfo(type="java.lang.ArithmeticException", value=value, frames=(frame,)),))


def _cpu(event: ErrorEvent, tools: FileTools) -> tuple[float, list[tuple[str, int | None]]]:
    started = time.process_time()
    findings = find_suspects(event, tools)
    return time.process_time() - started, [(s.path, s.line) for s in findings.suspects]


@pytest.mark.parametrize("unit", _UNITS)
def test_a_megabyte_line_beside_the_culprit_costs_under_a_second(tmp_path: Path, unit: str) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write({"src/main/java/shop/Orders.java": _JAVA.replace("{line}", _megabyte(unit))})
    repo.commit("a minified line inside the method")
    checkout = open_local(repo.path)
    tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit)
    elapsed, suspects = _cpu(_event("/ by zero"), tools)
    assert suspects[:1] == [("src/main/java/shop/Orders.java", 7)]
    assert elapsed < _BUDGET_S, f"{elapsed:.2f}s CPU with a megabyte of {unit!r} on line 6"


@pytest.mark.parametrize("unit", _UNITS)
def test_a_megabyte_message_costs_under_a_second(tmp_path: Path, unit: str) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write({"src/main/java/shop/Orders.java": _JAVA.replace("{line}", "sum += 1;")})
    repo.commit("the method")
    checkout = open_local(repo.path)
    tools = FileTools(checkout.root, repo_dir=checkout.repo_dir, commit=checkout.commit)
    elapsed, suspects = _cpu(_event(_megabyte(unit)), tools)
    assert suspects[:1] == [("src/main/java/shop/Orders.java", 7)]
    assert elapsed < _BUDGET_S, f"{elapsed:.2f}s CPU with a megabyte message of {unit!r}"


def test_a_line_over_the_cap_reads_blank_and_keeps_the_numbering() -> None:
    lines = ("int a = 1;", "x" * (MAX_LINE_CHARS + 1), "int b = 2;", "y" * MAX_LINE_CHARS)
    source = Source("A.java", lines, "java")
    assert source.lines == ("int a = 1;", "", "int b = 2;", "y" * MAX_LINE_CHARS)
