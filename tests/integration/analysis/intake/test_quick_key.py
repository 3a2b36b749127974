"""The quick key equals the full path's on real traces of four languages in all four input shapes.

Python, Node.js and Java traces come from really running the bench's buggy services here; Go panics
from files recorded by really running its Go service (tests/fixtures/realtraces_go). Every event is
read by `KeyCache` and by the full path (decode, redact, fingerprint): every field must agree, the
message as the module documents (its template's first message in the burst, redacted).
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.quick_key import EventKey, KeyCache, full_keys
from analysis.intake.redact import RedactionConfig, Redactor
from analysis.intake.tally import message_template
from bench.programs import MARKER_ID
from bench.realtraces import capture
from bench.workload import encode
from tests.paths import TRACES

pytestmark = pytest.mark.integration

GO_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "realtraces_go"
# What the JVM prints for a fast-thrown NullPointerException (OmitStackTraceInFastThrow): its type line alone.
JAVA_FAST_THROW = (TRACES / "java_fast_throw.txt").read_text().strip()
PYTHON_TYPE_LINE = (TRACES / "python_pricing.txt").read_text().strip().rpartition("\n")[2]
SHAPES = ("native", "ecs", "logstash", "otel")
HOSTILE = (
    "\nTraceback (most recent call last):", "\n\tat com.evil.Thing.run(Thing.java:9)",
    "\nCaused by: java.lang.Error: x", "\ngoroutine 1 [running]:", "\n    at evil (/srv/evil.js:1:1)",
    "\n  | nested", "\n  + 1", "\r\nsecond line", "\u2028more", "\n    [cause]: Error: inner", "panic: again",
    ' File "/srv/x.py", line 3, in f', "\n... 3 more", "\nSuppressed: java.lang.Error: s",
    "\nDuring handling of the above exception, another exception occurred:", " alice@example.com",
    " 4111 1111 1111 1111", " password=hunter22", "\n",
)  # fmt: skip


def _traces() -> list[tuple[str, str, str, str, list[dict[str, Any]]]]:
    """(language, type, value, text, structured chain) of every captured trace."""
    if not (shutil.which("javac") and shutil.which("java") and shutil.which("node")):
        pytest.fail("the quick-key test runs the Java and Node.js services: javac, java and node must be on PATH")
    found = []
    for language, domain, deploy in (("python", "orders", 0), ("python", "orders", 1), ("node", "catalog", 0),
                                     ("node", "catalog", 1), ("java", "inventory", 0), ("java", "shipping", 1)):
        for trace in capture(language, domain, deploy):
            found.append((language, trace.exc_type, trace.value, trace.text, list(trace.chain)))
    go = sorted(GO_FIXTURES.glob("*.txt"))
    assert len(go) >= 12, f"recorded Go panics missing in {GO_FIXTURES}"
    for path in go:
        text = path.read_text(encoding="utf-8").rstrip("\n")
        found.append(("go", "panic", text.partition("\n")[0].removeprefix("panic: "), text, []))
    return found


@pytest.fixture(scope="module")
def traces() -> list[tuple[str, str, str, str, list[dict[str, Any]]]]:
    return _traces()


# Failures without frames, as (language "none", type, message, trace, []): each event fills `{hex}`, `{n}` and
# `{card}` afresh. Their signature reads the redacted message, which redaction changes (an e-mail address) or
# not, depending on the very digits (a card number that passes the Luhn check or not).
WITHOUT_FRAMES = (
    ("none", "", "Payment provider returned HTTP 503 for charge ch_{hex} after {n} ms", "", []),
    ("none", "", "Failed to send receipt to customer{n}@example.org: connection reset by peer", "", []),
    ("none", "", "card 4111 1111 1111 {card} declined", "", []),
    ("none", "", "Upstream refused Authorization: Bearer {letters} after {n} ms", "", []),  # masked only redacted
    ("none", "TimeoutError", "Timeout after {n} ms calling inventory at 10.0.{n}.1", "", []),
    ("none", "ValueError", "", "", []),  # a type without a message: the log message counts
    ("none", "BadGateway", "", "upstream said {n}", []),  # a trace field that is no trace
    ("none", "BadGateway", "", "@message", []),  # ... but the log message itself
    ("none", "", "", PYTHON_TYPE_LINE.replace("4711", "{n}"), []),  # a trace field holding a type line alone
)  # fmt: skip


def _fill(template: str, rng: random.Random) -> str:
    letters = "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=28))
    return template.replace("{hex}", f"{rng.getrandbits(64):016x}").replace("{n}", str(rng.randrange(1, 30000))) \
        .replace("{card}", f"{rng.randrange(10000):04d}").replace("{letters}", letters)


def _record(trace: tuple[str, str, str, str, list[dict[str, Any]]], shape: str, rng: random.Random,
            hostile: str, where: str, moved: int) -> bytes:
    language, exc_type, value, text, chain = trace
    request_id = str(rng.randrange(10**9, 10**10))
    text, value = text.replace(MARKER_ID, request_id), value.replace(MARKER_ID, request_id)
    if language == "none":
        text, value = _fill(text, rng), _fill(value, rng)
    if language == "go":  # a new goroutine, new argument words (pointers) in every event
        text = re.sub(r"^goroutine \d+ \[running\]:", f"goroutine {rng.randint(1, 99999)} [running]:", text,
                      count=1, flags=re.MULTILINE)
        text = re.sub(r"\b0x[0-9a-f]{6,}\b", lambda _: hex(0xC000000000 + rng.getrandbits(24)), text)
    if moved:  # a deploy that moved the lines
        text = re.sub(r"(\.(?:py|js|java|go)\"?(?:, line |:))(\d+)", lambda m: f"{m[1]}{int(m[2]) + moved}", text)
    if where == "trace" and value and value in text:
        text = text.replace(value, value + hostile, 1)
    message = (value if language == "none" and value else f"GET /{language}/{request_id} failed") + \
        (hostile if where == "message" else "")
    exc_value = value + (hostile if where == "value" else "") if exc_type or language != "none" else ""
    server = f"{language}-svc"
    if language == "none":
        where = "" if where in ("logged", "second") else where
        text = message if text == "@message" else text
        server = rng.choice((server, "other-svc"))  # one failure, two servers
        record = encode(shape, server=server, message=message, commit="c1", now=1_733_000_000.0 + rng.random(),
                        exc_type=exc_type, exc_value=exc_value, trace=text)
    elif where == "logged":  # the trace logged as the message, beside type fields and a trace field of none
        record = encode(shape, server=server, message=text, commit="c1", now=1_733_000_000.0 + rng.random(),
                        exc_type=exc_type, exc_value=exc_value, trace=rng.choice(("", "n/a", JAVA_FAST_THROW)))
    elif where == "second" and shape != "otel":  # the trace in a trace field after one that holds none
        filler = rng.choice(("", "n/a", JAVA_FAST_THROW, text.partition("\n")[0]))
        if shape == "native":
            record = {"server_id": server, "timestamp": 1_733_000_000.5, "message": message, "commit": "c1",
                      "exception": {"type": exc_type, "value": exc_value, "stacktrace": []},
                      "error": {"stack_trace": text}}
        else:
            record = encode(shape, server=server, message=message, commit="c1", now=1_733_000_000.0 + rng.random(),
                            exc_type=exc_type, exc_value=exc_value, trace=text)
            record["stack_trace" if shape == "ecs" else "exception"] = filler
    elif shape == "native" and chain:
        fresh = [{**exc, "value": exc["value"].replace(MARKER_ID, request_id)} for exc in chain]
        record = encode("native", server=server, message=message, commit="c1", now=1_733_000_000.0 + moved,
                        exc_type=exc_type, exc_value=exc_value, frames=fresh[0]["stacktrace"],
                        chained=fresh[1:] or None)
    elif shape == "native":
        record = {"server_id": server, "timestamp": 1_733_000_000.5, "message": message, "exception": text,
                  "commit": "c1"}
    else:
        record = encode(shape, server=server, message=message, commit="c1", now=1_733_000_000.0 + rng.random(),
                        exc_type=exc_type, exc_value=exc_value, trace=text)
    if where == "tenant":  # a tenant of the record's own (an OTLP record: an attribute of it)
        tenant = rng.choice(["acme", "globex", 7])
        if shape != "otel":
            record["tenant"] = tenant
        else:
            # Under any of its spellings, of the record's attributes or of its resource's.
            holder = rng.choice((record["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0],
                                 record["resourceLogs"][0]["resource"]))
            value = {"stringValue": tenant} if type(tenant) is str else {"intValue": tenant}
            holder["attributes"].append({"key": rng.choice(("tenant", "organization.id", "labels.tenant")),
                                         "value": value})
    if where == "spelled" and shape == "otel":  # the exception attributes named as other conventions name them
        other = {"exception.type": "error.type", "exception.message": "error.message",
                 "exception.stacktrace": rng.choice(("error.stack_trace", "stack_trace"))}
        for attribute in record["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["attributes"]:
            attribute["key"] = other.get(attribute["key"], attribute["key"])
    if where == "field":  # a field of the wrong type, or a scalar that is not what it should be
        target = record["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0] if shape == "otel" else record
        key = rng.choice([*target, "traceId"] if shape == "otel" else [*target])
        target[key] = rng.choice([5, None, [1], {"a": 1}, True, 1.5, "", "0"])
    return orjson.dumps(record)


def _batch(exports: list[bytes], joined: list[bool] | None = None) -> bytes:
    """One OTLP export of the records of several, as the Collector batches them: each record under its own
    resource, shared with the records before it that have the same, or (`joined`) under the first one."""
    doc = orjson.loads(exports[0])
    resources = doc["resourceLogs"]
    for index, export in enumerate(exports[1:]):
        (resource,) = orjson.loads(export)["resourceLogs"]
        same = [r for r in resources if r["resource"] == resource["resource"]]
        if joined is not None and joined[index]:
            same = resources
        if same:
            same[0]["scopeLogs"][0]["logRecords"] += resource["scopeLogs"][0]["logRecords"]
        else:
            resources.append(resource)
    return orjson.dumps(doc)


def _read(read: Any, raw: bytes) -> list[EventKey] | str:
    try:
        return list(read(raw))
    except BadInput as bad:
        return bad.reason


class TestQuickKey:
    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def test_every_field_equals_the_full_path(self, traces: list[Any], data: st.DataObject) -> None:
        """Repeated, moved, hostile and badly typed events of real traces and of failures without frames, alone
        or in OTLP exports of several records, under a deployment's one tenant or none: the quick key is the
        full path's."""
        config = DecodeConfig(tenant=data.draw(st.sampled_from(("", "", "acme"))))
        redactor = Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        rng = random.Random(data.draw(st.integers(0, 2**32)))
        first_by_template: dict[tuple[str, str, str, bytes], str] = {}
        failures = st.one_of(st.sampled_from(traces), st.sampled_from(WITHOUT_FRAMES))
        pool = data.draw(st.lists(failures, min_size=1, max_size=3))  # so that failures repeat

        def record(shape: str) -> bytes:
            where = data.draw(st.sampled_from(("", "", "", "trace", "message", "value", "field", "tenant", "logged",
                                                "second", "spelled")))
            return _record(data.draw(st.sampled_from(pool)), shape, rng, data.draw(st.sampled_from(HOSTILE)), where,
                           data.draw(st.sampled_from((0, 0, 3))))

        for _ in range(data.draw(st.integers(1, 16))):
            shape = data.draw(st.sampled_from(SHAPES))
            raw = record(shape)
            if shape == "otel" and (more := data.draw(st.integers(0, 5))):
                raw = _batch([raw, *[record(shape) for _ in range(more)]],
                             data.draw(st.lists(st.booleans(), min_size=more, max_size=more)))
            quick = _read(lambda r: cache.read(r, 1.0), raw)
            full = _read(lambda r: full_keys(r, config, redactor, 1.0), raw)
            if isinstance(full, str):
                assert quick == full
                continue
            assert not isinstance(quick, str)
            assert [key[:6] for key in quick] == [key[:6] for key in full]
            for key, event, full_key in zip(quick, decode_message(raw, config, 1.0), full, strict=True):
                template = (*full_key[:3], message_template(event.exception_message))
                first_by_template.setdefault(template, full_key.message)
                assert key.message == (first_by_template[template] if len(event.exception_message) <= 512
                                       else full_key.message)

    def test_repeated_real_traces_hit_in_every_shape_and_language(self, traces: list[Any]) -> None:
        """After the first event of a failure, its repeats (fresh ids, new goroutines and argument words) are
        read from the cache."""
        cache = KeyCache(DecodeConfig(), Redactor(RedactionConfig()))
        rng = random.Random(7)
        for trace in traces:
            for shape in SHAPES:
                if shape == "native" and trace[0] != "python":
                    continue
                before = cache.hits
                for _ in range(5):
                    cache.read(_record(trace, shape, rng, "", "", 0), 1.0)
                # 5 when an earlier trace is the same failure (a Go service run again: other argument words)
                assert cache.hits - before >= 4, (trace[0], shape, trace[3][:200])

    def test_failures_without_frames_hit_in_every_shape_and_stay_exact(self) -> None:
        """Failures without frames, with fresh ids and secrets in every event: their repeats are read from the
        cache, each key equal to the full path's (the fingerprint of the redacted message)."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        rng = random.Random(5)
        for failure in WITHOUT_FRAMES:
            for shape in SHAPES:
                before = cache.hits
                for _ in range(8):
                    raw = _record(failure, shape, rng, "", "", 0)
                    assert [k[:6] for k in cache.read(raw, 1.0)] == [k[:6] for k in full_keys(raw, config, redactor,
                                                                                                1.0)], raw
                # The first event on each of the two servers is new. A type without a message over a trace field
                # that is no trace is read in full: the signature reads the log message unless the field holds
                # it (compared redacted).
                if not (failure[1] and not failure[2] and failure[3] and shape in ("ecs", "otel")):
                    assert cache.hits - before >= 6, (failure, shape)

    def test_a_root_message_that_redacts_to_nothing_reads_the_log_message(self, traces: list[Any]) -> None:
        """An exception message of terminal codes alone redacts to "": the redacted event then reads the log
        message (its signature, without frames, and the text carried, under the log message's template).
        Repeats read quickly signed the empty message instead, and every event carried the first one's log
        message (two attacker reviews)."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        java = next(trace for trace in traces if trace[0] == "java")
        logged = ["payment failed for order 17", "payment failed for order 18", "ledger locked by batch job",
                  "TLS handshake with 203.0.113.9 failed", "payment failed for order 19"]
        carried = ["payment failed for order 17", "payment failed for order 17", "ledger locked by batch job",
                   "TLS handshake with [REDACTED:ipv4] failed", "payment failed for order 17"]
        for stacked in (False, True):
            cache = KeyCache(config, redactor)
            for n, (message, code) in enumerate(zip(logged, "mmmKm", strict=True)):
                record = {"server_id": "payments", "timestamp": 1_733_000_000.5 + n, "error.type": "CardError",
                          "error.message": f"\x1b[0{code}", "message": message}
                if stacked:  # the trace's own header line holds the codes
                    del record["error.type"], record["error.message"]
                    record["error.stack_trace"] = f"com.acme.CardError: \x1b[0{code}\n{java[3].partition(chr(10))[2]}"
                raw = orjson.dumps(record)
                quick, full = cache.read(raw, 1.0), full_keys(raw, config, redactor, 1.0)
                assert quick[0][:6] == full[0][:6], (stacked, n)
                assert quick[0].message == carried[n], (stacked, n)
            assert cache.hits >= (3 if stacked else 0), stacked  # no frames: each such event is read in full

    @pytest.mark.parametrize("attribute", ["exception.message", "error.message", "exception.type", "stack_trace"])
    def test_a_wrongly_typed_exception_attribute_is_refused_as_in_full(self, traces: list[Any], attribute: str) -> None:
        """A record whose trace is read, with a message or type attribute that is no text: the full path says
        `wrong_type`; a warm cache answered it (attacker review), so the record was counted, not refused."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        java = next(trace for trace in traces if trace[0] == "java")
        rng = random.Random(3)
        for _ in range(3):
            cache.read(_record(java, "otel", rng, "", "", 0), 1.0)
        doc = orjson.loads(_record(java, "otel", rng, "", "", 0))
        doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["attributes"].append(
            {"key": attribute, "value": {"intValue": "5"}})
        raw = orjson.dumps(doc)
        assert _read(lambda r: cache.read(r, 1.0), raw) == _read(lambda r: full_keys(r, config, redactor, 1.0), raw) \
            == "wrong_type"

    def test_exports_of_several_records_hit_once_each_failure_is_known(self, traces: list[Any]) -> None:
        """OTLP exports batch records of several failures and servers, a new mix each time: once every
        failure was seen, every export is read from the cache, each record's key equal to the full path's."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        rng = random.Random(9)
        failures = [next(t for t in traces if t[0] == language) for language in ("python", "node", "java", "go")]
        failures += WITHOUT_FRAMES[:4]
        for failure in failures:
            for _ in range(8):  # alone, on each of its servers (a failure without frames has two)
                cache.read(_record(failure, "otel", rng, "", "", 0), 1.0)
        before = cache.hits
        for _ in range(20):
            exports = [_record(rng.choice(failures), "otel", rng, "", "", 0) for _ in range(rng.randint(2, 6))]
            raw = _batch(exports)
            assert [k[:6] for k in cache.read(raw, 1.0)] == [k[:6] for k in full_keys(raw, config, redactor, 1.0)]
        assert cache.hits - before == 20

    def test_churn_every_trace_new_is_read_in_full_and_right(self, traces: list[Any]) -> None:
        """A stream where every trace is new (a fresh function in every frame) misses and stays exact."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        rng = random.Random(11)
        for index, trace in enumerate(traces * 2):
            language, exc_type, value, text, chain = trace
            renamed = re.sub(r"\b(handle|Handle|lookup|view)\b", rf"\g<1>x{index}", text)
            fresh = (language, exc_type, value, renamed, chain)
            raw = _record(fresh, "ecs", rng, "", "", 0)
            assert [k[:6] for k in cache.read(raw, 1.0)] == [k[:6] for k in full_keys(raw, config, redactor, 1.0)]

    def test_huge_trace_is_exact(self, traces: list[Any]) -> None:
        """A trace past the parse cache's size limit (its frames repeated) is still read exactly."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        language, exc_type, value, text, chain = next(t for t in traces if t[0] == "java")
        head, _, frames = text.partition("\n")
        huge = (language, exc_type, value, head + ("\n" + frames) * 200, chain)
        for seed in range(3):
            raw = _record(huge, "logstash", random.Random(seed), "", "", 0)
            assert [k[:6] for k in cache.read(raw, 1.0)] == [k[:6] for k in full_keys(raw, config, redactor, 1.0)]


class TestSkeletonKey:
    def test_values_equal_in_python_but_not_in_json_never_share_an_entry(self, traces: list[Any]) -> None:
        """`1`, `1.0`, `true` and `"1"` in a skeleton field: a tuple would call them equal, decoding does not."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        cache = KeyCache(config, redactor)
        trace = next(t for t in traces if t[0] == "java")
        rng = random.Random(3)
        for level in (1, "1", 1.0, True, 1, True, "1", 1.0, 50, "error", 50):
            record = orjson.loads(_record(trace, "logstash", rng, "", "", 0))
            record["level"] = level
            raw = orjson.dumps(record)
            quick, full = (_read(read, raw) for read in (lambda r: cache.read(r, 1.0),
                                                          lambda r: full_keys(r, config, redactor, 1.0)))
            assert (quick if isinstance(quick, str) else [k[:6] for k in quick]) == \
                (full if isinstance(full, str) else [k[:6] for k in full]), level
        assert cache.hits == 3  # the repeats of 1, "1" and 50 were read from the cache


class TestCarriedMessage:
    def test_messages_of_one_template_carry_the_first_redacted(self) -> None:
        """Ids that differ only in digits share the first message's redacted text; a secret never leaves."""
        cache = KeyCache(DecodeConfig(), Redactor(RedactionConfig()))

        def message(text: str) -> str:
            raw = orjson.dumps({"server_id": "s", "timestamp": 1.0, "message": text,
                                "exception": {"type": "E", "value": text, "stacktrace": [
                                    {"filename": "a.py", "function": "f", "lineno": 1, "in_app": True}]}})
            return cache.read(raw, 1.0)[0].message

        assert message("order 1234 failed") == "order 1234 failed"
        assert message("order 9876 failed") == "order 1234 failed"  # counted under the first one's line
        assert message("mail bob@example.com") == "mail [REDACTED:email]"
        assert "dab@example.com" not in message("mail dab@example.com")
        # The documented change: a number redaction depends on (a card passing the Luhn check) counts
        # under its template's first message, which was no card.
        assert message("card 4111 1111 1111 1112") == "card 4111 1111 1111 1112"
        assert message("card 4111 1111 1111 1111") == "card 4111 1111 1111 1112"

    def test_a_template_carries_its_own_text_in_each_tenant_and_server(self) -> None:
        """Same-template messages of two tenants, and of two servers, each carry their own first message."""
        cache = KeyCache(DecodeConfig(), Redactor(RedactionConfig()))

        def message(server: str, tenant: str, text: str) -> str:
            raw = orjson.dumps({"server_id": server, "tenant": tenant, "timestamp": 1.0, "message": text,
                                "exception": {"type": "E", "value": text, "stacktrace": [
                                    {"filename": "a.py", "function": "f", "lineno": 1, "in_app": True}]}})
            return cache.read(raw, 1.0)[0].message

        acme, globex = "account 4402 1187 owes 93.50 to Dr Abe", "account 7719 5523 owes 10.00 to Dr Ada"
        assert message("billing", "acme", acme) == acme
        assert message("billing", "globex", globex) == globex
        assert message("ledger", "acme", globex) == globex
        assert message("billing", "acme", globex) == acme  # the same burst: its first message's line
        assert message("billing", "globex", acme) == globex
        assert cache.hits == 2  # the last two were read from the cache, which carried the right text


class TestEntryBytes:
    def test_an_entry_is_charged_for_the_frames_it_keeps_alive(self) -> None:
        """The entries' charge grows with the frames kept, whatever the parse caches still hold."""
        cache = KeyCache(DecodeConfig(), Redactor(RedactionConfig()))
        charged = []
        for frames in (10, 800):  # 800 frames: under the parse cache's 64 KiB key, so the entry is made
            before = cache._entries.nbytes
            raw = orjson.dumps({"server_id": "s", "timestamp": 1.0, "message": "m", "exception": {
                "type": "E", "value": "m", "stacktrace": [
                    {"filename": f"m{frames}_{i}.py", "function": f"f{i}", "lineno": i + 1, "in_app": True}
                    for i in range(frames)]}})
            cache.read(raw, 1.0)
            charged.append(cache._entries.nbytes - before)
        # An object and at least two strings per frame (the old charge was the same few hundred bytes for both).
        assert charged[0] > 10 * (200 + 2 * 50) and charged[1] > 800 * (200 + 2 * 50), charged
        assert cache._entries.nbytes <= cache._entries.max_bytes


class TestDeepNesting:
    @pytest.mark.parametrize("depth", [255, 600, 1000])
    def test_an_unknown_field_nested_too_deep_is_bad_input_as_on_the_full_path(self, depth: int) -> None:
        """A skeleton orjson cannot write goes to the full path, which says too_deep (not an internal error)."""
        config, redactor = DecodeConfig(), Redactor(RedactionConfig())
        raw = (b'{"server_id":"s","timestamp":1.0,"message":"m","exception":{"type":"E","value":"m",'
               b'"stacktrace":[{"filename":"a.py","function":"f","lineno":1,"in_app":true}]},"deep":'
               + b"[" * depth + b"]" * depth + b"}")
        assert _read(lambda r: KeyCache(config, redactor).read(r, 1.0), raw) == \
            _read(lambda r: full_keys(r, config, redactor, 1.0), raw) == "too_deep"
