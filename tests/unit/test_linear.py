"""The growth check the hostile-input tests rely on tells linear work from quadratic work."""

from __future__ import annotations

import re

import pytest

from tests import linear
from tests.linear import assert_linear, over_budget, repeated, scaled, slower


def _each_suffix(text: str) -> int:
    """Quadratic: a search of the rest of the text from every character."""
    return sum(text.count("a", start) for start in range(len(text)))


class TestAssertLinear:
    def test_a_scan_passes(self) -> None:
        assert_linear(re.compile(r"\w+").findall, lambda size: "ab " * size, 300_000, 1.0)

    def test_work_over_every_suffix_fails(self) -> None:
        with pytest.raises(AssertionError, match="at an eighth"):
            assert_linear(_each_suffix, lambda size: "a" * size, 40_000, 10.0)

    def test_a_quadratic_regex_fails(self) -> None:
        """Each start position scans the run to its end: the classic quadratic regex."""
        with pytest.raises(AssertionError, match="at an eighth"):
            assert_linear(re.compile(r"a+b").findall, lambda size: "a" * size, 32_000, 10.0)

    def test_linear_work_over_its_budget_fails(self) -> None:
        """Linear, but slower than its budget even on a machine as slow as this one is now."""
        with pytest.raises(AssertionError, match="of the budgets' machine"):
            assert_linear(re.compile(r"\w+").findall, lambda size: "ab " * size, 300_000, 0.001)

    def test_a_slower_machine_has_its_budget_scaled(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A run over its budget passes on a machine that runs the reference that many times slower."""
        monkeypatch.setattr(linear, "REFERENCE_S", 1e3)  # as if set on a far slower machine: no scaling
        assert slower() == 1.0 and over_budget(1.0, 0.5)
        monkeypatch.setattr(linear, "REFERENCE_S", 1e-3)  # as if set on a far faster one
        assert slower() > 10 and not over_budget(1.0, 0.5)


class TestBuilders:
    def test_repeated(self) -> None:
        assert repeated("ab", 5, "<", ">") == "<abab>"

    def test_scaled_is_whole_at_eight(self) -> None:
        build = scaled("[", ("ab", 16), "]")
        assert build(8) == "[" + "ab" * 16 + "]" and build(1) == "[abab]"
