"""The tally of a burst's exception messages: merged by masked form, most frequent first, bounded."""

from __future__ import annotations

from analysis.event import ErrorEvent, ExceptionInfo
from analysis.intake.tally import count_messages, mask_variable, message_template, tally_messages


class TestTallyMessages:
    def test_messages_that_differ_in_ids_merge(self) -> None:
        """Counts of messages that mask alike add up; the first one seen is the example."""
        tallies = tally_messages({"user 12 not found": 2, "user 7 not found": 3, "timeout": 1})
        assert [(t.message, t.count, t.example) for t in tallies] == [
            ("user <*> not found", 5, "user 12 not found"), ("timeout", 1, "timeout")]

    def test_ties_keep_first_seen_order_and_the_limit_keeps_the_most_frequent(self) -> None:
        """Equal counts stay in the order seen; past `limit`, the rarest go."""
        counts = {"alpha": 1, "beta": 1, "gamma": 5}
        assert [t.message for t in tally_messages(counts)] == ["gamma", "alpha", "beta"]
        assert [t.message for t in tally_messages(counts, limit=2)] == ["gamma", "alpha"]


class TestMaskVariable:
    def test_ids_go_and_quoted_names_stay(self) -> None:
        """Numbers, hex ids, paths and URLs are masked; the quoted expression that failed is not, so two
        null dereferences in one function stay two messages; redaction placeholders stay as they are."""
        customer = 'Cannot invoke "Customer.getAddress()" because "customer" is null'
        cart = 'Cannot invoke "Cart.subtotal()" because "cart" is null'
        assert mask_variable(customer) == customer and mask_variable(cart) == cart
        assert mask_variable("charge ch_691adafdc4a2807a failed after 16977 ms at /srv/app/pay.py") == (
            "charge <*> failed after <*> ms at <*>")
        assert mask_variable("mail to [REDACTED:email] bounced") == "mail to [REDACTED:email] bounced"

    def test_a_template_joins_messages_that_differ_in_ids_only(self) -> None:
        """Same template for different ids; the masked form of each is the same too."""
        first, second = "order 1234 not found", "order 9876 not found"
        assert message_template(first) == message_template(second)
        assert mask_variable(first) == mask_variable(second)


class TestCountMessages:
    def test_the_root_cause_message_is_counted_or_the_log_line_without_one(self) -> None:
        """An exception's own message counts; a message-only error counts its log message."""
        chained = ErrorEvent("s", 1.0, "request failed", exceptions=(
            ExceptionInfo("RuntimeError", "wrapper"), ExceptionInfo("KeyError", "'price'")))
        plain = ErrorEvent("s", 2.0, "disk 91 full")
        tallies = count_messages([chained, chained, plain])
        assert [(t.message, t.count) for t in tallies] == [("'price'", 2), ("disk <*> full", 1)]
