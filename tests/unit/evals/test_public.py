"""The public-data evaluations' machinery, on small corpora written here (the real ones are not in CI)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from evals import loghub, sentry, shapes
from evals.sentry_snapshot import load_cases
from tests.paths import TRACES

_NEW_SNAPSHOT = """---
created: '2025-10-07T20:42:05+00:00'
creator: sentry
source: tests/sentry/grouping/test_grouphash_metadata.py
---
hash_basis: stacktrace
---
contributing variants:
  app*
    hash: "{hash}"
    contributing component: exception
    hint: None
    root_component:
      app*
        exception*
          stacktrace*
            frame* (marked in-app by the client)
              module*
                "com.acme.OrderService$$EnhancerByGuice$$<auto>"
              function*
                "place"
            frame*
              function*
                "helper"
          type*
            "IllegalStateException"
"""
_OLD_SNAPSHOT = """---
created: '2024-10-24T14:18:20+00:00'
creator: sentry
source: tests/sentry/grouping/test_variants.py
---
app:
  hash: null
  component:
    app (stacktrace of system takes precedence)
      stacktrace (ignored because it contains no in-app frames)
--------------------------------------------------------------------------
default:
  hash: "{hash}"
  component:
    default*
      message*
        "Hello there <int>!"
"""


def _payload(module: str, extra_frame: bool = False) -> dict[str, object]:
    frames = [{"function": "run", "module": "java.lang.Thread", "in_app": False},
              {"function": "place", "module": module, "filename": "OrderService.java", "in_app": True}]
    if extra_frame:
        frames.append({"function": "helper", "module": "com.acme.Util", "filename": "Util.java", "in_app": True})
    return {"platform": "java", "exception": {"values": [
        {"type": "java.lang.IllegalStateException", "value": "order 12 closed", "stacktrace": {"frames": frames}}]}}


def _corpus(root: Path) -> Path:
    """Three Java fixtures (two alike, one Sentry keys on a frame Log Agent drops) and a message one."""
    cases = {
        "java-a": (_payload("com.acme.OrderService$$EnhancerByGuice$$ae46b1bf", extra_frame=True),
                   _NEW_SNAPSHOT, "a" * 32),
        "java-b": (_payload("com.acme.OrderService$$EnhancerByGuice$$0c0ffee0", extra_frame=True),
                   _NEW_SNAPSHOT, "a" * 32),
        "message-hello": ({"logentry": {"formatted": "Hello there 7!"}}, _OLD_SNAPSHOT, "b" * 32),
    }
    (root / "grouping_inputs").mkdir(parents=True)
    (root / "snapshots").mkdir()
    rows = ["case\tinput_path\tinput_commit\tinput_chars\tsnapshot_path\tsnapshot_commit\tsnapshot_chars\t"
            "hash_basis\tgroup_hash"]
    for name, (payload, snapshot, group_hash) in cases.items():
        (root / "grouping_inputs" / f"{name}.json").write_text(json.dumps(payload))
        (root / "snapshots" / f"{name.replace('-', '_')}.pysnap").write_text(snapshot.format(hash=group_hash))
        rows.append(f"{name}\t-\t-\t0\t-\t-\t0\tstacktrace\t{group_hash}")
    (root / "MANIFEST.tsv").write_text("\n".join(rows) + "\n")
    return root


class TestSentrySnapshots:
    def test_both_layouts_give_the_contributing_frames_and_variant(self, tmp_path: Path) -> None:
        """The newer layout lists contributing frames with their values; the older one's first hashed
        variant is the one that counts."""
        cases = {case.name: case for case in load_cases(_corpus(tmp_path))}
        frames = cases["java-a"].frames
        assert [frame.values for frame in frames] == [
            {"module": "com.acme.OrderService$$EnhancerByGuice$$<auto>", "function": "place"}, {"function": "helper"}]
        assert (cases["message-hello"].variant, cases["message-hello"].frames) == ("default", ())

    def test_frame_agreement_and_pairs(self, tmp_path: Path) -> None:
        """Alike fixtures agree and pair up; keys drop what Sentry masked; the message fixture agrees."""
        report = sentry.evaluate(_corpus(tmp_path))
        verdicts = {verdict.case: verdict for verdict in report.verdicts}
        assert verdicts["java-a"].agrees, verdicts["java-a"].reason
        assert verdicts["java-a"].ours == ("com.acme.Util.helper", "com.acme.OrderService.place")
        assert verdicts["message-hello"].agrees and verdicts["message-hello"].ours == ()
        assert (report.pairs.true_pos, report.pairs.false_pos, report.pairs.false_neg) == (1, 0, 0)

    def test_a_disagreement_says_why(self, tmp_path: Path) -> None:
        """A frame Sentry hashes that Log Agent does not key on is named in the reason."""
        root = _corpus(tmp_path)
        payload = json.loads((root / "grouping_inputs" / "java-a.json").read_text())
        payload["exception"]["values"][0]["stacktrace"]["frames"][2]["in_app"] = False
        (root / "grouping_inputs" / "java-a.json").write_text(json.dumps(payload))
        verdict = next(v for v in sentry.evaluate(root).verdicts if v.case == "java-a")
        assert not verdict.agrees and "com.acme.Util.helper" in verdict.reason

    def test_conversion_keeps_the_chain_order_and_the_message_template(self) -> None:
        """Sentry lists the root cause first; the native event gives the outermost exception with its causes."""
        values = [{"type": "KeyError", "value": "'x'"}, {"type": "ValueError", "value": "bad"}]
        payload = {"exception": {"values": values}, "logentry": {"message": "Hello %s", "formatted": "Hello world"}}
        native = sentry.convert(payload)
        assert native["message"] == "Hello %s"
        assert native["exception"]["type"] == "ValueError" and native["exception"]["chained"][0]["type"] == "KeyError"
        (event,) = decode_message(orjson.dumps(native), DecodeConfig(), received_at=0.0)
        assert event.exception_type == "KeyError"


class TestLoghub:
    def test_grouping_accuracy_counts_lines_whose_group_is_exactly_their_template(self) -> None:
        """A split template loses all its lines; a merge loses both templates' lines."""
        labels = ["A", "A", "B", "C", "C", "D"]
        assert loghub.grouping_accuracy(labels, [1, 1, 2, 3, 3, 4]) == 1.0
        assert loghub.grouping_accuracy(labels, [1, 2, 3, 4, 4, 5]) == 4 / 6
        assert loghub.grouping_accuracy(labels, [1, 1, 1, 4, 4, 5]) == 3 / 6

    def test_a_small_sample_through_the_product(self, tmp_path: Path) -> None:
        """Lines of one template with other values share a group; another template does not join it."""
        folder = tmp_path / "Demo"
        folder.mkdir()
        rows = ["LineId,Content,EventId,EventTemplate",
                '1,"Failed password for invalid user admin from 10.0.0.1 port 22",E1,x',
                '2,"Failed password for invalid user oracle from 10.0.0.9 port 2201",E1,x',
                '3,"session opened for user news by (uid=0)",E2,x',
                '4,"session opened for user cyrus by (uid=509)",E2,x']
        (folder / "Demo_2k.log_structured.csv").write_text("\n".join(rows) + "\n")
        (score,) = loghub.evaluate(tmp_path, systems=("Demo", "Absent"))
        assert (score.system, score.lines, score.templates, score.logagent, score.logagent_groups) == (
            "Demo", 4, 2, 1.0, 2)


class TestShapes:
    def test_every_layout_decodes_to_the_canonical_fingerprint(self) -> None:
        """Each mixed layout of a real trace carries the same failure as the canonical ECS document."""
        trace = (TRACES / "java_checkout.txt").read_text()
        config = DecodeConfig(default_server_id="checkout")
        prints = {name: fingerprint_event(decode_message(orjson.dumps(layout("checkout", trace)), config)[0])
                  for name, layout in shapes.LAYOUTS.items()}  # fmt: skip
        canonical = prints[shapes.CANONICAL]
        assert canonical.basis == "stacktrace" and canonical.frames
        expected = dict.fromkeys(shapes.LAYOUTS, (canonical.fingerprint, canonical.frames))
        assert {name: (p.fingerprint, p.frames) for name, p in prints.items()} == expected
