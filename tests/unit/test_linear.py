"""The growth check the hostile-input tests rely on tells linear work from quadratic work."""

from __future__ import annotations

import re

import pytest

from tests.linear import assert_linear, repeated, scaled


def _each_suffix(text: str) -> int:
    """Quadratic: a search of the rest of the text from every character."""
    return sum(text.count("a", start) for start in range(len(text)))


class TestAssertLinear:
    def test_a_scan_passes(self) -> None:
        assert_linear(re.compile(r"\w+").findall, lambda size: "ab " * size, 300_000)

    def test_work_over_every_suffix_fails(self) -> None:
        with pytest.raises(AssertionError, match="at a quarter"):
            assert_linear(_each_suffix, lambda size: "a" * size, 40_000)

    def test_a_quadratic_regex_fails(self) -> None:
        """Each start position scans the run to its end: the classic quadratic regex."""
        with pytest.raises(AssertionError, match="at a quarter"):
            assert_linear(re.compile(r"a+b").findall, lambda size: "a" * size, 16_000)


class TestBuilders:
    def test_repeated(self) -> None:
        assert repeated("ab", 5, "<", ">") == "<abab>"

    def test_scaled_is_whole_at_four(self) -> None:
        build = scaled("[", ("ab", 8), "]")
        assert build(4) == "[" + "ab" * 8 + "]" and build(1) == "[abab]"
