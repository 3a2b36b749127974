"""The demo's sample services: real repositories, real traces, and a stream with the promised mix."""

from __future__ import annotations

import itertools
import subprocess
from collections import Counter
from pathlib import Path

import orjson
import pytest

from demo.services import SampleService, build_sample_repos
from demo.stream import SampleStream, build_stream, generate_stream

_CAP = 65_536


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _source_line(service: SampleService, commit: str, path: str, line: int) -> str:
    return _git(service.repo, "show", f"{commit}:{path}").splitlines()[line - 1]


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SampleService]:
    return build_sample_repos(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def stream(services: dict[str, SampleService]) -> SampleStream:
    return build_stream(services, n_events=2_000, seed=11, max_message_bytes=_CAP)


class TestSampleRepos:
    def test_each_service_is_a_git_repository_with_its_commits(
        self, services: dict[str, SampleService]
    ) -> None:
        """Every service is a real repository whose history is exactly its commits, newest at HEAD."""
        assert {s.language for s in services.values()} == {"python", "java", "go"}
        for service in services.values():
            log = _git(service.repo, "log", "--format=%H", "main").split()
            assert log == list(reversed(service.commits))
            assert set(service.deployed) <= set(service.commits)
            assert _git(service.repo, "status", "--porcelain") == ""

    def test_python_and_java_services_have_two_deployed_commits(
        self, services: dict[str, SampleService]
    ) -> None:
        """A later commit changes the code, so the stream carries two deployed revisions of each."""
        assert len(services["orders-service"].deployed) == 2
        assert len(services["checkout-service"].deployed) == 2

    def test_commits_are_reproducible(self, services: dict[str, SampleService], tmp_path: Path) -> None:
        """Fixed authors and dates give the same shas on every build, so a seed gives the same stream."""
        again = build_sample_repos(tmp_path)
        assert {k: s.commits for k, s in again.items()} == {k: s.commits for k, s in services.items()}

    def test_python_traces_come_from_running_the_code(self, services: dict[str, SampleService]) -> None:
        """The Python traceback names the real file and line, and that line is the faulting statement."""
        orders = services["orders-service"]
        for commit in orders.deployed:
            trace = orders.trace("unknown-coupon", commit)
            assert trace is not None
            assert f'File "/app/orders/pricing.py", line {trace.culprit_line}, in apply_coupon' in trace.text
            assert "DISCOUNTS[coupon.upper()]" in _source_line(orders, commit, "orders/pricing.py",
                                                               trace.culprit_line)
            assert "The above exception was the direct cause of the following exception" in trace.text
            assert trace.root.type == "KeyError"
            assert trace.chain[0].type == "orders.api.PricingError"

    def test_the_later_commit_moves_and_fixes_lines(self, services: dict[str, SampleService]) -> None:
        """The coupon bug moves down in v2, the empty-receipt bug is fixed there, refunds are new there."""
        orders = services["orders-service"]
        v1, v2 = orders.deployed
        lines = [orders.trace("unknown-coupon", c).culprit_line for c in (v1, v2)]  # type: ignore[union-attr]
        assert lines[0] != lines[1]
        assert orders.trace("empty-receipt", v1) is not None
        assert orders.trace("empty-receipt", v2) is None
        assert orders.trace("refund-missing-order", v1) is None
        refund = orders.trace("refund-missing-order", v2)
        assert refund is not None
        assert refund.root.value == "'NoneType' object has no attribute 'total'"

    def test_java_traces_point_at_the_faulting_source_line(self, services: dict[str, SampleService]) -> None:
        """Every Java trace's culprit line holds the statement that throws, in the file the bug names."""
        checkout = services["checkout-service"]
        expected = {"customer-npe": "customer.getAddress()", "coupon-required": "Objects.requireNonNull",
                    "bad-quantity": "Integer.parseInt"}
        for commit in checkout.deployed:
            for key, statement in expected.items():
                trace = checkout.trace(key, commit)
                assert trace is not None
                bug = checkout.bug(key)
                assert statement in _source_line(checkout, commit, bug.culprit_path, trace.culprit_line)
                file_name = bug.culprit_path.rsplit("/", 1)[-1]
                assert f"({file_name}:{trace.culprit_line})" in trace.text
                assert "$$EnhancerBySpringCGLIB$$" in trace.text or key == "bad-quantity"

    def test_java_chain_prints_caused_by_and_more(self, services: dict[str, SampleService]) -> None:
        """The quantity bug wraps NumberFormatException: `Caused by:` and `... N more` as the JVM prints."""
        checkout = services["checkout-service"]
        trace = checkout.trace("bad-quantity", checkout.deployed[0])
        assert trace is not None
        assert "\nCaused by: java.lang.NumberFormatException: For input string:" in trace.text
        assert trace.text.rstrip().split("\n")[-1].strip().endswith("more")
        assert trace.root.type == "java.lang.NumberFormatException"

    def test_go_panic_points_at_the_faulting_line(self, services: dict[str, SampleService]) -> None:
        """The goroutine trace names ledger.go at the out-of-range index expression."""
        payments = services["payments-service"]
        commit = payments.deployed[0]
        trace = payments.trace("settle-out-of-range", commit)
        assert trace is not None
        assert trace.text.startswith("panic: runtime error: index out of range")
        assert f"/app/internal/ledger/ledger.go:{trace.culprit_line} " in trace.text
        assert "batch[len(batch)]" in _source_line(payments, commit, "internal/ledger/ledger.go",
                                                   trace.culprit_line)


class TestSampleStream:
    def test_same_seed_same_bytes(self, services: dict[str, SampleService]) -> None:
        """The stream is a function of the seed; another seed gives another stream."""
        first = generate_stream(services, n_events=500, seed=3)
        assert first == generate_stream(services, n_events=500, seed=3)
        assert first != generate_stream(services, n_events=500, seed=4)

    def test_thousands_of_events_in_all_four_shapes(self, stream: SampleStream) -> None:
        """About the requested number of events, carried by native, ECS, OTLP and logstash messages."""
        assert stream.event_count == 2_000
        shapes = Counter(m.shape for m in stream.messages if m.kind != "malformed")
        assert set(shapes) == {"native", "ecs", "otel", "logstash"}
        assert any(m.shape == "otel" and m.records > 1 for m in stream.messages)

    def test_every_malformed_kind_is_present_and_really_malformed(self, stream: SampleStream) -> None:
        """Not JSON, not an object, oversized, invalid UTF-8, wrong types, empty, too deep: one each."""
        bad = {m.reason: m.value for m in stream.messages if m.kind == "malformed"}
        assert set(bad) == {"not_json", "not_object", "too_large", "invalid_utf8", "wrong_type", "no_error",
                            "too_deep"}
        assert stream.malformed_count == len(bad)
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(bad["not_json"])
        assert isinstance(orjson.loads(bad["not_object"]), list)
        assert len(bad["too_large"]) > _CAP
        with pytest.raises(UnicodeDecodeError):
            bad["invalid_utf8"].decode("utf-8")
        assert isinstance(orjson.loads(bad["wrong_type"])["message"], list)

    def test_bursts_cover_every_bug_at_every_commit_plus_noise(
        self, services: dict[str, SampleService], stream: SampleStream
    ) -> None:
        """One burst per bug and deployed commit that has it, and message-only noise bursts."""
        expected = {(s.server_id, bug, commit) for s in services.values() for (bug, commit) in s.traces}
        seen = {(b.server_id, b.bug, b.commit) for b in stream.bursts if not b.bug.startswith("noise:")}
        assert seen == expected
        assert any(b.bug.startswith("noise:") and b.culprit_path is None for b in stream.bursts)

    def test_bursts_of_one_bug_are_apart_in_event_time(self, stream: SampleStream) -> None:
        """Bursts of the same failure never overlap, and each is short and dense."""
        by_bug: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for burst in stream.bursts:
            assert burst.last_seen - burst.first_seen < 120
            by_bug.setdefault((burst.server_id, burst.bug), []).append((burst.first_seen, burst.last_seen))
        for spans in by_bug.values():
            spans.sort()
            for (_, end), (start, _) in itertools.pairwise(spans):
                assert start - end > 600

    def test_events_name_real_commits_tenant_and_varying_ids(
        self, services: dict[str, SampleService], stream: SampleStream
    ) -> None:
        """Native events carry a deployed sha of their server and the tenant; messages differ per event."""
        natives = [orjson.loads(m.value) for m in stream.messages if m.shape == "native"]
        for doc in natives:
            assert doc["commit"] in services[doc["server_id"]].deployed
            assert doc["tenant"] == "acme"
        messages = [doc["message"] for doc in natives if doc["server_id"] == "orders-service"]
        assert len(set(messages)) > len(messages) // 2

    def test_keys_are_server_ids(self, services: dict[str, SampleService], stream: SampleStream) -> None:
        """Valid messages are keyed by server id, so one server's events stay in order on one partition."""
        keys = {m.key for m in stream.messages if m.kind != "malformed"}
        assert keys == {s.encode() for s in services}
