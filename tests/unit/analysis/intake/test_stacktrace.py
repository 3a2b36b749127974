"""Raw text stack traces of each runtime parse into chains: root cause last, frames innermost first."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.intake import stacktrace
from analysis.intake.stacktrace import (
    _SKELETONS,
    DEFAULT_MAX_FRAMES,
    _parse,
    _skeleton_key,
    detect_language,
    parse_trace,
)
from tests.linear import assert_linear
from tests.paths import TRACES

TRACES = TRACES

# Detection as it read `at` lines one by one before it searched the whole text: the reference it must equal.
_AT_LINE = re.compile(r"^[ \t]*at (.*)$", re.MULTILINE)
_NODE_LOCATION = re.compile(r":\d+:\d+\)?$")


def _line_by_line_facts(text: str) -> int:
    facts = 0
    if "Traceback (most recent call last):" in text:
        facts = stacktrace._PY
    if "goroutine " in text:
        facts |= stacktrace._GOROUTINE
    if "panic: " in text or "fatal error: " in text or " [running]:" in text:
        facts |= stacktrace._GO_MARK
    for line in _AT_LINE.finditer(text):
        facts |= stacktrace._ANY_AT
        location = line.group(1).rstrip().removesuffix(" {")
        if stacktrace._JAVA_LOCATION.search(location):
            return facts | stacktrace._JAVA_AT
        if _NODE_LOCATION.search(location):
            facts |= stacktrace._NODE_AT
    return facts


_LINE = st.one_of(
    st.tuples(st.sampled_from(["", "at ", "  at ", "\tat ", " at", "x at "]), st.sampled_from(["", "f ", "a.b "]),
              st.sampled_from(["", "(Foo.java:12)", "(Foo.kt)", "(Unknown Source)", "(Native Method)", "(x.java)",
                               "/app/x.js:12:5", "(/app/x.js:1:2)", ":3:4", "(native)", "x.js:1"]),
              st.sampled_from(["", " {", "{", " ", "\t", "\r", "\xa0", "\u2028", "\x1c", " { {", " {\r", ")", "7",
                               " ~[x.jar:1]"])).map("".join),
    st.sampled_from(["goroutine 1 [running]:", "panic: x", "Traceback (most recent call last):", "Error: e", ""]),
)
_PART = st.lists(_LINE, min_size=1, max_size=6).map("\n".join)


def trace(name: str) -> str:
    return (TRACES / name).read_text()


class TestLanguageDetection:
    def test_each_fixture_is_recognised(self) -> None:
        """The runtime that printed a trace is told apart from its shape alone."""
        expected = {
            "java_checkout.txt": "java",
            "python_pricing.txt": "python",
            "node_orders.txt": "node",
            "go_panic.txt": "go",
            "go_repanic.txt": "go",
        }
        assert {name: detect_language(trace(name)) for name in expected} == expected

    def test_node_trace_opening_with_a_frame_without_location(self) -> None:
        """A V8 trace whose first frame is `at JSON.parse (<anonymous>)` is still Node, with Node frames."""
        text = (
            "SyntaxError: Unexpected token b in JSON at position 1\n"
            "    at JSON.parse (<anonymous>)\n"
            "    at parseItems (/app/src/orders.js:7:22)\n"
            "    at Object.<anonymous> (/app/src/orders.js:12:1)\n"
        )
        assert detect_language(text) == "node"
        (error,) = parse_trace(text)
        assert error.type == "SyntaxError"
        assert [(f.function, f.filename, f.lineno) for f in error.frames] == [
            ("JSON.parse", "", None),
            ("parseItems", "/app/src/orders.js", 7),
            ("Object.<anonymous>", "/app/src/orders.js", 12),
        ]

    def test_jvm_locations_win_over_locationless_frames(self) -> None:
        """`(Unknown Source)` / `(Native Method)` / `(Foo.java:12)` lines make it a JVM trace wherever they are."""
        text = (
            "java.lang.IllegalStateException: closed\n"
            "\tat jdk.proxy2.$Proxy12.close(Unknown Source)\n"
            "\tat com.acme.Pool.release(Pool.java:40)\n"
        )
        assert detect_language(text) == "java"
        assert detect_language("Error: x\n    at foo\n    at bar (native)\n") == "java"  # no location at all
        assert detect_language(text.replace("(Pool.java:40)", "(/app/pool.js:40:3)")) == "java"

    @settings(max_examples=500, deadline=None)
    @given(st.lists(_PART, min_size=1, max_size=3))
    def test_facts_decide_as_reading_every_at_line_did(self, parts: list[str]) -> None:
        """Facts of each part of a text, combined, decide as the line-by-line reading of every part did
        (and a whole text as before)."""
        ours = theirs = 0
        for part in parts:
            ours |= stacktrace._facts(part)
            theirs |= _line_by_line_facts(part)
        assert stacktrace._decide(ours, False) == stacktrace._decide(theirs, False)
        whole = "".join(parts)
        assert stacktrace._decide(stacktrace._facts(whole), False) == stacktrace._decide(
            _line_by_line_facts(whole), False)

    def test_plain_text_is_no_trace(self) -> None:
        """A sentence is not a trace: it parses to an empty chain instead of raising."""
        assert detect_language("connection refused by upstream") == ""
        assert parse_trace("connection refused by upstream") == ()
        assert parse_trace("") == ()


class TestJavaTraces:
    def test_caused_by_chain_keeps_root_cause_last(self) -> None:
        """`Caused by:` blocks form the chain in print order; the deepest cause is the root cause."""
        chain = parse_trace(trace("java_checkout.txt"))
        assert [exception.type for exception in chain] == [
            "org.springframework.dao.DataIntegrityViolationException",
            "org.hibernate.exception.ConstraintViolationException",
            "org.postgresql.util.PSQLException",
        ]
        root = chain[-1]
        assert root.value.startswith('ERROR: duplicate key value violates unique constraint "orders_pkey"')
        assert "Key (id)=(88412) already exists." in root.value  # a multi-line message stays whole

    def test_frames_are_innermost_first_with_module_function_file_and_line(self) -> None:
        """Each `at` line becomes a frame: class as module, method as function, file and line number."""
        outer = parse_trace(trace("java_checkout.txt"))[0]
        first = outer.frames[0]
        assert (first.module, first.function, first.filename, first.lineno) == (
            "org.springframework.orm.jpa.vendor.HibernateJpaDialect",
            "convertHibernateAccessException",
            "HibernateJpaDialect.java",
            276,
        )
        assert outer.frames[-1].module == "java.lang.Thread"  # `java.base/` module prefix dropped
        proxy = outer.frames[5]
        assert (proxy.module, proxy.function, proxy.filename, proxy.lineno) == (
            "jdk.proxy2.$Proxy142",
            "save",
            "",
            None,
        )

    def test_n_more_is_rebuilt_from_the_enclosing_trace(self) -> None:
        """`... 13 more` appends the enclosing exception's last 13 frames, so a cause has its full stack."""
        outer, middle, root = parse_trace(trace("java_checkout.txt"))
        assert len(outer.frames) == 20
        assert len(middle.frames) == 4 + 13
        assert middle.frames[4:] == outer.frames[-13:]
        assert len(root.frames) == 5 + 14
        assert root.frames[5:] == middle.frames[-14:]
        assert root.frames[-1].function == "run"

    def test_suppressed_exceptions_stay_out_of_the_chain(self) -> None:
        """`Suppressed:` blocks (and their own causes) never enter the main chain nor its frames."""
        chain = parse_trace(trace("java_checkout.txt"))
        types = {exception.type for exception in chain}
        assert "java.lang.IllegalStateException" not in types
        assert "java.io.UncheckedIOException" not in types
        functions = {frame.function for exception in chain for frame in exception.frames}
        assert "close" not in functions and "flush" not in functions

    def test_thread_prefix_and_packaging_suffix_are_ignored(self) -> None:
        """`Exception in thread "…"` and logback's `~[jar:version]` suffixes do not leak into the parse."""
        text = (
            'Exception in thread "main" java.lang.IllegalArgumentException: bad sku\n'
            "\tat com.acme.Catalog.find(Catalog.java:31) ~[catalog-2.4.1.jar:2.4.1]\n"
            "\tat com.acme.Main.main(Main.java:9) [app.jar:?]\n"
        )
        (exception,) = parse_trace(text)
        assert (exception.type, exception.value) == ("java.lang.IllegalArgumentException", "bad sku")
        assert [(f.module, f.function, f.lineno) for f in exception.frames] == [
            ("com.acme.Catalog", "find", 31),
            ("com.acme.Main", "main", 9),
        ]

    def test_log_line_before_the_exception_is_skipped(self) -> None:
        """A log line printed above the exception does not become its type."""
        text = "2024-05-02 10:14:03 ERROR c.a.Jobs - job failed\njava.lang.NullPointerException\n\tat a.B.c(B.java:1)\n"
        (exception,) = parse_trace(text)
        assert exception.type == "java.lang.NullPointerException"
        assert exception.value == ""

    def test_max_frames_keeps_the_innermost(self) -> None:
        """A trace longer than `max_frames` keeps the frames closest to the failure."""
        outer = parse_trace(trace("java_checkout.txt"), max_frames=3)[0]
        assert [frame.function for frame in outer.frames] == [
            "convertHibernateAccessException",
            "translateExceptionIfPossible",
            "invoke",
        ]

    def test_repeated_text_returns_the_same_chain_object(self) -> None:
        """A repeated trace is parsed once: the second call hands back the very same tuple."""
        text = trace("java_inventory.txt")
        assert parse_trace(text) is parse_trace("".join(list(text)))


class TestPythonTraces:
    def test_direct_cause_chain_is_outermost_first(self) -> None:
        """Python prints the cause first; the chain lists the outer error first and the cause last."""
        outer, root = parse_trace(trace("python_pricing.txt"))
        assert (outer.type, outer.value) == ("shop.pricing.errors.PricingError", "cannot price order 4711")
        assert (root.type, root.value) == ("ZeroDivisionError", "division by zero")

    def test_frames_are_innermost_first_with_path_line_and_function(self) -> None:
        """`File "…", line N, in f` lines become frames, the raising frame first; caret lines are skipped."""
        outer, root = parse_trace(trace("python_pricing.txt"))
        assert [(f.filename, f.lineno, f.function) for f in root.frames] == [
            ("/srv/app/shop/pricing/rules.py", 88, "apply_discount")
        ]
        assert [f.function for f in outer.frames] == [
            "apply_discount",
            "<listcomp>",
            "price_order",
            "checkout",
            "dispatch_request",
            "full_dispatch_request",
        ]

    def test_during_handling_chain_and_log_prefix(self) -> None:
        """'During handling…' chains parse the same way; a log line before the traceback is ignored."""
        outer, root = parse_trace(trace("python_during_handling.txt"))
        assert (outer.type, root.type) == ("AttributeError", "KeyError")
        assert root.value == "'items'"
        assert outer.frames[0].filename == "/usr/lib/python3.11/logging/__init__.py"

    def test_exception_group_top_level_is_read(self) -> None:
        """An exception group's top level (printed behind `  | `) is parsed; its members are skipped."""
        text = (
            "  + Exception Group Traceback (most recent call last):\n"
            '  |   File "/srv/app/jobs/fanout.py", line 12, in run\n'
            "  |     raise ExceptionGroup('fan-out failed', errors)\n"
            "  | ExceptionGroup: fan-out failed (2 sub-exceptions)\n"
            "  +-+---------------- 1 ----------------\n"
            "    | ValueError: bad shard 3\n"
            "    +------------------------------------\n"
        )
        (group,) = parse_trace(text)
        assert group.type == "ExceptionGroup"
        assert [(f.filename, f.function) for f in group.frames] == [("/srv/app/jobs/fanout.py", "run")]


_LOGGED_THEN_CRASHED = """\
import logging
log = logging.getLogger("svc")
def warm_cache(path):
    try:
        open(path)
    except OSError:
        log.exception("cache warm-up failed, continuing without cache")
def serve(req):
    return req["user"].upper()
warm_cache("/nonexistent/cache-%s.db")
print(serve({"user": None}))
"""


def _stderr_of(tmp_path: Path, code: str) -> str:
    """What a real interpreter prints running `code` (its exit status: not 0)."""
    script = tmp_path / "svc.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, "-B", str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout
    return proc.stderr


class TestUnrelatedTracebacks:
    """Two tracebacks with no chain sentence between them are two failures (a handled error logged by
    `log.exception`, then the crash): a trial saw the handled one analysed as the crash's cause."""

    def test_the_last_failure_is_read_alone(self, tmp_path: Path) -> None:
        text = _stderr_of(tmp_path, _LOGGED_THEN_CRASHED % 1)
        assert text.count("Traceback (most recent call last):") == 2
        (crash,) = parse_trace(text)
        assert (crash.type, crash.value) == ("AttributeError", "'NoneType' object has no attribute 'upper'")
        assert [f.function for f in crash.frames] == ["serve", "<module>"]

    def test_a_chain_sentence_still_links_them(self, tmp_path: Path) -> None:
        code = _LOGGED_THEN_CRASHED.replace('log.exception("cache warm-up failed, continuing without cache")',
                                            'raise RuntimeError("no cache")')
        outer, root = parse_trace(_stderr_of(tmp_path, code % 1))
        assert (outer.type, root.type) == ("RuntimeError", "FileNotFoundError")

    def test_the_cached_frames_read_them_as_the_full_parser(self, tmp_path: Path) -> None:
        """Repeats with fresh ids take the frame-region cache, which must give the full parse: the same
        frames learned from a chained text do not make an unrelated one a chain, nor the reverse."""
        unrelated = _stderr_of(tmp_path, _LOGGED_THEN_CRASHED % 7)
        second = unrelated.index("\nTraceback", unrelated.index("Traceback") + 1)
        chained = (unrelated[:second] + "\n\nDuring handling of the above exception, another exception occurred:\n"
                   + unrelated[second:])
        for text in (chained, unrelated, chained.replace("7", "8"), unrelated.replace("7", "9"), chained):
            assert parse_trace(text) == _parse(text, DEFAULT_MAX_FRAMES)
        assert [len(parse_trace(t.replace("7", "5"))) for t in (unrelated, chained)] == [1, 2]


class TestWhatPrintsAfterATraceback:
    """A trial piped `(python main.py; echo "exit status $?") 2>&1` and a log that goes on after the crash:
    what printed next was read as the exception's message (`KeyError: 'port' Exit status 1`)."""

    def test_an_exit_line_and_a_log_record_after_it_are_not_its_message(self, tmp_path: Path) -> None:
        script = tmp_path / "main.py"
        script.write_text("import atexit, logging\n"
                          "logging.basicConfig(format='%(asctime)s %(levelname)s %(message)s', level=logging.INFO)\n"
                          "atexit.register(lambda: logging.info('shutting down'))\n"
                          "config = {}\nprint(config['port'])\n")
        proc = subprocess.run(["bash", "-c", f'"{sys.executable}" -B "{script}"; echo "exit status $?"'],
                              capture_output=True, text=True, timeout=60)
        text = proc.stderr + proc.stdout
        assert "INFO shutting down" in text and text.rstrip().endswith("exit status 1"), text
        for variant in (text, text.replace("'port'", "'host'"), text):  # the full parse, then the cached frames
            (error,) = parse_trace(variant)
            assert error.type == "KeyError" and error.value in ("'port'", "'host'"), error.value
            assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES)
        (error,) = parse_trace(text.replace("KeyError: 'port'", "ValueError: bad port\nport must be a number"))
        assert error.value == "bad port\nport must be a number"  # a message's own lines stay


class TestNodeTraces:
    def test_cause_chain_and_frames(self) -> None:
        """`[cause]:` starts the next exception of the chain; frames carry path, line and function."""
        outer, root = parse_trace(trace("node_orders.txt"))
        assert outer.type == "Error" and outer.value.startswith("failed to load order")
        assert root.type == "TypeError"
        assert root.value == "Cannot read properties of undefined (reading 'lineItems')"
        first = root.frames[0]
        assert (first.function, first.filename, first.lineno) == ("totalOf", "/app/src/orders/pricing.js", 7)

    def test_anonymous_native_and_async_frames(self) -> None:
        """`at /path:1:2` has no function, `(<anonymous>)` no file, and `async` stays on the function."""
        outer, root = parse_trace(trace("node_orders.txt"))
        assert (outer.frames[1].function, outer.frames[1].filename) == ("async Promise.all", "")
        assert (root.frames[1].function, root.frames[1].filename) == ("Array.map", "")
        anonymous = outer.frames[3]
        assert anonymous.function == "<anonymous>"
        assert anonymous.filename == "/app/node_modules/express-async-handler/index.js"


class TestGoTraces:
    def test_panic_takes_the_running_goroutine_only(self) -> None:
        """In a goroutine dump only the panicking goroutine's frames count; `created by` is not a frame."""
        (panic,) = parse_trace(trace("go_panic.txt"))
        assert panic.type == "runtime.Error"
        assert panic.value == "invalid memory address or nil pointer dereference"
        assert len(panic.frames) == 7
        first = panic.frames[0]
        assert (first.module, first.function, first.filename, first.lineno) == (
            "github.com/acme/ledger/internal/billing",
            "(*Invoicer).Total",
            "/build/internal/billing/invoice.go",
            88,
        )
        assert all(frame.function != "main" for frame in panic.frames)  # goroutine 1 is someone else

    def test_repanic_keeps_the_recovered_panic_as_root_cause(self) -> None:
        """`panic: a [recovered]` then `panic: b`: b is the outer error and a the root cause."""
        outer, root = parse_trace(trace("go_repanic.txt"))
        assert (outer.value, root.value) == ("worker pool shut down twice", "close of closed channel")
        assert [(f.module, f.function) for f in root.frames] == [
            ("main", "(*Pool).Stop.func1"),
            ("", "panic"),
            ("main", "(*Pool).Stop"),
            ("main", "main"),
        ]

    def test_fatal_error_without_frames(self) -> None:
        """A bare `fatal error:` line still yields its exception."""
        (error,) = parse_trace("fatal error: concurrent map writes\n")
        assert (error.type, error.value, error.frames) == ("fatal error", "concurrent map writes", ())


# Per fixture: a message fragment and its replacement (for Go, the goroutine id, which is no message).
MESSAGE_VARIANTS = {
    "java_inventory.txt": ("Reservation 7781", "Reservation 9"),
    "java_checkout.txt": ("(id)=(88412)", "(id)=(5)"),
    "python_pricing.txt": ("price order 4711", "price order 12"),
    "node_orders.txt": ("6a1f0c2e-9b7d-4c31-8e0a-55d2c4f1b9aa", "0c7d2b41"),
    "go_panic.txt": ("goroutine 47 [running]", "goroutine 9 [running]"),
}


class TestRepeatedFrames:
    def test_new_messages_over_known_frames_parse_exactly_and_share_frames(self) -> None:
        """Only the messages differ: the result equals a full parse, and the frames are the cached objects."""
        for name, (old, new) in MESSAGE_VARIANTS.items():
            text = trace(name)
            variant = text.replace(old, new)
            assert variant != text, name
            first = parse_trace(text)
            again = parse_trace(variant)
            assert again == _parse(variant, DEFAULT_MAX_FRAMES), name
            assert all(a.frames is b.frames for a, b in zip(first, again, strict=True)), name
            values = "\n".join(exception.value for exception in again)
            assert (new in values) == (not name.startswith("go_")), name


_GO_PRINTED = st.text(alphabet="0123456789abcdefx{}?., ", max_size=24)  # what Go prints
_GO_WORDS = st.one_of(
    _GO_PRINTED, _GO_PRINTED, _GO_PRINTED,
    st.lists(st.sampled_from([*"0xaf{}?., (\t", "...", "at ", ":12", "\u2028", "\r", "(Foo.java:1)", ")",
                              "Traceback (most recent call last):", "goroutine 1 [running]:"]),
             max_size=5).map("".join),
)


_GO_LINE = st.tuples(st.sampled_from(["", "", "", "\t", " ", "\xa0"]),  # before the function line
                     st.sampled_from([""] * 12 + ["\u2028\t/x", "\r /y", "\x0b"]),  # before its parentheses
                     st.sampled_from(["", "", "", "(0x1)", "\t/app/main(0x1)"]))  # the location line


def _go_variant(words: list[str], lines: list[tuple[str, str, str]]) -> str:
    """go_panic.txt with the running goroutine's function lines ending in these argument words, and its
    lines edited as `lines` say (`_GO_LINE`)."""
    head, _, rest = trace("go_panic.txt").partition(" [running]:\n")
    edited = rest.split("\n")
    for index, (word, (indent, inserted, after)) in enumerate(zip(words, lines, strict=True)):
        line = edited[2 * index]
        edited[2 * index] = f"{indent}{line[: line.rfind('(')]}{inserted}({word})"
        location = after.replace("0x1", word) if index else ""  # the first one keys the cache: kept
        edited[2 * index + 1] = location if location.startswith("\t") else edited[2 * index + 1] + location
    return f"{head} [running]:\n" + "\n".join(edited)


class TestGoArgumentWords:
    """A Go function line ends in its argument words (pointers, lengths), fresh in every event of a burst."""

    def test_fresh_argument_words_share_the_cached_frames(self) -> None:
        """Events whose pointers all differ parse as the full parser does, over the cached frames."""
        text = trace("go_panic.txt")
        first = parse_trace(text)
        for seed in range(1, 4):
            variant = re.sub(r"0xc0[0-9a-f]+", lambda m: hex(int(m[0], 16) + seed), text)  # noqa: B023
            assert variant != text
            again = parse_trace(variant)
            assert again == _parse(variant, DEFAULT_MAX_FRAMES)
            assert again[0].frames is first[0].frames

    @settings(max_examples=300, deadline=None)
    @given(words=st.lists(_GO_WORDS, min_size=7, max_size=7), lines=st.lists(_GO_LINE, min_size=7, max_size=7))
    def test_any_argument_words_over_cached_frames_parse_as_the_full_parser(
            self, words: list[str], lines: list[tuple[str, str, str]]) -> None:
        """Whatever a line's last parentheses hold, whatever the line (indented, split by a rare line break,
        a location), the result over the frames cached from an event of the same lines but other argument
        words equals the full parse."""
        parse_trace(_go_variant(["0xc000118f00"] * 7, lines))  # caches the frames, where it may
        variant = _go_variant(words, lines)
        assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES), variant[:400]


    def test_a_blank_line_inside_the_cached_frames_takes_the_full_parse(self) -> None:
        """The region's end is searched from the cached region's length on: a text whose frames stop at a blank
        line sooner (another goroutine's block after it) parses as the full parser does, never as the cached
        frames; the same frames with other goroutines after them are still read from the cache."""
        for name in sorted(path.name for path in TRACES.glob("go*.txt")):
            text = trace(name).rstrip("\n")
            first = parse_trace(text)  # caches the frames
            dump = f"{text}\n\ngoroutine 9 [select]:\nmain.wait(0xc000010000)\n\t/app/main.go:12 +0x1d"
            assert parse_trace(dump)[0].frames is first[0].frames, name  # the goroutines after it: still a hit
            assert parse_trace(dump) == _parse(dump, DEFAULT_MAX_FRAMES), name
            body = text.index(" [running]:") + len(" [running]:\n")
            for position in [index for index, char in enumerate(text) if char == "\n" and index > body]:
                variant = f"{text[:position]}\n\ngoroutine 9 [select]:\n{text[position + 1:]}"
                again = parse_trace(variant)
                assert again == _parse(variant, DEFAULT_MAX_FRAMES), (name, position)
                assert again[0].frames is not first[0].frames, (name, position)


class TestCachedFramesNeverChangeTheParse:
    def test_header_lines_that_steer_the_parser_take_the_full_parse(self) -> None:
        """A new message that reads as trace syntax (a `Suppressed:` line, a Python traceback marker) over
        cached frames parses exactly as the full parser would, not as a rebuild from the cache."""
        text = trace("java_inventory.txt")
        first_line, _, frames = text.partition("\n")
        parse_trace(text)  # caches the frames
        variants = [
            f"{first_line}\nSuppressed: java.io.IOException: disk\n{frames}",
            f"{first_line} Traceback (most recent call last):\n{frames}",
            f"{first_line}\n    at x (/a.js:1:2)\n{frames}",
            f"goroutine 7 [running]:\n{first_line}\n{frames}",
        ]
        for variant in variants:
            assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES), variant[:120]

    def test_a_rare_line_break_in_a_goroutine_header_takes_the_full_parse(self) -> None:
        """Go headers over cached frames with a carriage return or another rare break (which the full
        parser splits lines at) anywhere before the frames parse exactly as the full parser would."""
        for name in sorted(path.name for path in TRACES.glob("go*.txt")):
            text = trace(name)
            parse_trace(text)  # caches the frames
            body = text.index(" [running]:") + len(" [running]:\n")
            for brk in ("\r", "\x0b", "\x85", "\u2028"):
                for position in range(body):
                    variant = text[:position] + brk + text[position:]
                    assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES), (name, position, brk)

    def test_every_fixture_with_new_messages_matches_the_full_parse(self) -> None:
        """Interleaved events of several bursts, each with fresh numbers, parse as the full parser does."""
        names = sorted(path.name for path in TRACES.glob("*.txt"))
        for round_number in range(3):
            for name in names:
                variant = trace(name).replace("1", str(round_number)).replace("Error:", "Error: new")
                assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES), name
                assert parse_trace(variant, 5) == _parse(variant, 5), name


class TestScale:
    def test_hundred_thousand_frame_java_trace_is_fast(self) -> None:
        """A 100k-frame trace parses in linear time (a quadratic parse takes minutes) and keeps the innermost
        frames."""
        runs = itertools.count()

        def text(frames: int) -> str:  # new frames each run: the parser keeps the last 16,384 it read
            run = next(runs)
            return "\n".join(["java.lang.StackOverflowError",
                              *(f"\tat com.acme{run}.Tree.walk{i % 7}(Tree.java:{i})" for i in range(frames))])

        assert_linear(parse_trace, text, 100_000, 1.0)
        (exception,) = parse_trace(text(100_000))
        assert len(exception.frames) == 2000
        assert exception.frames[0].function == "walk0"

    def test_hundred_thousand_frame_python_trace_keeps_the_innermost(self) -> None:
        """Python prints the innermost frame last; the cap still keeps the innermost ones."""
        runs = itertools.count()

        def text(frames: int) -> str:  # new frames each run: the parser keeps the last 16,384 it read
            run = next(runs)
            body = "".join(f'  File "/app/deep{run}.py", line {i}, in f{i}\n    f()\n' for i in range(frames))
            return f"Traceback (most recent call last):\n{body}RecursionError: too deep\n"

        assert_linear(parse_trace, text, 100_000, 2.0)
        (exception,) = parse_trace(text(100_000))
        assert len(exception.frames) == 2000
        assert exception.frames[0].function == "f99999"


_HEADER_PIECES = [*"aZ0.:_ $\t \r\x0b\x85\u2028\n", "at ", "Caused by: ", "[cause]: ", "Error: ", "panic: ",
                  "Traceback (most recent call last):", "goroutine 3 [running]:\n", "java.io.IOException: ",
                  "... 3 more", '\n  File "/a.py", line 1, in f\n']
_HEADER_TEXT = st.lists(st.sampled_from(_HEADER_PIECES), max_size=12).map("".join)


class TestCacheFastPathsEqualTheFullParse:
    """The cached paths (one-line headers, repeats of a whole trace) never change a result."""

    @settings(max_examples=300, deadline=None)
    @given(name=st.sampled_from(sorted(path.name for path in TRACES.glob("*.txt"))), header=_HEADER_TEXT,
           repeat=st.booleans())
    def test_any_first_line_over_cached_frames_parses_as_the_full_parser(self, name: str, header: str,
                                                                          repeat: bool) -> None:
        """Whatever replaces a fixture's first line (plain, blank, steering, odd separators), the result
        over cached frames equals the full parse, first time and when the same text comes again."""
        text = trace(name)
        parse_trace(text)  # caches the frames
        _, _, rest = text.partition("\n")
        variant = f"{header}\n{rest}"
        expected = _parse(variant, DEFAULT_MAX_FRAMES)
        assert parse_trace(variant) == expected
        if repeat:
            assert parse_trace(variant) == expected

    @settings(max_examples=200, deadline=None)
    @given(message=_HEADER_TEXT, other=_HEADER_TEXT)
    def test_single_exception_java_node_and_python_headers(self, message: str, other: str) -> None:
        """One exception whose `Type: message` line varies parses as the full parser does, for the layouts
        the fast paths read (JVM and V8: header then frames; Python: frames then the message)."""
        java = "\n".join(trace("java_inventory.txt").splitlines()[:6])
        node = "\n".join(trace("node_orders.txt").splitlines()[:5])
        python = "Traceback (most recent call last):\n  File \"/app/x.py\", line 3, in f\n    g()\n"
        java_frames, node_frames = java.partition("\n")[2], node.partition("\n")[2]
        for first, second in ((f"java.lang.IllegalStateException: {message}", f"x.Y: {other}"),
                              (message, other)):
            caused = f"{first}\n{java_frames}\nCaused by: {second}\n{java_frames}\n\t... 2 more"
            for variant in (caused, f"{first}\n{java_frames}", f"{second}\n{java_frames}", f"{first}\n{node_frames}",
                            f"{second}\n{node_frames}", f"{python}{first}", f"{python}{second}\n"):
                assert parse_trace(variant) == _parse(variant, DEFAULT_MAX_FRAMES), variant[:200]


class TestRepeatedWholeText:
    """A text seen last over some cached frames is answered by comparing it, not matching it again."""

    def test_traces_sharing_the_innermost_frame_alternate_exactly(self) -> None:
        """Two failures whose frames differ only past the innermost line (the cache's key) and a deploy
        that moved the outer lines: interleaved repeats each equal the full parse, with their own frames."""
        lines = trace("java_inventory.txt").splitlines()
        header, frames = lines[0], lines[1:6]
        moved = [line.replace(":1", ":9") if index else line for index, line in enumerate(frames)]
        texts = ["\n".join([header, *frames]), "\n".join([header, *moved]),
                 "\n".join([header.replace("inventory", "stock 4411"), *moved])]
        first = {text: parse_trace(text) for text in texts}
        assert first[texts[0]][0].frames is not first[texts[1]][0].frames
        for text in [*texts, texts[0], texts[2], texts[1], texts[0], texts[0]]:
            again = parse_trace(text)
            assert again == _parse(text, DEFAULT_MAX_FRAMES)
            assert again[0].frames is first[text][0].frames

    def test_a_text_far_longer_than_the_learned_one_is_not_kept(self) -> None:
        """The cache is charged for a last text up to twice the learned one: a longer one is matched each time."""
        text = trace("java_inventory.txt")
        header, _, frames = text.partition("\n")
        parse_trace(text)
        long = f"{header} {'x' * 4 * len(text)}\n{frames}"
        assert parse_trace(long) == _parse(long, DEFAULT_MAX_FRAMES)
        assert parse_trace(long) == _parse(long, DEFAULT_MAX_FRAMES)
        bucket = _SKELETONS.get(_skeleton_key(text, DEFAULT_MAX_FRAMES))
        assert bucket is not None and all(skeleton.last_text != long for skeleton in bucket)
