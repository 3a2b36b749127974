"""The readable form of an analysis: every part an on-call reader needs, and no terminal tricks from logs."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from analysis.report import (
    NO_TRACE_NOTE,
    Analysis,
    ClusterInfo,
    ExceptionMessage,
    Fix,
    Location,
    PastCaseRef,
    Suspect,
    SuspectCommit,
)
from consumer.cli.common import terminal
from consumer.cli.render import CodeLines, excerpt_of, print_analysis, print_case, print_cases
from demo.report import bursts
from store import CitedRange
from store.record import CaseDetail, CaseSummary

ESCAPE = "\x1b]0;pwned\x07\x1b[2J"


def _analysis(**changes: object) -> Analysis:
    base = Analysis(
        analysis_id="a-1", status="analyzed", analyzer="llm", model="coder:7b", commit="c" * 40,
        cluster=ClusterInfo(
            server="checkout", tenant="acme", fingerprint="f" * 16,
            exception_type="java.lang.NullPointerException", first_seen=1_750_000_000.0,
            last_seen=1_750_000_125.0, count=10,
            exception_messages=[ExceptionMessage(message="customer <*> is null", count=7,
                                                 example="customer 42 is null"),
                                ExceptionMessage(message=f"cart is null {ESCAPE}", count=3)]),
        root_cause="The customer lookup returns null for guests.",
        culprit=Location(path="src/Checkout.java", line=25, function="placeOrder"),
        suspects=[Suspect(path="src/Checkout.java", line=25, function="placeOrder", score=0.9, reason="raised here"),
                  Suspect(path="src/Customers.java", line=12, function="findById", score=0.6,
                          reason="returns the null")],
        fix=Fix(path="src/Checkout.java", before="var c = customers.findById(id);",
                after="var c = customers.findById(id).orElseThrow();", explanation="Fail with a clear error."),
        confidence=0.8,
        past_cases=[PastCaseRef(memory_id="m-1", score=0.82, stale=False, verdict="wrong", trust=0.35,
                                note="the null comes from the cache"),
                    PastCaseRef(memory_id="m-2", score=0.5, stale=True, stale_reasons=["changed src/A.java:3-4"])],
        suspect_commits=[SuspectCommit(sha="d" * 40, summary="Guest checkout", author="Ann", date="2025-06-01")],
    )
    return base.model_copy(update=changes)


def _render(analysis: Analysis, code: CodeLines | None = None) -> str:
    out = io.StringIO()
    print_analysis(Console(file=out, force_terminal=False, width=120), analysis, code)
    return out.getvalue()


class TestAnalysisView:
    def test_shows_every_part_of_the_analysis(self) -> None:
        """Status, server, count, span, exception and message, culprit with its code, root cause, the fix as
        a diff, ranked suspects, suspect commits and past cases with their verdicts."""
        code = CodeLines("src/Checkout.java", 24, ("  var c = customers.findById(id);", "  c.getAddress();"), 25)
        text = _render(_analysis(), code)
        assert "analyzed" in text and "checkout" in text and "10 events" in text and "(2m 05s)" in text
        assert "java.lang.NullPointerException: customer <*> is null  (first as logged: customer 42 is null)" in text
        assert "2 distinct messages" in text and "7×  customer <*> is null" in text
        assert "src/Checkout.java:25 placeOrder" in text
        assert "❱ 25 │   c.getAddress();" in text
        assert "The customer lookup returns null for guests." in text
        assert "-var c = customers.findById(id);" in text and "+var c = customers.findById(id).orElseThrow();" in text
        assert "1. 0.90  src/Checkout.java:25 placeOrder" in text and "2. 0.60  src/Customers.java:12" in text
        assert "dddddddddddd 2025-06-01  Ann: Guest checkout" in text
        assert "marked wrong  m-1  score 0.82  trust 0.35" in text and '"the null comes from the cache"' in text
        assert "no verdict  m-2" in text and "STALE: changed src/A.java:3-4" in text

    def test_review_reasons_and_notes_are_shown(self) -> None:
        """An analysis that needs review says so first among its closing sections, with each reason."""
        text = _render(_analysis(needs_review=True, notes=["analysed at c1, not at the event's commit c0"],
                                 review_reasons=["culprit line unverified: src/Checkout.java:25 changed"]))
        assert "Needs review" in text and "!  culprit line unverified: src/Checkout.java:25 changed" in text
        assert "-  analysed at c1, not at the event's commit c0" in text

    def test_log_text_cannot_drive_the_terminal(self) -> None:
        """Escape sequences and bells in logged text are shown escaped, never emitted."""
        text = _render(_analysis())
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b]0;pwned\\x07" in text

    def test_one_message_says_no_count_and_the_excerpt_stands_in_for_code(self) -> None:
        """A burst with one message lists no tally; a heuristic root cause's excerpt is shown as the code."""
        root_cause = "KeyError at app.py:3 in total.\n\nCode at app.py:\n2| def total(o):\n3|     return o['price']"
        analysis = _analysis(root_cause=root_cause, culprit=Location(path="app.py", line=3, function="total"),
                             cluster=_analysis().cluster.model_copy(update={"exception_messages": [
                                 ExceptionMessage(message="<*>", count=10, example="'price'")]}))
        text = _render(analysis)
        assert "distinct messages" not in text
        assert "❱ 3 │     return o['price']" in text
        assert text.count("Code at app.py") == 0
        excerpt = excerpt_of(root_cause)
        assert excerpt is not None and (excerpt.first, len(excerpt.lines)) == (2, 2)

    def test_a_log_message_without_a_trace_says_so(self) -> None:
        """No exception type: the headline names the burst a log message, and the missing culprit is for
        want of a trace, not of a frame in the repository (which a trace whose frames map nowhere gets)."""
        cluster = _analysis().cluster.model_copy(update={"exception_type": ""})
        text = _render(_analysis(cluster=cluster, culprit=None, notes=[NO_TRACE_NOTE]))
        assert "(a log message, no exception): customer <*> is null" in text
        assert "Culprit  none: the log carries no stack trace" in text
        assert "Culprit  none: no frame of the trace maps to this repository" in _render(_analysis(culprit=None))

    def test_piped_output_keeps_each_path_on_its_line(self) -> None:
        """Piped into a file or `grep`, the console was 80 columns wide and broke long paths in two."""
        path = "services/payments/internal/deep/package/src/main/java/com/acme/payments/CheckoutService.java"
        out = io.StringIO()
        print_analysis(terminal(out), _analysis(suspects=[Suspect(path=path, line=25, function="placeOrder", score=0.9,
                                                                  reason="raised here")]))
        assert f"1. 0.90  {path}:25 placeOrder" in out.getvalue()

    def test_a_case_without_a_culprit_says_none_as_everywhere(self) -> None:
        """`memory list` printed `(none)`, the demo `(no culprit)`, `analyze` `none: …`: one word now."""
        case = _case(cited=(), commit=None, checked_against=None).summary
        out = io.StringIO()
        print_cases(Console(file=out, force_terminal=False, width=120), [case])
        assert "culprit     none" in out.getvalue() and "(none)" not in out.getvalue()
        assert "    culprit     none" in bursts([_analysis(culprit=None)])


def _case(*, cited: tuple[CitedRange, ...], commit: str | None, checked_against: str | None) -> CaseDetail:
    summary = CaseSummary(memory_id="m-1", server="shop", tenant="acme", scope="default", fingerprint="f" * 16,
                          exception_type="KeyError", status="analyzed", analyzer="llm", trust=0.7, feedback=0.0,
                          created_at=1_750_000_000.0, expires_at=1_760_000_000.0, commit=commit)
    return CaseDetail(summary=summary, error_text="KeyError: 'price'", analysis={}, verdicts=(),
                      trust_history=(), age_s=60.0, max_age_s=90 * 86_400.0, expired=False, stale=False,
                      checked_against=checked_against, cited_files=cited)


class TestCaseFreshness:
    @pytest.mark.parametrize(("cited", "commit", "against", "said"), [
        ((), "a" * 40, "b" * 40, "it cites no code lines, so only its age can make it stale"),
        ((), "a" * 40, None, "it cites no code lines, so only its age can make it stale"),
        ((CitedRange("app/shop.py", 3, 4),), "a" * 40, "b" * 40, "its cited lines are unchanged at bbbbbbbbbbbb"),
        ((CitedRange("app/shop.py", 3, 4),), "a" * 40, None,
         "its cited lines were not compared with the code (--repo compares them)"),
        ((CitedRange("app/shop.py", 3, 4),), None, "b" * 40,
         "its cited lines cannot be compared with the code: the case records no commit"),
    ], ids=["message-only, with --repo", "message-only", "compared", "not compared", "no commit"])
    def test_the_freshness_line_says_what_was_checked(
        self, cited: tuple[CitedRange, ...], commit: str | None, against: str | None, said: str,
    ) -> None:
        """A case that cites no code is never said to have unchanged cited lines (it was, with --repo), nor
        one whose lines could not be compared for want of a commit."""
        out = io.StringIO()
        print_case(Console(file=out, force_terminal=False, width=200), _case(cited=cited, commit=commit,
                                                                            checked_against=against))
        (line,) = [line for line in out.getvalue().splitlines() if "freshness" in line]
        assert line.split("freshness", 1)[1].strip() == f"fresh: 1m 00s old, stale past 90.0 days; {said}"
