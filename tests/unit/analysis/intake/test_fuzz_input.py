"""Hostile input never escapes as anything but BadInput, and trace parsing never raises at all."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.errors import BadInput
from analysis.event import ErrorEvent
from analysis.intake import decode
from analysis.intake.decode import BAD_INPUT_REASONS, DecodeConfig, decode_message
from analysis.intake.redact import Redactor
from analysis.intake.signature import Signature, fingerprint_event, mask_message
from analysis.intake.stacktrace import DEFAULT_MAX_FRAMES, _parse, parse_trace
from analysis.intake.template import mask_uncached
from tests.linear import assert_linear

CONFIG = DecodeConfig(max_message_bytes=64 * 1024)
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=25,
)
FIELD_NAMES = [
    "server_id", "timestamp", "message", "level", "logger", "commit", "tenant", "exception", "type", "value",
    "stacktrace", "chained", "filename", "function", "lineno", "in_app", "module", "abs_path", "@timestamp",
    "service.name", "service", "error", "error.stack_trace", "log.level", "stack_trace", "logger_name",
    "app_name", "resourceLogs", "scopeLogs", "logRecords", "attributes", "key", "stringValue", "intValue",
    "body", "resource", "timeUnixNano", "frames", "name", "log.logger", "error.type", "error.message",
    "exception.stacktrace", "exception.type", "exception.message", "appName", "application", "HOSTNAME", "log",
    "organization.id", "labels.tenant", "@version", "service.version",
]  # fmt: skip
# Objects built from the field names decoding looks at, so fuzzing reaches deep into each shape.
shaped_values = st.recursive(
    scalars | st.sampled_from(["java.lang.Error: x\n\tat a.B.c(B.java:1)", "panic: x\n\ngoroutine 1 [running]:"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(FIELD_NAMES), children, max_size=6)
    ),
    max_leaves=30,
)
trace_lines = st.sampled_from([
    "Traceback (most recent call last):", '  File "/a.py", line 1, in f', "ValueError: x", "Caused by: a.B: c",
    "\tat a.B.c(B.java:1)", "\t... 3 more", "\tSuppressed: x.Y", "    at f (/a.js:1:2)", "  [cause]: Error: y",
    "goroutine 1 [running]:", "main.main()", "\t/app/main.go:3 +0x1d", "panic: boom [recovered]", "",
    "During handling of the above exception, another exception occurred:", "created by main.main", "}",
])  # fmt: skip

# Digits, hex letters and the punctuation the masking branches key on, so generated text hits them.
MASK_ALPHABET = "0123456789abcdefxyzABCDEFXYZ \"'/.:@-_+%~\\\n\t[]<>é٣REDACTED"


def assert_decodes_or_bad_input(raw: bytes) -> None:
    try:
        events = decode_message(raw, CONFIG, received_at=0.0)
    except BadInput as exc:
        assert exc.reason in BAD_INPUT_REASONS
        return
    for event in events:
        assert isinstance(event, ErrorEvent) and event.server_id
        fingerprint_event(event)  # whatever decodes can be fingerprinted
        orjson.dumps(event.extra)  # and its kept fields can be written out again


class TestDecodeFuzz:
    @FUZZ
    @given(st.binary(max_size=300))
    def test_arbitrary_bytes(self, raw: bytes) -> None:
        """Random bytes decode or raise BadInput with a known reason; nothing else escapes."""
        assert_decodes_or_bad_input(raw)

    @FUZZ
    @given(json_values)
    def test_arbitrary_json(self, value: Any) -> None:
        """Any JSON value decodes or raises BadInput with a known reason."""
        assert_decodes_or_bad_input(json.dumps(value).encode())

    @FUZZ
    @given(st.dictionaries(st.sampled_from(FIELD_NAMES), shaped_values, max_size=8))
    def test_json_shaped_like_events(self, value: dict[str, Any]) -> None:
        """Objects that look like events of every shape, with wrong types anywhere, fail only as BadInput."""
        assert_decodes_or_bad_input(json.dumps(value).encode())


    @FUZZ
    @given(st.lists(st.dictionaries(st.sampled_from(FIELD_NAMES), shaped_values, max_size=8), min_size=1, max_size=4))
    def test_the_layout_cache_changes_nothing(self, documents: list[dict[str, Any]]) -> None:
        """Decoding with the per-layout plans cached gives what decoding with no plan cached gives."""
        def outcome(raw: bytes) -> object:
            try:
                return decode_message(raw, CONFIG, received_at=0.0)
            except BadInput as bad:
                return bad.reason
        raws = [json.dumps(document).encode() for document in documents]
        warm = [outcome(raw) for raw in raws + raws]
        cold = []
        for raw in raws + raws:
            decode._PLANS.clear()
            cold.append(outcome(raw))
        assert warm == cold


class TestTraceFuzz:
    @FUZZ
    @given(st.text(max_size=400))
    def test_arbitrary_text(self, text: str) -> None:
        """Any text parses to a (possibly empty) chain without raising."""
        assert isinstance(parse_trace(text), tuple)

    @FUZZ
    @given(st.lists(trace_lines | st.text(max_size=30), max_size=40))
    def test_trace_like_text(self, lines: list[str]) -> None:
        """Shuffled pieces of real trace syntax parse without raising, and every frame is well formed."""
        for exception in parse_trace("\n".join(lines)):
            assert isinstance(exception.type, str)
            for frame in exception.frames:
                assert frame.lineno is None or frame.lineno >= 0

    @FUZZ
    @given(st.lists(trace_lines | st.text(max_size=30), min_size=2, max_size=30), st.text(max_size=60))
    def test_cached_frames_with_a_new_first_line_parse_as_the_full_parser(self, lines: list[str], new: str) -> None:
        """Whatever the trace, once its frames are cached a variant with another first line parses exactly
        as the full parser reads it (the cache only ever saves work)."""
        text = "\n".join(lines)
        parse_trace(text)
        variant = "\n".join([new.replace("\n", " "), *lines[1:]])
        assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES)

    @FUZZ
    @given(st.text(alphabet=MASK_ALPHABET, max_size=80) | st.text(max_size=80))
    def test_mask_templates_mask_exactly_as_the_plain_pattern(self, text: str) -> None:
        """The cached-template masking gives the result computed on the text itself, on any text."""
        assert mask_message(text) == mask_uncached(text)
        assert mask_message(text.upper()) == mask_uncached(text.upper())

    @FUZZ
    @given(st.text(max_size=300))
    def test_redaction_never_raises(self, text: str) -> None:
        """Redaction accepts any text."""
        assert isinstance(Redactor().redact(text), str)


class TestHostileSizes:
    def test_ten_megabyte_message_is_too_large(self) -> None:
        """A 10 MB message is refused by size, quickly, before parsing."""
        raw = b'{"server_id": "s", "message": "' + b"a" * (10 * 1024 * 1024) + b'"}'
        # CPU time of this process: the bound holds on a loaded machine, where wall time would not.
        started = time.process_time()
        with pytest.raises(BadInput) as caught:
            decode_message(raw, DecodeConfig(), received_at=0.0)
        assert caught.value.reason == "too_large"
        assert time.process_time() - started < 0.1

    def test_deep_nesting_is_too_deep(self) -> None:
        """Nesting deeper than the cap (and deeper than the JSON parser allows) is too_deep."""
        for depth in (100, 100_000):
            raw = b'{"server_id": "s", "message": "m", "x": ' + b"[" * depth + b"]" * depth + b"}"
            with pytest.raises(BadInput) as caught:
                decode_message(raw, DecodeConfig(), received_at=0.0)
            assert caught.value.reason == "too_deep"

    def test_invalid_utf8(self) -> None:
        """Invalid UTF-8 anywhere in the message is invalid_utf8."""
        with pytest.raises(BadInput) as caught:
            decode_message(b'{"server_id": "s", "message": "\xc3\x28"}', DecodeConfig(), received_at=0.0)
        assert caught.value.reason == "invalid_utf8"

    def test_hundred_thousand_frame_trace_inside_a_message(self) -> None:
        """A 100k-frame Java trace in an ECS event decodes and fingerprints in linear time."""

        runs = itertools.count()

        def raw(frames: int) -> bytes:  # new frames each run: the parser keeps the last 16,384 it read
            run = next(runs)
            trace = "java.lang.StackOverflowError\n" + "".join(
                f"\tat com.acme{run}.Tree.walk(Tree.java:{i})\n" for i in range(frames))
            return orjson.dumps({"@timestamp": "2024-05-02T10:14:03Z", "service.name": "s", "message": "m",
                                 "error.stack_trace": trace})

        def decoded(message: bytes) -> tuple[ErrorEvent, Signature]:
            (event,) = decode_message(message, DecodeConfig(max_message_bytes=8 << 20), received_at=0.0)
            return event, fingerprint_event(event)

        assert_linear(decoded, raw, 100_000, 1.0)
        event, signature = decoded(raw(100_000))
        assert len(event.exceptions[0].frames) == 2000
        assert signature.frames == (f"{event.exceptions[0].frames[0].module}.walk",)
        assert signature.frames[0].startswith("com.acme") and signature.frames[0].endswith(".Tree.walk")
