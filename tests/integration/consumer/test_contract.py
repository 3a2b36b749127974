"""The published event as other teams' consumers read it: through the CloudEvents SDK, from Kafka.

Real tansu broker, real service, real git repositories. Every event on the output and review topics is
parsed by the SDK's Kafka binding, written back by it (which adds `partitionkey` from the record key)
and must still validate against the shipped schema; trace contexts of the input are passed on.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import jsonschema
import orjson
import pytest
from cloudevents.core.bindings import kafka as ce_kafka

from analysis.code.repo import RepoSync
from consumer.cloudevent import DATASCHEMA, EVENT_TYPE, event_schema
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from demo.broker import create_topics
from tests.conftest import KafkaIO, Record, SettingsFactory, ShopRepos, run_until, shop_error

pytestmark = pytest.mark.integration

_T0 = 1_766_000_000.0
_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
_TRACEPARENT = f"00-{_TRACE}-00f067aa0ba902b7-01"


def _traced(server: str, commit: str, i: int, **context: str) -> bytes:
    """A native error event of `server` carrying `context` (trace fields) among its unknown fields."""
    return orjson.dumps({**orjson.loads(shop_error(server, "split", _T0 + i * 0.1, commit, i)), **context})


class TestCloudEventsSdk:
    def test_every_published_event_round_trips_through_the_sdk_and_validates(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tansu_bootstrap: str,
        shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """Each event (output and review topics) survives from_kafka -> to_structured with its attributes and
        data, the result validates (extensions included), and the input's trace context is the event's
        `traceparent` and its Kafka header; an input without one gets none."""
        repos = shop_repos("alpha", "bravo", "charlie")
        review = f"review-{uuid.uuid4().hex[:10]}"
        asyncio.run(create_topics(tansu_bootstrap, [review], 1))
        settings = settings_factory(partitions=1, kafka={"review_topic": review})
        stream = (
            [_traced("alpha", repos.commits["alpha"], i, traceparent=_TRACEPARENT) for i in range(3)]
            + [_traced("bravo", repos.commits["bravo"], i, trace_id=_TRACE) for i in range(3)]
            + [_traced("charlie", repos.commits["charlie"], i) for i in range(3)]
            + [_traced("delta", "0" * 40, i) for i in range(2)]  # no repository: trace-only, for review
        )
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream)
            await run_until(service, lambda: service.stats.published == 4 and service.idle())

        asyncio.run(scenario())
        published = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        reviewed = asyncio.run(kafka_io.read_all(review))
        assert len(published) == 4 and len(reviewed) == 1
        validator = jsonschema.Draft202012Validator(event_schema(), format_checker=jsonschema.FormatChecker())
        by_server: dict[str, Record] = {}
        for record in published + reviewed:
            message = ce_kafka.KafkaMessage(headers=record.headers, key=record.key, value=record.value)
            event = ce_kafka.from_kafka_event(message)
            original = orjson.loads(record.value)
            assert event.get_type() == EVENT_TYPE and event.get_id() == original["id"]
            assert event.get_data() == original["data"]
            assert event.get_dataschema() == DATASCHEMA and event.get_subject() == original["subject"]
            assert event.get_extension("traceparent") == original.get("traceparent")
            written = ce_kafka.to_structured_event(event)
            again = orjson.loads(written.value)
            validator.validate(again)
            assert again["partitionkey"] == record.key.decode() == original["subject"]
            assert again["dataschema"] == DATASCHEMA and again["data"] == original["data"]
            by_server.setdefault(original["subject"], record)
        traces = {server: orjson.loads(record.value).get("traceparent") for server, record in by_server.items()}
        assert traces["alpha"] == _TRACEPARENT
        assert traces["bravo"] is not None and traces["bravo"].startswith(f"00-{_TRACE}-")
        assert traces["charlie"] is None
        for server, record in by_server.items():
            assert record.headers.get("traceparent", b"").decode() == (traces[server] or "")
        delta = orjson.loads(reviewed[0].value)["data"]
        assert delta["cluster"]["server"] == "delta" and delta["needs_review"] is True


@pytest.fixture
def tansu_bootstrap(kafka_io: KafkaIO) -> str:
    return kafka_io.bootstrap_servers
