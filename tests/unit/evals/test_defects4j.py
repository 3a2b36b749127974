"""The Defects4J evaluation's own pieces, on a trace written here (the corpus itself is read only by
`python -m evals`)."""

from __future__ import annotations

import orjson

from analysis.intake.decode import DecodeConfig, decode_message
from evals.defects4j import Bug, Score, native_exception, record

TRACE = """\
com.acme.MappingException: bad token
 at [Source: {}; line: 1]
\tat com.acme.MappingException.from(MappingException.java:12)
\tat com.acme.Reader.read(Reader.java:40)
\tat com.acme.ReaderTest.reads(ReaderTest.java:9)
\tat sun.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
Caused by: java.lang.IllegalStateException: no token
\tat com.acme.Parser.next(Parser.java:77)
\tat com.acme.Reader.read(Reader.java:38)
\t... 2 more
"""
BUG = Bug("defects4j:Acme-1", "Acme", "solid", "Acme-1", TRACE, {"src/com/acme/Parser.java": (75, 80)},
          {"src/com/acme/Parser.java": (77,)})


class TestShapes:
    """The failure as users send it: structured frames, or the text trace in logstash and ECS."""

    def test_native_frames_are_outermost_first_with_causes_filled_in(self) -> None:
        """`... 2 more` takes the enclosing exception's last two frames; the message keeps its second line."""
        native = native_exception(TRACE)
        assert native["type"] == "com.acme.MappingException"
        assert native["value"] == "bad token\n at [Source: {}; line: 1]"
        assert [f["function"] for f in native["stacktrace"]] == ["invoke0", "reads", "read", "from"]
        [cause] = native["chained"]
        assert [(f["function"], f.get("lineno")) for f in cause["stacktrace"]] == [
            ("invoke0", None), ("reads", 9), ("read", 38), ("next", 77)]

    def test_every_shape_decodes_to_the_same_root_cause_frames(self) -> None:
        """Native, logstash and ECS events of one trace give the root cause the same application frames."""
        chains = []
        for shape in ("native", "logstash", "ecs"):
            event = decode_message(record(BUG, shape, "c" * 40), DecodeConfig())[0]
            assert event.commit == "c" * 40
            root = event.root_cause
            assert root is not None and root.type == "java.lang.IllegalStateException"
            chains.append([(f.function, f.lineno) for f in root.frames if f.filename in ("Parser.java", "Reader.java")])
        assert chains[0] == chains[1] == chains[2] == [("next", 77), ("read", 38)]


class TestScore:
    """Scores read the answer fields only after the analysis."""

    def test_top_three_and_distance(self) -> None:
        fixed = frozenset(BUG.fixed)
        first = Score(BUG.id, "solid", "ecs", "localiser", ("src/com/acme/Parser.java", "b"), fixed, 77, 2)
        third = Score(BUG.id, "solid", "ecs", "naive", ("a", "b", "src/com/acme/Parser.java"), fixed, 40, None)
        assert (first.top1, first.top3) == (True, True)
        assert (third.top1, third.top3) == (False, True)
        assert orjson.loads(record(BUG, "ecs", "c" * 40))["error.type"] == "com.acme.MappingException"

    def test_the_best_line_the_trace_itself_names(self) -> None:
        """The trace ran Parser.java:77; the fix changes 75 and 80: no trace line is exact, the best is 2 off."""
        assert BUG.best_trace_line() == 2
