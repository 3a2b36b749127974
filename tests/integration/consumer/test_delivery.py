"""Delivery guarantees on a real tansu broker: DLQ, retries, commit-after-publish, backpressure."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import orjson
import pytest

from analysis.code.burst import analysis_id
from analysis.code.repo import RepoConfig, RepoSync, RepoUnavailable
from analysis.event import Cluster
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor
from analysis.intake.signature import fingerprint_event
from analysis.report import Analysis
from consumer.cloudevent import event_schema
from consumer.explainer import Explainer, HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Analyzer, Service
from consumer.settings import Settings
from demo.broker import EmbeddedBroker, create_topics
from tests.conftest import (
    KafkaIO,
    Record,
    SettingsFactory,
    ShopRepos,
    live_stamps,
    make_settings,
    run_until,
    shop_error,
    shop_line,
)

pytestmark = pytest.mark.integration

_VALIDATOR = jsonschema.Draft202012Validator(event_schema(), format_checker=jsonschema.FormatChecker())
T0 = 1_700_000_000.0


def _events(records: list[Record]) -> list[dict[str, Any]]:
    """Output records as CloudEvents, each validated against the published schema."""
    events = [orjson.loads(record.value) for record in records]
    for event in events:
        _VALIDATOR.validate(event)
    return events


@dataclass
class SlowAnalyzer:
    """A real analyzer behind a per-server delay, counting calls: a slow model, without a fake model."""

    inner: Analyzer
    delays: Mapping[str, float]
    calls: int = 0

    async def analyze(self, cluster: Cluster) -> Analysis:
        self.calls += 1
        await asyncio.sleep(self.delays.get(cluster.server_id, 0.0))
        return await self.inner.analyze(cluster)


@dataclass
class FlakyAnalyzer:
    """A real analyzer whose repository is unreachable for the first `failures` calls."""

    inner: Analyzer
    failures: int
    calls: list[str] = field(default_factory=list)

    async def analyze(self, cluster: Cluster) -> Analysis:
        self.calls.append(cluster.server_id)
        if len(self.calls) <= self.failures:
            raise RepoUnavailable("clone failed: connection reset")
        return await self.inner.analyze(cluster)


# --- bad input --------------------------------------------------------------------------------------

_GOOD = shop_error("orders", "total", T0, None)
BAD_INPUTS: dict[str, tuple[bytes, str]] = {
    "not JSON": (b'{"server_id": "orders", "message": ', "not_json"),
    "not an object": (b'"just a string"', "not_object"),
    "no message and no exception": (
        orjson.dumps({"server_id": "orders", "timestamp": T0, "level": "error", "logger": "app"}),
        "no_error"),
    "oversized": (orjson.dumps({"server_id": "orders", "timestamp": T0, "message": "x" * 5000}), "too_large"),
    "invalid UTF-8": (b'{"server_id": "orders", "timestamp": 1, "message": "caf\xe9"}', "invalid_utf8"),
    "wrong field types": (
        orjson.dumps({"server_id": "orders", "timestamp": T0, "message": {"text": "boom"}}), "wrong_type"),
    "absurd nesting": (
        b'{"server_id": "orders", "message": "m", "extra": ' + b"[" * 500 + b"]" * 500 + b"}", "too_deep"),
}


@dataclass(frozen=True)
class DlqRun:
    """What one service run over every bad input (then one good event) left behind."""

    settings: Settings
    dlq: dict[bytes, Record]
    analyses: list[dict[str, Any]]
    review: list[dict[str, Any]]
    metrics: Metrics
    committed: dict[int, int | None]
    ends: dict[int, int]
    stats: Any


@pytest.fixture(scope="module")
def dlq_run(tansu: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DlqRun]:
    """Run the service once over every bad-input case followed by a good event from an unknown server."""
    tmp = tmp_path_factory.mktemp("dlq")
    review_topic = f"review-{uuid.uuid4().hex[:10]}"
    asyncio.run(create_topics(tansu.bootstrap_servers, [review_topic], 1))
    settings = make_settings(tansu.bootstrap_servers, tmp / "data", partitions=1, kafka={"review_topic": review_topic},
                             input={"max_message_bytes": 4096, "max_depth": 64})
    io = KafkaIO(tansu.bootstrap_servers)
    # No repository is configured for the server: the burst is analysed from its trace and sent for review.
    metrics = Metrics()
    explainer = Explainer(RepoSync(RepoConfig(cache_dir=tmp / "cache")), metrics, redactor=Redactor())
    service = Service(settings, explainer, metrics)
    stream = [raw for raw, _ in BAD_INPUTS.values()] + [_GOOD]

    async def scenario() -> None:
        await io.produce(settings.kafka.input_topic, stream, keys=[b"k%d" % i for i in range(len(stream))])
        await run_until(service, lambda: service.stats.events_in == len(stream) and service.idle())

    asyncio.run(scenario())
    dlq = asyncio.run(io.read_all(settings.kafka.dlq_topic))
    yield DlqRun(
        settings=settings,
        dlq={record.value: record for record in dlq},
        analyses=_events(asyncio.run(io.read_all(settings.kafka.output_topic))),
        review=_events(asyncio.run(io.read_all(review_topic))),
        metrics=metrics,
        committed=asyncio.run(io.committed(settings.kafka.group_id, settings.kafka.input_topic)),
        ends=asyncio.run(io.end_offsets(settings.kafka.input_topic)),
        stats=service.stats,
    )


class TestDeadLetterQueue:
    @pytest.mark.parametrize("case", list(BAD_INPUTS))
    def test_bad_input_goes_to_the_dlq_with_its_reason_and_original_bytes(self, dlq_run: DlqRun,
                                                                         case: str) -> None:
        """Each kind of bad input lands in the DLQ unchanged, with a reason and where it came from."""
        raw, reason = BAD_INPUTS[case]
        record = dlq_run.dlq[raw]
        assert record.headers["reason"] == reason.encode()
        assert record.headers["source_topic"] == dlq_run.settings.kafka.input_topic.encode()
        assert record.headers["source_partition"] == b"0"
        assert int(record.headers["source_offset"]) == list(BAD_INPUTS).index(case)
        assert 0 < len(record.headers["error"]) <= dlq_run.settings.kafka.dlq_error_max_chars
        assert record.key == b"k%d" % list(BAD_INPUTS).index(case)

    def test_the_consumer_survives_bad_input_and_commits_past_it(self, dlq_run: DlqRun) -> None:
        """After every bad message the next good one is still processed and all offsets are committed."""
        assert len(dlq_run.dlq) == len(BAD_INPUTS) == dlq_run.stats.dlq
        assert dlq_run.committed == {0: len(BAD_INPUTS) + 1} == dlq_run.ends

    def test_a_server_without_a_repository_gets_a_trace_only_analysis_sent_for_review(
            self, dlq_run: DlqRun) -> None:
        """No repository costs the burst nothing but the code: a heuristic answer from the trace alone,
        flagged needs_review with the reason, copied to the review topic, and counted by reason."""
        (event,) = dlq_run.analyses
        data = event["data"]
        assert event["subject"] == "orders"
        assert (data["status"], data["analyzer"], data["needs_review"]) == ("heuristic", "heuristic", True)
        assert "no repository configured" in data["review_reasons"][0]
        assert data["culprit"] == {"path": "app/shop.py", "line": shop_line("BUG total"), "function": "total"}
        assert data["citations"] == []
        assert [review["data"]["analysis_id"] for review in dlq_run.review] == [data["analysis_id"]]
        assert dlq_run.stats.failed == 0
        sample = dlq_run.metrics.registry.get_sample_value
        assert sample("logagent_repo_sync_errors_total", {"reason": "not_configured"}) == 1


# --- retries, commit-after-publish, backpressure ---------------------------------------------------

def _burst_stream(servers: tuple[str, ...], functions: tuple[str, ...], bursts: int, size: int,
                  commits: Mapping[str, str]) -> list[list[bytes]]:
    """Bursts in event-time order, each on its own (server, function) at its own time, `size` events each.

    Successive bursts of one (server, function) are 1000 s apart, so event time alone separates them;
    the bursts of one round start 0.1 s apart, so stamped as produced live (`live_stamps`) a round's
    bursts close together, once the next round is read.
    """
    # Servers alternate within each round, so slow and fast analyses interleave in offset order.
    keys = list(itertools.product(functions, servers))
    stream: list[list[bytes]] = []
    for k in range(bursts):
        for j, (function, server) in enumerate(keys):
            start = T0 + k * 1000 + j * 0.1
            stream.append([shop_error(server, function, start + i * 0.05, commits[server], n=i)
                           for i in range(size)])
    return stream


def _expected_id(first_raw: bytes) -> str:
    """The analysis id a burst starting with this message must get (real decoder and fingerprint)."""
    (event,) = decode_message(first_raw, DecodeConfig())
    return analysis_id(event.server_id, event.tenant, fingerprint_event(event).fingerprint, event.timestamp)


class TestRetries:
    def test_transient_analysis_errors_are_retried_without_losing_the_burst(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """A repository that is unreachable twice delays the analysis; the burst is published once."""
        repos = shop_repos("orders")
        settings = settings_factory(partitions=1, pipeline={"retry_attempts": 5})
        analyzer = FlakyAnalyzer(HeuristicAnalyzer(RepoSync(repos.config)), failures=2)
        service = Service(settings, analyzer, Metrics())
        stream = [shop_error("orders", "split", T0 + i * 0.1, repos.commits["orders"], n=i) for i in range(5)]

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream)
            await run_until(service, lambda: service.stats.events_in == len(stream) and service.idle())

        asyncio.run(scenario())
        (event,) = _events(asyncio.run(kafka_io.read_all(settings.kafka.output_topic)))
        assert event["data"]["status"] == "heuristic"
        assert event["data"]["cluster"]["count"] == 5
        assert analyzer.calls == ["orders"] * 3


class TestCommitAfterPublish:
    def test_a_restart_replays_unfinished_bursts_and_loses_no_event(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """Stopped mid-stream with open bursts and analyses in flight, then restarted after more input:
        every burst is published with all its events, and a replayed burst keeps its analysis id."""
        servers, functions = ("orders", "billing"), ("total", "split")
        repos = shop_repos(*servers)
        bursts = _burst_stream(servers, functions, bursts=3, size=10, commits=repos.commits)
        expected = {_expected_id(burst[0]) for burst in bursts}
        # The last burst of each key is cut in two: its tail arrives while the service is down.
        head = [raw for burst in bursts[:-4] for raw in burst]
        head += [raw for burst in bursts[-4:] for raw in burst[:5]]
        tail = [raw for burst in bursts[-4:] for raw in burst[5:]]
        # One partition keeps each burst's offsets contiguous, so what was held is exactly what replays.
        first = settings_factory(partitions=1, window={"quiet_s": 30.0},
                                 pipeline={"max_inflight": 2, "shutdown_grace_s": 0.3})
        # "orders" analyses outlast the grace period: stopped, they are handed back, not published.
        slow = SlowAnalyzer(HeuristicAnalyzer(RepoSync(repos.config)), {"orders": 2.0, "billing": 0.1})
        service = Service(first, slow, Metrics())

        async def first_run() -> None:
            await kafka_io.produce(first.kafka.input_topic, head, timestamp_ms=live_stamps(head))
            await run_until(service, lambda: service.stats.events_in == len(head) and service.stats.published)

        asyncio.run(first_run())
        published_first = _events(asyncio.run(kafka_io.read_all(first.kafka.output_topic)))
        committed_input = asyncio.run(kafka_io.committed(first.kafka.group_id, first.kafka.input_topic))
        repartition = first.repartition.topic_for(first.kafka.group_id)
        committed_first = asyncio.run(kafka_io.committed(first.kafka.group_id, repartition))
        assert 1 <= len(published_first) < len(bursts)
        # Forwarded and acknowledged, the input moves on; the open bursts hold the repartition topic back.
        assert committed_input[0] == len(head)
        assert committed_first[0] is not None and committed_first[0] < len(head)
        assert {e["id"] for e in published_first} <= expected

        # The tail was produced while the service was down: stamped after the head. The quiet time outlasts
        # the head's last moments as the first run saw them (its last watermarks replay too).
        second = settings_factory(like=first, partitions=1, window={"quiet_s": 5.0})
        fast = HeuristicAnalyzer(RepoSync(repos.config))
        restarted = Service(second, fast, Metrics())

        async def second_run() -> None:
            await kafka_io.produce(second.kafka.input_topic, tail)
            await run_until(restarted, restarted.idle)

        asyncio.run(second_run())
        events = _events(asyncio.run(kafka_io.read_all(second.kafka.output_topic)))
        assert {e["id"] for e in events} == expected
        assert all(e["data"]["cluster"]["count"] == 10 for e in events)
        ids = [e["id"] for e in events]
        replayed = [e["id"] for e in published_first if ids.count(e["id"]) > 1]
        assert replayed, "a burst published before the stop was replayed after it, under the same id"
        committed = asyncio.run(kafka_io.committed(second.kafka.group_id, second.kafka.input_topic))
        assert committed == {0: len(head) + len(tail)}
        # Every input record was forwarded once (the key stage's watermark records beside them), and the
        # repartition topic is committed past the last (a watermark sent at the stop may follow).
        forwarded = [r for r in asyncio.run(kafka_io.read_all(repartition)) if "fingerprint" in r.headers]
        assert len(forwarded) == len(head) + len(tail)
        assert asyncio.run(kafka_io.committed(second.kafka.group_id, repartition))[0] > forwarded[-1].offset


class TestBackpressure:
    def test_a_full_queue_pauses_fetching_and_resumes_when_it_drains(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """With a slow analyzer and queue_size=2 the consumer pauses instead of buffering every burst,
        resumes as the queue drains, and every burst is eventually published."""
        servers = ("orders", "billing")
        repos = shop_repos(*servers)
        bursts = _burst_stream(servers, ("total",), bursts=8, size=4, commits=repos.commits)
        stream = [raw for burst in bursts for raw in burst]
        settings = settings_factory(partitions=1, kafka={"max_poll_records": 5},
                                    pipeline={"queue_size": 2, "resume_at": 0, "max_inflight": 1})
        metrics = Metrics()
        slow = SlowAnalyzer(HeuristicAnalyzer(RepoSync(repos.config)), dict.fromkeys(servers, 0.15))
        service = Service(settings, slow, metrics)
        samples: list[tuple[float, float, int]] = []

        def observe() -> bool:
            gauge = metrics.registry.get_sample_value
            paused, inflight = gauge("logagent_consumer_paused"), gauge("logagent_inflight_analyses")
            samples.append((paused or 0.0, inflight or 0.0, service.stats.records_in))
            return service.stats.events_in == len(stream) and service.idle()

        async def produce_live() -> None:
            # A round (one burst per server) every 0.25 s: bursts close as the stream goes on, as they
            # would live, and the window must stop reading while the queue is full.
            for r in range(0, len(bursts), len(servers)):
                chunk = [raw for burst in bursts[r:r + len(servers)] for raw in burst]
                await kafka_io.produce(settings.kafka.input_topic, chunk, timestamp_ms=live_stamps(chunk))
                await asyncio.sleep(0.25)

        async def scenario() -> None:
            producing = asyncio.create_task(produce_live())
            await run_until(service, observe)
            await producing

        asyncio.run(scenario())
        events = _events(asyncio.run(kafka_io.read_all(settings.kafka.output_topic)))
        assert len({e["id"] for e in events}) == len(bursts) == len(events)
        paused = [s for s in samples if s[0] == 1.0]
        assert paused, "fetching never paused"
        assert paused[0][2] < len(stream), "the window read everything before the pause"
        assert service.stats.pauses >= 1
        # Queue bound: queue_size, plus one batch of closes and the open bursts, plus the running one.
        assert max(s[1] for s in samples) <= 2 + 5 + 2 + 1
        assert samples[-1][0] == 0.0 and metrics.registry.get_sample_value("logagent_consumer_paused") == 0.0
        assert sum(e["data"]["cluster"]["count"] for e in events) == len(stream)
