"""Message templates, one test per row of the table in docs/evaluation.md ("Message templates").

Each row lists messages that differ only in what the rule masks: they must share the row's template.
Rows of the second table list messages that must keep apart.
"""

from __future__ import annotations

import random
import re
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.intake import template
from analysis.intake.template import mask_message, mask_uncached
from tests.paths import PROJECT_ROOT


class Row(NamedTuple):
    rule: str
    messages: tuple[str, ...]
    template: str


ROWS = [
    Row("signed and unsigned numbers", ("boot = -4131", "boot = 17", "boot = +3"), "boot = <*>"),
    Row("ids that carry a digit, whatever their sign", (
        "Receiving block blk_-3886404848155419870 src: /10.250.19.102:54106",
        "Receiving block blk_7503483334202473044 src: /10.251.43.210:45125"), "Receiving block <*> src: <*>"),
    Row("hex numbers and ids", ("at 0x7ffd3a2b", "at 0xdeadbeef", "at 3fa9c2e1b7"), "at <*>"),
    Row("ids of hex letters only", ("request deadbeefcafe done", "request abcdefabcdef done"), "request <*> done"),
    Row("UUIDs", ("job 6a1f0c2e-9b7d-4c31-8e0a-55d2c4f1b9aa failed", "job 0f9e8d7c-6b5a-4c3d-9e2f-1a0b9c8d7e6f failed"),
        "job <*> failed"),
    Row("IPs, IP lists and ports", (
        "connect to 10.0.3.7:6379 refused", "connect to 10.0.3.7, 10.0.3.8 refused",
        "connect to 10.1.2.3,10.1.2.4:6380 refused", "connect to fe80::1ff:fe23:4567:890a refused",
        "connect to cache-1.internal:6379 refused", "connect to api.acme.com:443 refused"), "connect to <*> refused"),
    Row("a service name before a port is kept", ("connect to redis:6379 refused", "connect to redis:6380 refused"),
        "connect to redis:<*> refused"),
    Row("durations and sizes with units", (
        "took 30 ms, read 12 KB", "took 1.5 s, read 3 MB", "took 250ms, read 1 bytes",
        "took <1 sec, read 7 GiB", "took 3 minutes, read 12 %"), "took <*>, read <*>"),
    Row("a value restated in parentheses", (
        "sent 1190 bytes (1.16 KB)", "sent 403 bytes", "sent 11 bytes ()"), "sent <*>"),
    Row("file paths", ("cannot open /etc/app/config.yaml", "cannot open ./data/x.csv", "cannot open C:\\app\\x.ini",
                       "cannot open ~/x/y", "cannot open var/lib/x/y.db"), "cannot open <*>"),
    Row("URLs", ("GET https://api.acme.com/v1/orders/12?x=1 failed", "GET http://10.0.0.1:8080/ failed"),
        "GET <*> failed"),
    Row("request routes keep their words, ids masked", (
        "GET /api/users/12 returned 500", "GET /api/users/6a1f0c2e-9b7d-4c31-8e0a-55d2c4f1b9aa returned 503",
        "GET /api/users/deadbeefcafe returned 500"), "GET /api/users/<*> returned <*>"),
    Row("e-mail addresses", ("no account for bob@x.io", "no account for alice.smith+ci@mail.acme.com"),
        "no account for <*>"),
    Row("quoted single values", ("KeyError: 'user_id'", "KeyError: 'email'", 'KeyError: "x-42"'), "KeyError: <*>"),
    Row("values of key=value pairs", (
        "rejected user=root uid=0 reason=expired", "rejected user=guest uid=1000 reason=revoked",
        'rejected user="Jane Doe" uid=12 reason=expired'), "rejected user=<*> uid=<*> reason=<*>"),
    Row("values after key: in one token", ("cancelNotification,index:-1", "cancelNotification,index:7"),
        "cancelNotification,index:<*>"),
    Row("dates and times, with day and month names", (
        "connection from 1.2.3.4 at Sun Jul 3 23:16:09 2005", "connection from 1.2.3.4 at Fri Dec  2 01:02:03 2005",
        "connection from 1.2.3.4 at 2024-05-02T10:14:03.551Z", "connection from 1.2.3.4 at Mon, 2 May 2024 10:14 GMT"),
        "connection from <*> at <*>"),
    Row("host names", ("reverse mapping failed for ns.marryaldkfaczcz.com", "reverse mapping failed for csdnimg.cn",
                       "reverse mapping failed for api.github.com"), "reverse mapping failed for <*>"),
    Row("user names", ("Invalid user admin from 1.2.3.4", "Invalid user oracle from 5.6.7.8"),
        "Invalid user <*> from <*>"),
    Row("redaction placeholders", ("login failed for [REDACTED:email]", "login failed for [REDACTED:ip]"),
        "login failed for <*>"),
    Row("runs and lists of masked values", ("IRQs 3 4 5 6 7 10 11 12 disabled", "IRQs 9 disabled",
                                            "IRQs 3, 4, 5 disabled"), "IRQs <*> disabled"),
]

APART = [
    ("HTTP methods", ('"GET /orders HTTP/1.1" 500', '"POST /orders HTTP/1.1" 500', '"DELETE /orders HTTP/1.1" 500')),
    ("an unknown verb is not a method", ('"XYZ /foo" 500', '"GET /foo" 500')),
    ("routes", ("GET /health failed", "GET /orders failed")),
    ("service names", ("connect to redis:6379 refused", "connect to postgres:5432 refused")),
    ("status words", ("order 12 not found", "order 12 forbidden", "order 12 conflict")),
    ("words around a value", ("user 42 not found", "order 42 not found")),
    ("a word after user that is no name", ("user not found", "user disabled")),
    ("words with a slash", ("I/O error", "n/a error")),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.rule for row in ROWS])
def test_each_rule_gives_its_messages_one_template(row: Row) -> None:
    """Every message of the row gets the row's template."""
    assert [mask_message(message) for message in row.messages] == [row.template] * len(row.messages)


@pytest.mark.parametrize(("rule", "messages"), APART, ids=[rule for rule, _ in APART])
def test_words_stay_words(rule: str, messages: tuple[str, ...]) -> None:
    """Messages that differ in their words keep apart."""
    assert len({mask_message(message) for message in messages}) == len(messages)


def test_every_rule_is_in_the_documented_table() -> None:
    """docs/evaluation.md lists each rule of this file."""
    text = (PROJECT_ROOT / "docs" / "evaluation.md").read_text()
    table = text[text.index("## Message templates"):]
    rules = [row.rule for row in ROWS] + [rule for rule, _ in APART]
    missing = [rule for rule in rules if not re.search(rf"^\| {re.escape(rule)} \|", table, re.MULTILINE)]
    assert not missing


class TestPurity:
    def test_no_state_is_learned(self) -> None:
        """The template of a message is the same with empty caches, warm caches, and computed uncached."""
        messages = [message for row in ROWS for message in row.messages]
        warm = [mask_message(message) for message in messages]
        template._SPANS.clear()
        template._PHRASED.clear()
        cold = [mask_message(message) for message in reversed(messages)][::-1]
        assert warm == cold == [mask_uncached(message) for message in messages]

    def test_messages_sharing_a_shape_share_the_cached_spans(self) -> None:
        """Ids that differ in digits and hex letters hit one cache entry, and still mask their own text."""
        template._SPANS.clear()
        first = mask_message("order 4711 for deadbeefcafe1 failed in 12 ms")
        entries = len(template._SPANS)
        second = mask_message("order 9032 for abcdefabcdef7 failed in 98 ms")
        assert first == second == "order <*> for <*> failed in <*>" and len(template._SPANS) == entries

    def test_fresh_ids_of_digits_and_hex_letters_share_their_shape(self) -> None:
        """Ids whose digits and hex letters fall anywhere (a fresh one in every event) share one cache entry
        per length and first class, and each message is masked on its own text."""
        template._SPANS.clear()
        messages = [f"charge ch_{charge} failed after {ms} ms" for charge, ms in
                    (("8fbcc10aa1e907c5", 812), ("a74d985e7dbb24e2", 934), ("6fd003095fca657d", 441),
                     ("c354f1ec6bbade7c", 707), ("0f3aa81c2b9d4e65", 120), ("dbe0d052e6bacd29", 986))]
        masked = [mask_message(message) for message in messages]
        assert masked == [mask_uncached(message) for message in messages] and len(set(masked)) == 1
        assert len(template._SPANS) == 4  # two shapes (a digit first, a letter first), each with its first text

    @settings(max_examples=300, deadline=None)
    @given(context=st.sampled_from(["{}", "ch_{}", "id={}", "key:{}", "GET /api/{}/items", "{}@example.com",
                                    "'{}'", "host.{}:443", "({})", "{},{}", "x-{}-y", "/srv/{}.log", "{}ms", "{}:8080",
                                    "{}=on", "a,{}=1"]),
           first=st.text(alphabet="0123456789abcdefABCDEF", min_size=1, max_size=24), rng=st.randoms())
    def test_ids_rearranged_within_one_shape_mask_as_uncached(self, context: str, first: str,
                                                               rng: random.Random) -> None:
        """An id, then another with its digits and hex letters moved about (its shape: same length, same
        first class), each mask exactly as its text masked on its own."""
        rest = [*first[1:]]
        rng.shuffle(rest)
        for id_ in (first, first[:1] + "".join(rest)):
            message = f"lookup {context.replace('{}', id_)} failed"
            assert mask_message(message) == mask_uncached(message), message
