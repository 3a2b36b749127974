"""`logagent notify` end to end on the tansu broker, against servers that speak each sink's protocol."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from consumer.notify import NotifyService
from consumer.notify.notice import issue_key, parse_notice
from tests.conftest import SECRETS, KafkaIO, SettingsFactory, run_until
from tests.integration.consumer.notify.rig import REPO, all_handled, handled, rig
from tests.notify_events import COMMIT, T0, event_bytes, make_analysis
from tests.protocol_server import Fault

pytestmark = pytest.mark.integration

KEY = [b"checkout-service"]


def _stream() -> list[bytes]:
    """Two failures of checkout-service: the first analysed, then again (recurrence); the second once."""
    first = make_analysis(first_seen=T0)
    again = make_analysis(first_seen=T0 + 600, status="recurrence", recurrence_of=first.analysis_id)
    other = make_analysis(fingerprint="fp-null", first_seen=T0 + 30, confidence=0.4,
                          root_cause="cart is null when <!channel> @here checks out")
    return [event_bytes(a) for a in (first, other, again)]


def _ids(events: list[bytes]) -> list[str]:
    return [orjson.loads(e)["id"] for e in events]


def _produce(kafka_io: KafkaIO, topic: str, events: list[bytes]) -> None:
    asyncio.run(kafka_io.produce(topic, events, keys=KEY * len(events)))


def _marker_count(bodies: list[str], analysis_id: str) -> int:
    return sum(f"logagent:analysis={analysis_id} " in body for body in bodies)


class TestEverySinkDelivers:
    def test_each_analysis_reaches_each_sink_once(self, settings_factory: SettingsFactory, kafka_io: KafkaIO,
                                                  tmp_path: Path) -> None:
        """Slack gets a valid Block Kit message per analysis, the webhook the signed event bytes, GitHub and
        GitLab one issue per failure with the recurrence as a comment; every lane commits to the end."""
        events = _stream()
        with rig(settings_factory, tmp_path) as r:
            _produce(kafka_io, r.topic, events)
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, len(events))))
            assert len(r.slack.messages) == 3
            assert sorted(body for _, body, _ in r.hook.deliveries) == sorted(events)
            assert {headers["idempotency-key"] for _, _, headers in r.hook.deliveries} == set(_ids(events))
            for tracker in (r.github, r.gitlab):
                issues = tracker.issues(REPO)
                assert [len(issue.comments) for issue in issues] == [1, 0]
                first, other, again = _ids(events)
                assert _marker_count([issues[0].body], first) == 1
                assert _marker_count(issues[0].comments, again) == 1
                assert _marker_count([issues[1].body], other) == 1
            for lane in service.lanes:
                committed = asyncio.run(kafka_io.committed(service.group_id(lane.sink.name), r.topic))
                assert sum(v or 0 for v in committed.values()) == len(events), lane.sink.name

    def test_slack_message_shows_the_culprit_linked_at_the_commit(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """The message names server, count and span, exception, root cause, fix and past cases; the culprit
        links to the file and line at the deployed commit; log text cannot mention the channel."""
        events = _stream()
        with rig(settings_factory, tmp_path) as r:
            _produce(kafka_io, r.topic, events)
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, len(events))))
            first, other, _ = r.slack.messages
            text = orjson.dumps(first).decode()
            link = (f"https://git.example.com/acme/checkout-service/blob/{COMMIT}/src/main/java/com/acme/checkout/"
                    "web/QuantityParser.java#L6|src/main/java/com/acme/checkout/web/QuantityParser.java:6>")
            assert link in text
            for shown in ("checkout-service", "42 events in 1m 35s", "java.lang.NumberFormatException",
                          "Root cause", "Suggested fix", "Past cases: `e75231f8` 0.88"):
                assert shown in text, shown
            assert "<!channel>" not in orjson.dumps(other).decode()
            assert "&lt;!channel&gt;" in orjson.dumps(other).decode()

    def test_unknown_fields_and_extensions_are_ignored_and_bad_records_go_to_the_dlq(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """An event with new optional fields and CloudEvents extensions is delivered as usual; a record that is
        not an analysis event goes to the DLQ once per sink with its reason, and nothing blocks."""
        doc = orjson.loads(event_bytes(make_analysis()))
        doc["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        doc["partitionkey"] = "checkout-service"
        doc["data"]["blast_radius"] = {"users": 12}
        doc["data"]["cluster"]["region"] = "eu-west-1"
        extended = orjson.dumps(doc)
        other_type = orjson.dumps({**doc, "type": "logagent.review.v1"})
        with rig(settings_factory, tmp_path) as r:
            _produce(kafka_io, r.topic, [b"{not json", extended, other_type])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 3)))
            assert len(r.slack.messages) == 1 and len(r.github.issues(REPO)) == 1
            assert [body for _, body, _ in r.hook.deliveries] == [extended]
            dlq = asyncio.run(kafka_io.read_all(r.settings.notify.dlq_topic))
            assert sorted(record.headers["sink"] for record in dlq) == [b"github", b"gitlab", b"slack", b"webhook"]
            assert {record.headers["reason"] for record in dlq} == {b"not_json"}
            assert {record.value for record in dlq} == {b"{not json"}
            for lane in service.lanes:
                assert lane.stats.outcomes == {"failed": 1, "delivered": 1, "skipped": 1}, lane.sink.name


    def test_a_time_past_the_calendar_or_a_record_near_the_limit_goes_to_the_dlq_and_delivery_goes_on(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """A burst stamped in the year 3,170,843 ended the lane on rendering it (and again on restart), and a
        DLQ copy of a ~1 MiB record was refused for its added headers (attacker review): both go to the DLQ,
        the second cut and named by its digest, and the next analysis is delivered."""
        doc = orjson.loads(event_bytes(make_analysis(fingerprint="fp-future")))
        doc["data"]["cluster"]["first_seen"] = doc["data"]["cluster"]["last_seen"] = 1e14
        huge = b"x" * 1_048_300
        with rig(settings_factory, tmp_path) as r:
            _produce(kafka_io, r.topic, [orjson.dumps(doc), huge, event_bytes(make_analysis())])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 3)))
            assert len(r.slack.messages) == 1 and len(r.github.issues(REPO)) == 1
            dlq = asyncio.run(kafka_io.read_all(r.settings.notify.dlq_topic))
            assert len(dlq) == 8
            cut = [record for record in dlq if "truncated" in record.headers]
            assert len(cut) == 4 and all(len(record.value) < len(huge) for record in cut)
            assert {record.headers["original_bytes"] for record in cut} == {str(len(huge)).encode()}
            for lane in service.lanes:
                assert lane.stats.outcomes == {"failed": 2, "delivered": 1}, lane.sink.name


class TestRedaction:
    def test_a_secret_in_an_unredacted_event_reaches_no_sink(self, settings_factory: SettingsFactory,
                                                               kafka_io: KafkaIO, tmp_path: Path) -> None:
        """An event some producer did not redact (a token in the root cause, an email in a sample, a key in
        an unknown field) leaves redacted to Slack, the webhook, GitHub and GitLab; a clean event is
        forwarded byte for byte (the first test)."""
        planted = {SECRETS["github"], SECRETS["email"], SECRETS["aws"]}
        analysis = make_analysis(root_cause=f"token {SECRETS['github']} in the config")
        doc = orjson.loads(event_bytes(analysis))
        doc["data"]["cluster"]["sample_messages"] = [f"mail to {SECRETS['email']} failed"]
        doc["data"]["deploy"] = {"aws": SECRETS["aws"]}
        with rig(settings_factory, tmp_path) as r:
            _produce(kafka_io, r.topic, [orjson.dumps(doc)])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 1)))
            sent = [q.body.decode() for server in (r.slack, r.hook, r.github, r.gitlab) for q in server.requests]
            assert len(sent) >= 5
            leaks = [secret for secret in planted for body in sent if secret in body]
            assert not leaks, leaks
            assert "in the config" in "".join(sent)


class TestRouting:
    def test_each_sink_takes_only_what_its_route_allows(self, settings_factory: SettingsFactory,
                                                        kafka_io: KafkaIO, tmp_path: Path) -> None:
        """Server globs, tenants, statuses, confidence and minimum count decide per sink; refused analyses
        are skipped and committed."""
        analyses = [
            make_analysis(first_seen=T0),                                          # all
            make_analysis("payments-api", "fp-pay", first_seen=T0 + 1),            # not checkout-*
            make_analysis(fingerprint="fp-low", first_seen=T0 + 2, confidence=0.2),  # below confidence
            make_analysis(fingerprint="fp-few", first_seen=T0 + 3, count=2),       # too few events
            make_analysis(fingerprint="fp-fail", first_seen=T0 + 4, status="failed", confidence=0.9),
            make_analysis(fingerprint="fp-tenant", first_seen=T0 + 5, tenant="globex"),
        ]
        events = [event_bytes(a) for a in analyses]
        route = {"servers": ["checkout-*"], "tenants": ["acme"], "statuses": ["analyzed", "recurrence"],
                 "min_confidence": 0.5, "min_count": 5}
        with rig(settings_factory, tmp_path) as r:
            slack = r.settings.notify.slack.model_copy(update=route)
            settings = r.settings.model_copy(update={"notify": r.settings.notify.model_copy(update={"slack": slack})})
            _produce(kafka_io, r.topic, events)
            service = NotifyService(settings)
            asyncio.run(run_until(service, all_handled(service, len(events))))
            assert len(r.slack.messages) == 1
            assert analyses[0].analysis_id in orjson.dumps(r.slack.messages[0]).decode()
            assert len(r.hook.deliveries) == len(events)  # the webhook's route takes everything
            slack_lane = next(lane for lane in service.lanes if lane.sink.name == "slack")
            assert slack_lane.stats.outcomes == {"delivered": 1, "skipped": 5}

    def test_rate_limit_spaces_deliveries_without_dropping_any(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """At 120 a minute with a burst of 1, four messages take at least 1.5 s, and all four arrive."""
        events = [event_bytes(make_analysis(fingerprint=f"fp-{i}", first_seen=T0 + i)) for i in range(4)]
        with rig(settings_factory, tmp_path) as r:
            notify = r.settings.notify
            slack = notify.slack.model_copy(update={"rate_per_minute": 120.0, "rate_burst": 1})
            off = {"enabled": False}
            settings = r.settings.model_copy(update={"notify": notify.model_copy(update={
                "slack": slack, "webhook": notify.webhook.model_copy(update=off),
                "github": notify.github.model_copy(update=off), "gitlab": notify.gitlab.model_copy(update=off)})})
            _produce(kafka_io, r.topic, events)
            service = NotifyService(settings)
            started: list[float] = []

            def done() -> bool:
                if not started and r.slack.messages:
                    started.append(time.monotonic())
                return len(r.slack.messages) == 4

            asyncio.run(run_until(service, done))
            assert time.monotonic() - started[0] >= 1.4
            assert len({orjson.dumps(m) for m in r.slack.messages}) == 4


class TestFaults:
    def test_429_and_5xx_are_retried_after_retry_after(self, settings_factory: SettingsFactory,
                                                       kafka_io: KafkaIO, tmp_path: Path) -> None:
        """Slack's 429 with Retry-After: 1 is waited out (not the 50 ms backoff) and a 500 retried; GitHub's
        secondary (retry-after) and primary (x-ratelimit-reset) 403 limits are retried too; one message
        and one issue result, and the retries are counted by reason."""
        events = [event_bytes(make_analysis())]
        with rig(settings_factory, tmp_path) as r:
            r.slack.inject(Fault.status(429, "rate_limited", {"retry-after": "1"}), Fault.status(500, "rollup_error"))
            r.github.inject(
                Fault.status(403, '{"message": "You have exceeded a secondary rate limit."}', {"retry-after": "1"}),
                Fault.status(403, '{"message": "API rate limit exceeded"}', {
                    "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 1)}))
            _produce(kafka_io, r.topic, events)
            service = NotifyService(r.settings)
            started = time.monotonic()
            asyncio.run(run_until(service, all_handled(service, 1)))
            assert time.monotonic() - started >= 1.0
            assert len(r.slack.messages) == 1 and len(r.github.issues(REPO)) == 1
            retries = service.metrics.retries
            assert retries.labels("slack", "rate_limited")._value.get() == 1
            assert retries.labels("slack", "server_error")._value.get() == 1
            assert retries.labels("github", "rate_limited")._value.get() == 2

    def test_permanent_failure_goes_to_the_dlq_with_its_reason(self, settings_factory: SettingsFactory,
                                                               kafka_io: KafkaIO, tmp_path: Path) -> None:
        """An archived channel (410) is not retried: counted as failed, in the DLQ with reason `rejected`
        and Slack's error, and the offset is committed so the stream goes on."""
        events = [event_bytes(make_analysis(fingerprint=f"fp-{i}", first_seen=T0 + i)) for i in range(2)]
        with rig(settings_factory, tmp_path) as r:
            r.slack.archived = True
            _produce(kafka_io, r.topic, events)
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 2)))
            dlq = [rec for rec in asyncio.run(kafka_io.read_all(r.settings.notify.dlq_topic))
                   if rec.headers["sink"] == b"slack"]
            assert [rec.headers["reason"] for rec in dlq] == [b"rejected", b"rejected"]
            assert b"channel_is_archived" in dlq[0].headers["error"]
            assert sorted(rec.value for rec in dlq) == sorted(events)
            assert len([q for q in r.slack.requests if q.method == "POST"]) == 2  # one try each
            assert service.metrics.dlq.labels("slack", "rejected")._value.get() == 2
            assert service.metrics.deliveries.labels("slack", "failed")._value.get() == 2
            assert len(r.github.issues(REPO)) == 2

    def test_a_sink_that_is_down_does_not_hold_the_others(self, settings_factory: SettingsFactory,
                                                          kafka_io: KafkaIO, tmp_path: Path) -> None:
        """The webhook refuses connections: Slack and GitHub deliver everything while it is still retrying;
        after its attempts it puts each analysis in the DLQ (`retries_exhausted`) and commits."""
        events = [event_bytes(make_analysis(fingerprint=f"fp-{i}", first_seen=T0 + i)) for i in range(3)]
        with rig(settings_factory, tmp_path) as r:
            notify = r.settings.notify
            dead = notify.webhook.model_copy(update={"url": type(notify.webhook.url)("http://127.0.0.1:9/hook")})
            settings = r.settings.model_copy(update={"notify": notify.model_copy(update={
                "webhook": dead, "retry_initial_s": 0.4, "retry_max_s": 0.4, "retry_attempts": 3})})
            _produce(kafka_io, r.topic, events)
            service = NotifyService(settings)
            asyncio.run(run_until(service, lambda: bool(service.lanes) and handled(service, "slack") == 3
                                  and handled(service, "github") == 3))
            given_up = handled(service, "webhook")
            assert given_up < 3  # each of its analyses takes >= 0.8 s of backoff
            assert len(r.slack.messages) == 3 and len(r.github.issues(REPO)) == 3
            service = NotifyService(settings)
            asyncio.run(run_until(service, lambda: bool(service.lanes)
                                  and handled(service, "webhook") + given_up >= 3, 20))
            dlq = list(asyncio.run(kafka_io.read_all(settings.notify.dlq_topic)))
            assert sorted(rec.value for rec in dlq) == sorted(events)
            assert {rec.headers["reason"] for rec in dlq} == {b"retries_exhausted"}
            assert {rec.headers["attempts"] for rec in dlq} == {b"3"}
            assert len(r.slack.messages) == 3  # the restart replayed nothing Slack already had

    def test_a_lost_response_never_opens_a_second_issue(self, settings_factory: SettingsFactory,
                                                        kafka_io: KafkaIO, tmp_path: Path) -> None:
        """GitHub creates the issue but the answer is lost (connection cut): the retry looks the issue up,
        finds this analysis in it, and writes nothing more. Same for a comment."""
        first = make_analysis(first_seen=T0)
        again = make_analysis(first_seen=T0 + 600, status="recurrence")
        with rig(settings_factory, tmp_path) as r:
            posts = lambda q: q.method == "POST"  # noqa: E731 - a one-line predicate
            r.github.inject(Fault.drop_after(matches=posts), Fault.drop_after(matches=posts))
            _produce(kafka_io, r.topic, [event_bytes(first), event_bytes(again)])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 2)))
            [issue] = r.github.issues(REPO)
            assert len(issue.comments) == 1
            assert service.metrics.deliveries.labels("github", "duplicate")._value.get() == 2
            assert service.metrics.retries.labels("github", "transport")._value.get() == 2

    def test_dropped_labels_stop_before_a_duplicate(self, settings_factory: SettingsFactory,
                                                    kafka_io: KafkaIO, tmp_path: Path) -> None:
        """A token that may not set labels gets its labels silently dropped by GitHub: the sink notices the
        issue lacks its key label and sends the analysis to the DLQ instead of opening more issues later."""
        with rig(settings_factory, tmp_path) as r:
            r.github.drop_labels = True
            _produce(kafka_io, r.topic, [event_bytes(make_analysis())])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 1)))
            dlq = list(asyncio.run(kafka_io.read_all(r.settings.notify.dlq_topic)))
            assert [rec.headers["reason"] for rec in dlq] == [b"labels_dropped"]

    def test_a_closed_issue_is_reopened_when_the_failure_comes_back(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """Closed as completed, the issue reopens with the new analysis as a comment; closed as not planned,
        it only gets the comment."""
        first = make_analysis(first_seen=T0)
        with rig(settings_factory, tmp_path) as r:
            _produce(kafka_io, r.topic, [event_bytes(first), event_bytes(make_analysis("payments-api", "fp-x"))])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 2)))
            r.github.close(REPO, 1, "completed")
            r.github.close(REPO, 2, "not_planned")
            _produce(kafka_io, r.topic, [event_bytes(make_analysis(first_seen=T0 + 900)),
                                         event_bytes(make_analysis("payments-api", "fp-x", first_seen=T0 + 900))])
            service = NotifyService(r.settings)
            asyncio.run(run_until(service, all_handled(service, 2)))
            done, declined = r.github.issues(REPO)
            assert (done.state, len(done.comments)) == ("open", 1)
            assert (declined.state, len(declined.comments)) == ("closed", 1)
            assert issue_key(parse_notice(event_bytes(first))) in done.labels  # type: ignore[arg-type]



class TestReplicas:
    def test_two_replicas_and_their_rebalances_never_duplicate_an_issue(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO, tmp_path: Path) -> None:
        """Replica B joins while A delivers, then A leaves: across both rebalances every failure has one issue
        and every analysis appears exactly once in it (GitHub answers slowly, so rebalances land mid-work)."""
        failures = [("checkout-service", "fp-a"), ("checkout-service", "fp-b"), ("orders", "fp-c"),
                    ("orders", "fp-d"), ("payments", "fp-e"), ("payments", "fp-f")]
        analyses = [make_analysis(server, fp, first_seen=T0 + r * 600) for r in range(3) for server, fp in failures]
        # Two partitions, so the joining replica takes one over (keyed by server: orders and payments hash
        # to one, checkout-service to the other); on one partition it would idle until the first left.
        with rig(settings_factory, tmp_path, analyses_partitions=2) as r:
            r.github.delay_s = 0.05
            notify = r.settings.notify
            off = {"enabled": False}
            settings = r.settings.model_copy(update={"notify": notify.model_copy(update={
                "slack": notify.slack.model_copy(update=off), "webhook": notify.webhook.model_copy(update=off),
                "gitlab": notify.gitlab.model_copy(update=off)})})
            asyncio.run(kafka_io.produce(r.topic, [event_bytes(a) for a in analyses],
                                         keys=[a.cluster.server.encode() for a in analyses]))

            async def scenario() -> None:
                first, second = NotifyService(settings), NotifyService(settings)
                stop_first, stop_second = asyncio.Event(), asyncio.Event()
                task_first = asyncio.create_task(first.run(stop_first))
                task_second: asyncio.Task[None] | None = None
                try:
                    await _until(lambda: handled_by(first) >= 3, "the first replica's first deliveries")
                    task_second = asyncio.create_task(second.run(stop_second))
                    await _until(lambda: handled_by(second) >= 1, "the second replica's first delivery")
                    stop_first.set()
                    await asyncio.wait_for(task_first, 30)
                    await _until(lambda: sum(1 + len(i.comments) for i in r.github.issues(REPO)) >= len(analyses),
                                 "the second replica finishing the work")
                    stop_second.set()
                    await asyncio.wait_for(task_second, 30)
                    shares.extend([handled_by(first), handled_by(second)])
                finally:  # a failed step stops both replicas, within a bound, instead of cancelling them
                    stop_first.set()
                    stop_second.set()
                    running = [t for t in (task_first, task_second) if t is not None]
                    await asyncio.wait_for(asyncio.gather(*running, return_exceptions=True), 30)

            shares: list[int] = []
            asyncio.run(scenario())
            assert all(shares), shares  # both replicas delivered
            issues = r.github.issues(REPO)
            assert len(issues) == len(failures)
            for analysis in analyses:
                texts = [text for issue in issues for text in (issue.body, *issue.comments)]
                assert _marker_count(texts, analysis.analysis_id) == 1, analysis.analysis_id


async def _until(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{what} not reached in {timeout_s}s")


def handled_by(service: NotifyService) -> int:
    """Analyses the service's lanes finished (0 before they exist)."""
    return sum(sum(lane.stats.outcomes.values()) for lane in service.lanes)
