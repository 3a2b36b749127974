"""fold_verdicts: what a case's verdict log adds up to, whatever order its entries were written in."""

from __future__ import annotations

import pytest

from store.config import TrustWeights
from store.record import VerdictEntry
from store.verdicts import fold_verdicts

WEIGHTS = TrustWeights()


def entry(at: float, verdict: str, trust_before: float = 0.7, note: str = "", verdict_id: str = "") -> VerdictEntry:
    """A logged verdict; `trust_after` is whatever its writer thought, and the fold ignores it."""
    return VerdictEntry(at, "correct" if verdict == "correct" else "wrong", note or f"{verdict}@{at}",
                        trust_before, -1.0, verdict_id)


class TestFoldVerdicts:
    def test_empty_log_folds_to_nothing(self) -> None:
        """A case nobody judged has no fold: its row keeps the analyzer's trust."""
        assert fold_verdicts([], WEIGHTS) is None

    def test_time_order_from_the_earliest_trust(self) -> None:
        """Entries fold oldest first from the first one's trust_before (the unreviewed 0.7): correct sets
        the human weight, wrong halves the lower of the trust so far and the unreviewed trust; feedback is
        corrects less wrongs; the note is the latest one."""
        log = [entry(3.0, "wrong", 0.2), entry(1.0, "wrong"), entry(2.0, "correct", 0.35), entry(4.0, "wrong")]
        fold = fold_verdicts(log, WEIGHTS)
        assert fold is not None
        assert [(e.at, e.trust_before, e.trust_after) for e in fold.entries] == [
            (1.0, 0.7, pytest.approx(0.35)), (2.0, pytest.approx(0.35), 1.0), (3.0, 1.0, pytest.approx(0.35)),
            (4.0, pytest.approx(0.35), pytest.approx(0.175))]
        assert (fold.trust, fold.feedback, fold.note) == (pytest.approx(0.175), -2.0, "wrong@4.0")

    def test_a_wrong_after_a_correct_stands_below_unreviewed(self) -> None:
        """A person's latest word is wrong: the case ranks below an unreviewed heuristic case (0.4), not at
        half the human weight (0.5)."""
        fold = fold_verdicts([entry(1.0, "correct"), entry(2.0, "wrong")], WEIGHTS)
        assert fold is not None
        assert fold.trust == pytest.approx(0.35)
        assert fold.trust < WEIGHTS.heuristic

    def test_every_writer_folds_the_same_entries_alike(self) -> None:
        """The order of the entries as read does not matter, ties in time included."""
        log = [entry(1.0, "wrong", note="b"), entry(1.0, "correct", note="a"), entry(1.0, "wrong", note="a")]
        folds = {fold_verdicts(order, WEIGHTS) for order in (log, log[::-1], [log[1], log[0], log[2]])}
        assert len(folds) == 1

    def test_a_verdict_id_counts_once(self) -> None:
        """Two replicas that both appended one redelivered verdict: the earlier copy counts, the later
        is skipped; entries without an id all count."""
        log = [entry(1.0, "wrong", verdict_id="m:0:7"), entry(2.0, "wrong"), entry(3.0, "wrong", verdict_id="m:0:7"),
               entry(4.0, "wrong")]
        fold = fold_verdicts(log, WEIGHTS)
        assert fold is not None
        assert [e.at for e in fold.entries] == [1.0, 2.0, 4.0]
        assert fold.feedback == -3.0 and fold.trust == pytest.approx(0.7 * WEIGHTS.wrong_factor ** 3)

    def test_matches_a_row_only_when_all_three_agree(self) -> None:
        """A row holds the fold when its trust, feedback and note all equal it."""
        fold = fold_verdicts([entry(1.0, "wrong", note="cache")], WEIGHTS)
        assert fold is not None
        assert fold.matches({"trust": 0.35, "feedback": -1.0, "feedback_note": "cache"})
        assert not fold.matches({"trust": 0.35, "feedback": 0.0, "feedback_note": "cache"})
        assert not fold.matches({"trust": 0.7, "feedback": -1.0, "feedback_note": "cache"})
        assert not fold.matches({"trust": 0.35, "feedback": -1.0, "feedback_note": ""})
