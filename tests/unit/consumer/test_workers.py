"""Publishing an analysis against a broker whose topic takes less than `kafka.max_event_bytes`: the next,
smaller cut goes, and when none does a DLQ record says why; either way the burst's offsets move on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import orjson
from aiokafka.errors import MessageSizeTooLargeError

from analysis.code.burst import burst_analysis
from analysis.event import Cluster, ErrorEvent
from analysis.report import Analysis
from consumer.metrics import Metrics
from consumer.offsets import OffsetTracker
from consumer.settings import KafkaSettings, PipelineSettings, Settings
from consumer.window import ClosedBurst
from consumer.workers import AnalysisWorkers, ServiceStats

_KAFKA = KafkaSettings(output_topic="out", review_topic="review", dlq_topic="dlq")
_CLUSTER = Cluster(server_id="shop", tenant="acme", fingerprint="f00d", exception_type="KeyError", first_seen=10.0,
                   last_seen=12.5, count=3, commits=("abc123",),
                   samples=(ErrorEvent(server_id="shop", timestamp=10.0, message="KeyError: 'price'"),))
_TP = ("bursts", 0)


class _Broker:
    """Where the workers publish (an `EventSink`'s `publish`): refuses a record over its topic's limit with
    MESSAGE_TOO_LARGE, as a Kafka broker does for a topic's `max.message.bytes`."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = limits
        self.records: list[tuple[str, bytes, dict[str, bytes]]] = []
        self.refused = 0

    async def publish(self, topic: str, key: bytes | None, value: bytes,
                      headers: Sequence[tuple[str, bytes]] = ()) -> None:
        if len(value) > self.limits.get(topic, 1 << 30):
            self.refused += 1
            raise MessageSizeTooLargeError("the record is over the topic's max.message.bytes")
        self.records.append((topic, value, dict(headers)))


class _Verbose:
    """An analyzer whose root cause runs to 40 kB (a model that would not stop)."""

    async def analyze(self, cluster: Cluster) -> Analysis:
        return burst_analysis(cluster, "analyzed", cluster.commit, analyzer="llm", root_cause="why? " * 8_000)


def _publish(broker: _Broker) -> tuple[OffsetTracker, ServiceStats]:
    """One closed burst through the workers; the offsets and stats afterwards."""
    settings = Settings(kafka=_KAFKA, pipeline=PipelineSettings(max_inflight=1, retry_initial_s=0.01,
                                                                retry_max_s=0.01))
    offsets, stats = OffsetTracker(), ServiceStats()
    workers = AnalysisWorkers(settings, _Verbose(), Metrics(), offsets, stats)

    async def run() -> None:
        stop = asyncio.Event()
        workers.start(broker, stop)  # type: ignore[arg-type]  # the broker stands in for the producer's sink
        offsets.received(_TP, 7)
        workers.put(ClosedBurst(_CLUSTER, "quiet", {_TP: 7}, token=1, spans={_TP: (7, 7)}))
        while not workers.idle or offsets.held_count:
            workers.check()
            await asyncio.sleep(0.001)
        stop.set()
        await workers.finish()

    asyncio.run(asyncio.wait_for(run(), 10))
    return offsets, stats


class TestTopicLimitBelowTheSetting:
    def test_the_next_smaller_cut_is_published_when_the_broker_refuses_one(self) -> None:
        """The output topic takes 4 kB: the whole event and the first cut are refused, the next cut goes
        (to the review topic too), and the burst's offsets are released."""
        broker = _Broker({"out": 4_000, "review": 4_000})
        offsets, stats = _publish(broker)
        topics = [topic for topic, _, _ in broker.records]
        assert topics == ["out", "review"] and broker.refused >= 2
        data = orjson.loads(broker.records[0][1])["data"]
        assert data["notes"][-1].startswith("event cut to fit the record limit") and len(data["root_cause"]) <= 512
        assert stats.published == 1 and offsets.held_count == 0

    def test_a_dlq_record_says_why_when_the_broker_refuses_every_cut(self) -> None:
        """The output topic takes 1,000 bytes: no cut fits, the DLQ gets `analysis_too_large` with the analysis
        id, and the offsets are released all the same."""
        broker = _Broker({"out": 1_000})
        offsets, stats = _publish(broker)
        ((topic, value, headers),) = broker.records
        assert topic == "dlq" and headers["reason"] == b"analysis_too_large"
        assert (headers["source_topic"], headers["source_offset"]) == (b"bursts", b"7")
        assert orjson.loads(value)["analysis_id"] == headers["analysis_id"].decode()
        assert stats.published == 0 and stats.dlq == 1 and offsets.held_count == 0
