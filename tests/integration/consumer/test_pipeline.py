"""The service end to end on a real tansu broker: bursts in, one analysis event per burst out."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import itertools
import random
import string
import threading
import time
from collections.abc import Callable
from pathlib import Path

import jsonschema
import orjson
import pytest

from analysis.code.repo import RepoSync
from analysis.intake.redact import RedactionConfig
from bench.bounded import SHAPES, hostile_message
from consumer.cloudevent import event_schema
from consumer.explainer import HeuristicAnalyzer
from consumer.http import HealthState, serve_http
from consumer.kafka import DLQ_MAX_KEY_BYTES
from consumer.metrics import Metrics
from consumer.pipeline import Service
from tests.conftest import SHOP_BUGS, SHOP_PY, KafkaIO, SettingsFactory, ShopRepos, run_until, shop_error, shop_line
from tests.gitrepo import GitRepo

pytestmark = pytest.mark.integration

SERVERS = ("orders", "billing")
_WORDS = random.Random(7)
MALFORMED = {
    b"{not json": "not_json",
    b"[1, 2, 3]": "not_object",
    orjson.dumps({"server_id": "orders", "timestamp": 1.0, "level": "error"}): "no_error",
    b'{"server_id": "orders", "message": "caf\xe9"}': "invalid_utf8",
    orjson.dumps({"server_id": "orders", "timestamp": 1.0, "message": ["a", "list"]}): "wrong_type",
    # Accepted (under 1 MiB), but its forward repeats the message in a header: 1.9 MB, over what the
    # repartition topic takes (attacker review: the producer raised, and the restart replayed it).
    orjson.dumps({"server_id": "orders", "timestamp": 1.0, "level": "error", "message": " ".join(
        "".join(_WORDS.choices(string.ascii_lowercase, k=6)) for _ in range(135_000))}): "too_large_to_forward",
    # Accepted, but its 30 failures split by burst key each repeat its 300 kB resource: 9 MB out of 300 kB.
    orjson.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "orders"}},
                                    {"key": "build.notes", "value": {"stringValue": "n" * 300_000}}]},
        "scopeLogs": [{"logRecords": [{"severityText": "ERROR", "body": {"stringValue": f"failed {i}"},
                                       "attributes": [{"key": "exception.type", "value": {"stringValue": f"E{i}"}}]}
                                      for i in range(30)]}]}]}): "too_large_to_split",
}


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(event_schema(), format_checker=jsonschema.FormatChecker())


class TestPipelineFlow:
    def test_a_bad_message_whose_key_fills_the_record_goes_to_the_dlq_cut(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """A key of ~1 MiB that the producer and broker took left no room for the DLQ's headers: the copy
        was refused, the error took the service down, and the restart met it again (attacker review). The
        key is cut and named by its digest, and the next event is analysed."""
        repos = shop_repos(SERVERS[0])
        settings = settings_factory()
        key = b"k" * 1_048_450
        good = shop_error(SERVERS[0], next(iter(SHOP_BUGS)), 1_700_000_000, repos.commits[SERVERS[0]])
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, [b"not json", good], keys=[key, SERVERS[0].encode()],
                                   partition=0)
            await run_until(service, lambda: service.stats.events_in == 2 and service.idle())

        asyncio.run(scenario())
        [dead] = asyncio.run(kafka_io.read_all(settings.kafka.dlq_topic))
        assert dead.headers["reason"] == b"not_json" and dead.value == b"not json"
        assert len(dead.key) == DLQ_MAX_KEY_BYTES and dead.headers["key_truncated"] == b"true"
        assert dead.headers["original_key_sha256"] == hashlib.sha256(key).hexdigest().encode()
        assert len(asyncio.run(kafka_io.read_all(settings.kafka.output_topic))) == 1

    def test_a_company_pattern_matching_inside_shas_leaves_the_commit_resolvable(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """A company pattern for MAC addresses (`[0-9a-f]{12}`) matches inside every sha: the events' commit
        was redacted at intake, the checkout could not resolve it, and the analysis read no code. The sha
        stays, and the analysis names the bug's line at it, not at the branch head (where the bug moved); the
        pattern still redacts the messages."""
        repos = shop_repos(SERVERS[0])
        GitRepo(Path(repos.config.servers[SERVERS[0]].url)).commit("a line above", {"app/shop.py": "\n" + SHOP_PY})
        settings = settings_factory()
        settings = settings.model_copy(update={"redaction": RedactionConfig(extra_patterns={"mac": "[0-9a-f]{12}"})})
        function = next(iter(SHOP_BUGS))
        events = [shop_error(SERVERS[0], function, 1_700_000_000 + i * 0.01, repos.commits[SERVERS[0]], n=i)
                  for i in range(5)]
        events = [raw.replace(b'"message":"', b'"message":"device 0a1b2c3d4e5f: ', 1) for raw in events]
        assert b"0a1b2c3d4e5f" in events[0]
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, events, keys=[SERVERS[0].encode()] * len(events))
            await run_until(service, lambda: service.stats.events_in == len(events) and service.idle())

        asyncio.run(scenario())
        [record] = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        data = orjson.loads(record.value)["data"]
        assert data["commit"] == repos.commits[SERVERS[0]]
        assert data["culprit"]["path"] == "app/shop.py" and data["culprit"]["line"] == shop_line(SHOP_BUGS[function][2])
        assert b"0a1b2c3d4e5f" not in record.value and not any("revision" in note for note in data["notes"])
        assert not any("deployed commit" in reason for reason in data["review_reasons"])

    def test_an_analysis_read_at_the_branch_head_asks_for_review(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """The deployed commit is not in the repository (pushed elsewhere, or not fetched yet): the analysis
        still goes out, read at the branch head, and says its code may not be the deployed code."""
        repos = shop_repos(SERVERS[0])
        settings = settings_factory()
        missing = "0123456789abcdef0123456789abcdef01234567"
        events = [shop_error(SERVERS[0], next(iter(SHOP_BUGS)), 1_700_000_000 + i * 0.01, missing, n=i)
                  for i in range(3)]
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, events, keys=[SERVERS[0].encode()] * len(events))
            await run_until(service, lambda: service.stats.published == 1 and service.idle())

        asyncio.run(scenario())
        [record] = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        data = orjson.loads(record.value)["data"]
        assert data["commit"] == repos.commits[SERVERS[0]] and data["needs_review"]
        # Cloned a moment before, so not fetched again: the reason says so.
        assert f"source read is not the deployed commit: commit {missing} not in the clone as last fetched " \
               "(fetches are rate-limited); used branch head" in data["review_reasons"], data["review_reasons"]

    def test_each_burst_yields_one_schema_valid_event_and_bad_input_goes_to_the_dlq(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """300 events of 3 signatures on 2 servers plus 5 malformed messages: 6 analyses, 5 DLQ records,
        offsets committed to the end of every partition."""
        repos = shop_repos(*SERVERS)
        settings = settings_factory(partitions=2)
        functions = list(SHOP_BUGS)
        good = [
            shop_error(SERVERS[i % 2], functions[(i // 2) % 3], 1_700_000_000 + i * 0.01,
                       repos.commits[SERVERS[i % 2]], n=i)
            for i in range(300)
        ]
        # Malformed messages are interleaved with the good ones, as they would be in a real stream.
        stream = list(itertools.chain(good[:100], MALFORMED, good[100:]))
        # Keyed by server, as producers should: a server's events then keep their order in one partition.
        keys = [orjson.loads(raw)["server_id"].encode() if raw in good else b"bad" for raw in stream]
        metrics = Metrics()
        analyzer = HeuristicAnalyzer(RepoSync(repos.config))
        service = Service(settings, analyzer, metrics)

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream, keys=keys)
            await run_until(service, lambda: service.stats.events_in == len(stream) and service.idle())

        asyncio.run(scenario())

        out = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        events = [orjson.loads(record.value) for record in out]
        for event in events:
            _validator().validate(event)
        assert len(events) == 6
        keys = {record.key for record in out}
        assert keys == {server.encode() for server in SERVERS}
        for record, event in zip(out, events, strict=True):
            assert record.key == event["subject"].encode() == event["data"]["cluster"]["server"].encode()
            assert record.headers["content-type"].startswith(b"application/cloudevents+json")
        by_burst = {(e["subject"], e["data"]["cluster"]["exception_type"]): e["data"] for e in events}
        assert set(by_burst) == {(s, SHOP_BUGS[f][0]) for s in SERVERS for f in functions}
        for (server, exc_type), data in by_burst.items():
            function = next(f for f, bug in SHOP_BUGS.items() if bug[0] == exc_type)
            assert data["cluster"]["count"] == 50
            assert data["status"] == "heuristic"
            assert data["commit"] == repos.commits[server]
            assert data["culprit"]["path"] == "app/shop.py"
            assert data["culprit"]["line"] == shop_line(SHOP_BUGS[function][2])
        assert len({e["id"] for e in events}) == 6

        dlq = asyncio.run(kafka_io.read_all(settings.kafka.dlq_topic))
        by_sha = {hashlib.sha256(raw).hexdigest().encode(): raw for raw in MALFORMED}
        # A value past the DLQ's size limit keeps its head and names the original by its digest.
        assert {by_sha[record.headers["original_sha256"]] if "truncated" in record.headers else record.value:
                record.headers["reason"].decode() for record in dlq} == MALFORMED
        for record in dlq:
            assert record.headers["source_topic"] == settings.kafka.input_topic.encode()
            assert int(record.headers["source_offset"]) >= 0

        ends = asyncio.run(kafka_io.end_offsets(settings.kafka.input_topic))
        committed = asyncio.run(kafka_io.committed(settings.kafka.group_id, settings.kafka.input_topic))
        assert committed == {p: (end if end else None) for p, end in ends.items()}
        assert sum(ends.values()) == len(stream)

        assert (service.stats.published, service.stats.dlq, service.stats.bursts_closed) == (6, len(MALFORMED), 6)
        sample = metrics.registry.get_sample_value
        assert sample("logagent_events_total", {"outcome": "dlq"}) == len(MALFORMED)
        assert sample("logagent_events_total", {"outcome": "accepted"}) == 300
        assert sample("logagent_dlq_total", {"reason": "not_json"}) == 1
        assert sample("logagent_bursts_closed_total", {"reason": "quiet"}) == 6
        assert sample("logagent_analyses_total", {"status": "heuristic", "analyzer": "heuristic"}) == 6
        assert sample("logagent_published_total", {"kind": "analysis"}) == 6
        assert sample("logagent_open_bursts") == 0
        group = settings.kafka.group_id
        for name in ("logagent_consumer_lag", "logagent_consumer_position_lag"):
            lag = [sample(name, {"consumergroup": group, "topic": settings.kafka.input_topic, "partition": str(p)})
                   for p in ends]
            assert lag == [0, 0], name


class TestOneTenantDeployment:
    @pytest.mark.parametrize("keyed", [False, True], ids=["repartitioned", "keyed_by_server"])
    def test_events_naming_another_tenant_go_to_the_dlq(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos],
        keyed: bool,
    ) -> None:
        """`input.tenant=acme`: events naming no tenant, or acme, make acme's burst; events naming globex
        (or `default`) are refused with reason `tenant_mismatch`, whatever else they share with acme's."""
        repos = shop_repos(SERVERS[0])
        settings = settings_factory(input={"tenant": "acme", "keyed_by_server": keyed})
        commit = repos.commits[SERVERS[0]]
        function = next(iter(SHOP_BUGS))

        def event(n: int, tenant: str | None) -> bytes:
            doc = orjson.loads(shop_error(SERVERS[0], function, 1_700_000_000 + n * 0.01, commit, n=n))
            return orjson.dumps(doc if tenant is None else {**doc, "tenant": tenant})

        claimed = [event(n, "globex") for n in range(10)] + [event(10, "default")]
        stream = [event(n, None if n % 2 else "acme") for n in range(20, 60)] + claimed
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream, keys=[SERVERS[0].encode()] * len(stream))
            await run_until(service, lambda: service.stats.events_in == len(stream) and service.idle())

        asyncio.run(scenario())
        [out] = asyncio.run(kafka_io.read_all(settings.kafka.output_topic))
        cluster = orjson.loads(out.value)["data"]["cluster"]
        assert (cluster["tenant"], cluster["count"]) == ("acme", 40)
        dlq = asyncio.run(kafka_io.read_all(settings.kafka.dlq_topic))
        assert sorted(record.value for record in dlq) == sorted(claimed)
        assert {record.headers["reason"] for record in dlq} == {b"tenant_mismatch"}


    def test_a_replica_of_another_deployment_in_the_same_group_cannot_hand_it_another_tenant(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos],
    ) -> None:
        """Two replicas of one group (so of one repartition topic): one pinned to acme, one not pinned yet
        (a rollout, or two tenants' releases left on the default group). What the other forwards for globex
        and lands on the pinned replica's window goes to the DLQ; the pinned replica analyses nothing."""
        servers = tuple(f"svc-{i}" for i in range(10))  # spread over both repartition partitions
        repos = shop_repos(*servers)
        base = settings_factory(partitions=2)
        pinned = base.model_copy(update={"input": base.input.model_copy(update={"tenant": "acme"}),
                                         "data_dir": base.data_dir / "pinned"})
        open_ = base.model_copy(update={"data_dir": base.data_dir / "open"})
        function = next(iter(SHOP_BUGS))
        stream = [orjson.dumps({**orjson.loads(shop_error(server, function, 1_700_000_000 + n * 0.01,
                                                          repos.commits[server], n=n)), "tenant": "globex"})
                  for server in servers for n in range(3)]
        replicas = [Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())
                    for settings in (pinned, open_)]

        async def scenario() -> None:
            stops = [asyncio.Event() for _ in replicas]
            tasks = [asyncio.create_task(r.run(stop)) for r, stop in zip(replicas, stops, strict=True)]
            try:
                deadline = time.monotonic() + 45
                while not (sum(len(r.assigned) for r in replicas) == 4 and all(r.assigned for r in replicas)):
                    assert time.monotonic() < deadline, "no stable assignment"
                    await asyncio.sleep(0.05)
                for partition in (0, 1):  # every server's events on both input partitions
                    await kafka_io.produce(base.kafka.input_topic, stream, partition=partition)
                while not (sum(r.stats.events_in for r in replicas) >= 2 * len(stream)
                           and sum(r.stats.published for r in replicas) >= 1 and all(r.idle() for r in replicas)):
                    assert time.monotonic() < deadline + 30, [r.stats for r in replicas]
                    await asyncio.sleep(0.05)
            finally:
                for stop in stops:
                    stop.set()
                await asyncio.wait_for(asyncio.gather(*tasks), 30)

        asyncio.run(scenario())
        acme, other = replicas
        assert acme.stats.published == 0 and other.stats.published >= 1
        dlq = asyncio.run(kafka_io.read_all(base.kafka.dlq_topic))
        # The pinned replica refused its own input partition's events and the other's forwards that came to it.
        assert {record.headers["reason"] for record in dlq} == {b"tenant_mismatch"}
        assert len(dlq) > len(stream)


class TestEventOverTheRecordLimit:
    def test_an_analysis_no_cut_of_which_fits_goes_to_the_dlq_and_the_stream_moves_on(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """With the output topic's limit at 1 kB (`kafka.max_event_bytes`), even the smallest cut of each
        analysis is over it: each burst leaves a DLQ record `analysis_too_large` naming its analysis and
        where its burst starts, the service runs on, and offsets are committed to the end (attacker review: the
        publish failed after its retries, and the service crash-looped on the replay)."""
        repos = shop_repos("orders")
        settings = settings_factory(partitions=1, kafka={"max_event_bytes": 1024})
        stream = [shop_error("orders", function, 1_700_000_000 + i * 0.01, repos.commits["orders"], n=i)
                  for i, function in enumerate(["total", "split"] * 10)]
        metrics = Metrics()
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), metrics)

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream)
            await run_until(service, lambda: service.stats.events_in == len(stream) and service.idle())

        asyncio.run(scenario())

        assert asyncio.run(kafka_io.read_all(settings.kafka.output_topic)) == []
        dlq = asyncio.run(kafka_io.read_all(settings.kafka.dlq_topic))
        assert [record.headers["reason"] for record in dlq] == [b"analysis_too_large"] * 2
        records = [orjson.loads(record.value) for record in dlq]
        assert sorted(r["cluster"]["exception_type"] for r in records) == ["KeyError", "ZeroDivisionError"]
        for record, value in zip(dlq, records, strict=True):
            assert record.headers["analysis_id"] == value["analysis_id"].encode()
            assert (value["topic"], value["max_event_bytes"]) == (settings.kafka.output_topic, 1024)
            assert value["cluster"]["server"] == "orders" and value["cluster"]["count"] == 10
            # Where the burst's first record was read: here the repartition topic, which names the input.
            assert record.headers["source_topic"] == settings.repartition.topic_for(settings.kafka.group_id).encode()
            assert int(record.headers["source_offset"]) in (0, 1)
        committed = asyncio.run(kafka_io.committed(settings.kafka.group_id, settings.kafka.input_topic))
        assert committed == {0: len(stream)}
        assert (service.stats.published, service.stats.dlq) == (0, 2)
        assert metrics.registry.get_sample_value("logagent_dlq_total", {"reason": "analysis_too_large"}) == 2


class TestLiveness:
    def test_livez_fails_while_the_event_loop_is_blocked_and_recovers(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos]
    ) -> None:
        """The real service on a real broker beats on every turn of its loop; when something holds the event
        loop (here a blocking call scheduled on it, as a runaway parse would), /livez turns 503 within the
        limit while the HTTP thread keeps answering, and 200 again once the loop turns."""
        repos = shop_repos("orders")
        settings = settings_factory()
        health = HealthState(stall_after_s=0.5)
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics(), health)
        seen: list[int] = []

        def probe() -> int:
            connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=5)
            try:
                connection.request("GET", "/livez")
                return connection.getresponse().status
            finally:
                connection.close()

        async def scenario() -> None:
            raw = shop_error("orders", next(iter(SHOP_BUGS)), 1_700_000_000.0, repos.commits["orders"])
            await kafka_io.produce(settings.kafka.input_topic, [raw])
            stop = asyncio.Event()
            task = asyncio.create_task(service.run(stop))
            try:
                while service.stats.events_in < 1:  # noqa: ASYNC110 - polls the service's counter; no event exists
                    await asyncio.sleep(0.05)
                seen.append(await asyncio.to_thread(probe))
                blocked = threading.Thread(target=lambda: (time.sleep(1.5), seen.append(probe())))
                blocked.start()
                time.sleep(2.5)  # noqa: ASYNC251 - holds the event loop, as a message parsed for seconds would
                blocked.join()
                await asyncio.sleep(0.5)  # a turn or two
                seen.append(await asyncio.to_thread(probe))
            finally:
                stop.set()
                await asyncio.wait_for(task, timeout=30)

        with serve_http("127.0.0.1", 0, Metrics(), health) as endpoint:
            asyncio.run(scenario())
        assert seen == [200, 503, 200]

    @pytest.mark.parametrize("max_turn_s", [0.2, 1e-6])
    def test_a_fetch_of_heavy_messages_is_read_over_several_turns(
        self, settings_factory: SettingsFactory, kafka_io: KafkaIO, shop_repos: Callable[..., ShopRepos],
        max_turn_s: float,
    ) -> None:
        """Distinct Java traces of 512 kB on 16 partitions arrive in fetches of up to 32 of them (a megabyte
        a partition), each some tens of milliseconds of work. Turns of max_turn_s keep /livez up at a 3 s
        stall limit, and every message is read exactly once: also when every turn is cut after its first
        message, and the rest of each fetch is sought back and fetched again."""
        repos = shop_repos("orders")
        settings = settings_factory(partitions=16, pipeline={"max_turn_s": max_turn_s})
        health = HealthState(stall_after_s=3.0)
        service = Service(settings, HeuristicAnalyzer(RepoSync(repos.config)), Metrics(), health)
        stream = [hostile_message(i * len(SHAPES) + SHAPES.index("java"), 512 * 1024) for i in range(64)]
        statuses: list[int] = []
        done = threading.Event()

        def watch(port: int) -> None:
            while not done.is_set():
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/livez")
                statuses.append(connection.getresponse().status)
                connection.close()
                time.sleep(0.05)

        async def scenario() -> None:
            await kafka_io.produce(settings.kafka.input_topic, stream, keys=[str(i).encode() for i in range(64)])
            await run_until(service, lambda: service.stats.events_in >= len(stream) and service.idle(),
                            timeout_s=90)

        with serve_http("127.0.0.1", 0, Metrics(), health) as endpoint:
            watcher = threading.Thread(target=watch, args=(endpoint.port,))
            watcher.start()
            try:
                asyncio.run(scenario())
            finally:
                done.set()
                watcher.join()
        assert service.stats.events_in == len(stream)  # none read twice, none skipped
        assert set(statuses) == {200}
