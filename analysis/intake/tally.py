"""The distinct exception messages of a burst: messages as logged, counted, merged by their masked form.

A burst is one signature, but one signature can carry several failures: two null dereferences in one
function (the fingerprint ignores line numbers), say. Counting the masked messages shows them ("2 distinct
messages") without splitting the burst. The mask here is lighter than the grouping one: it hides what
varies per event (numbers, ids, hex, addresses, paths) but keeps quoted text, which names the failing
expression (`because "cart" is null`) as often as it carries a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from analysis.event import ErrorEvent, MessageTally

__all__ = ["MAX_DISTINCT_MESSAGES", "count_key", "count_messages", "mask_variable", "message_template",
           "tally_messages"]

MAX_DISTINCT_MESSAGES = 10
"""Distinct messages a tally keeps, the most frequent ones."""
_EXAMPLE_CHARS = 300
_INPUT_CHARS = 512
_VARIABLE = re.compile("|".join((
    r"\[REDACTED:\w{1,40}\]",  # already a placeholder: kept as it is (replaced by itself below)
    # A scheme or local part is tried only where it can start, not at every dot of a dotted run.
    r"(?<![\w+.-])[A-Za-z][\w+.-]{0,30}://[^\s\"'<>]+",  # URLs
    r"(?<![\w.%+-])[\w.%+-]{1,64}@[\w-]+(?:\.[\w-]+)+",  # e-mail addresses
    r"(?<![\w/.])(?:/[\w.@~+-]+)+/?",  # absolute paths
    r"\b[A-Za-z]:\\[^\s\"']*",  # Windows paths
    r"\b[0-9a-fA-F]{8,}\b",  # hex ids and digests
    r"\b\w*\d[\w.:+-]*",  # anything carrying a digit: numbers, ids, IPs, times, versions
)))
# Digits to 0 and hex letters to a/A: messages that differ only in ids share this template. A byte table
# is several times cheaper than str.translate, and the UTF-8 encoding is one-to-one.
_HEX_DIGITS = b"0123456789abcdefABCDEF"
_TEMPLATE = bytes.maketrans(_HEX_DIGITS, b"0000000000aaaaaaAAAAAA")


def mask_variable(text: str) -> str:
    """`text` with the parts that vary per event replaced by `<*>`, quoted text kept, spaces squeezed."""
    masked = _VARIABLE.sub(lambda m: m.group() if m.group().startswith("[REDACTED:") else "<*>",
                           text[:_INPUT_CHARS])
    return " ".join(masked.split())


def message_template(text: str) -> bytes:
    """A cheap key under which messages that differ only in digits and hex letters meet (no regex)."""
    return text[:_INPUT_CHARS].encode("utf-8", "surrogatepass").translate(_TEMPLATE)


def count_key(text: str) -> bytes:
    """A coarser key than `message_template`, for counting alone: digits and hex letters dropped, so that
    numbers of any length and ids of any spelling (a UUID's letters and digits interleave differently in
    each) meet. Words of hex letters alone meet too (`bad`, `dead`): the count goes to the first one seen."""
    return text[:_INPUT_CHARS].encode("utf-8", "surrogatepass").translate(None, _HEX_DIGITS)


def tally_messages(counts: Mapping[str, int], limit: int = MAX_DISTINCT_MESSAGES) -> tuple[MessageTally, ...]:
    """`counts` (message as logged → events) merged by masked message, most frequent first, at most
    `limit`; ties keep the order the messages were first seen in."""
    merged: dict[str, list[int | str]] = {}
    for message, count in counts.items():
        masked = mask_variable(message)
        entry = merged.get(masked)
        if entry is None:
            merged[masked] = [count, message[:_EXAMPLE_CHARS]]
        else:
            entry[0] = int(entry[0]) + count
    ranked = sorted(merged.items(), key=lambda item: -int(item[1][0]))
    return tuple(MessageTally(masked, int(count), str(example)) for masked, (count, example) in ranked[:limit])


def count_messages(events: Iterable[ErrorEvent], limit: int = MAX_DISTINCT_MESSAGES) -> tuple[MessageTally, ...]:
    """The tally of `events`' exception messages (for a burst nobody counted, such as a sample)."""
    counts: dict[str, int] = {}
    for event in events:
        message = event.exception_message
        counts[message] = counts.get(message, 0) + 1
    return tally_messages(counts, limit)
