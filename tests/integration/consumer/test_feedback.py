"""The feedback topic end to end: a real tansu broker, a real LanceDB memory and the real ONNX embedder."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from analysis.intake.redact import Redactor, redact_id
from consumer.feedback import Feedback, FeedbackListener, publish_feedback
from consumer.settings import Settings
from store import MemoryStore, NewCase, OnnxEmbedder, RecallQuery
from tests.conftest import KafkaIO, SettingsFactory, TopicFactory

pytestmark = pytest.mark.integration

NOW = 1_750_000_000.0
DAY = 86_400.0
SERVER = "orders"


@pytest.fixture
def feedback_settings(settings_factory: SettingsFactory, topic_factory: TopicFactory) -> Callable[..., Settings]:
    """Settings on the test broker with a fresh feedback topic; keyword arguments override memory fields."""
    def build(**memory: Any) -> Settings:
        settings = settings_factory(kafka={"feedback_topic": topic_factory("feedback")})
        ranking = settings.memory.ranking.model_copy(update={"dedup_cosine": 1.0})
        return settings.model_copy(update={"memory": settings.memory.model_copy(
            update={"ranking": ranking, **memory})})
    return build


def remember(memory: MemoryStore, memory_id: str, *, error: str, age_days: float = 0.0) -> None:
    """Store an LLM-made case of a KeyError in OrderService.total."""
    analysis = {"root_cause": f"the order has no price ({memory_id})",
                "culprit": {"path": "app/shop.py", "line": 2, "function": "total"}}
    memory.remember(NewCase(
        id=memory_id, server=SERVER, tenant="acme", scope="default", fingerprint=f"fp-{memory_id}",
        exception_type="KeyError", error_text=error, analysis_json=json.dumps(analysis), analyzer="llm",
        commit="c1", created_at=NOW - age_days * DAY,
    ))


def recalled_ids(memory: MemoryStore) -> list[str]:
    """Ids recalled for a new KeyError burst in `total`, best first."""
    result = memory.recall(RecallQuery(
        server=SERVER, tenant="acme", scope="default", fingerprint="fp-new", exception_type="KeyError",
        text="KeyError: 'price' at app.shop.total", now=NOW + 60, identifiers=("KeyError", "total"),
        commit="c1"))
    return [case.memory_id for case in result.cases]


def case_of(memory: MemoryStore, memory_id: str) -> Any:
    """The stored summary of one case, or None when it is gone."""
    return next((c for c in memory.list_cases(SERVER) if c.memory_id == memory_id), None)


async def run_until(listener: FeedbackListener, done: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Run the listener until `done()` holds, then stop it and wait for it to leave."""
    stop = asyncio.Event()
    task = asyncio.create_task(listener.run(stop))
    deadline = time.monotonic() + timeout_s
    try:
        while not done():
            if task.done():
                task.result()
                raise AssertionError("the listener stopped by itself")
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not reached in {timeout_s}s; stats: {listener.stats}")
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=15)


class TestFeedbackListener:
    def test_correct_raises_trust_to_human_and_the_rank(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder
    ) -> None:
        """A `correct` verdict published to the topic makes the case human-confirmed, and it overtakes a
        newer peer it used to rank below."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "older", error="KeyError: 'price' at app.shop.total in checkout", age_days=3)
        remember(memory, "newer", error="KeyError: 'price' at app.shop.total in cart")
        assert recalled_ids(memory)[:2] == ["newer", "older"]
        listener = FeedbackListener(settings, memory)

        asyncio.run(publish_feedback(settings, Feedback("older", "correct", "confirmed by on-call")))
        asyncio.run(run_until(listener, lambda: listener.stats.applied == 1))

        older = case_of(memory, "older")
        assert older.trust == settings.memory.trust.human and older.feedback == 1.0
        assert recalled_ids(memory)[:2] == ["older", "newer"]

    def test_wrong_lowers_trust(self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder) -> None:
        """A `wrong` verdict multiplies the case's trust by the wrong factor and counts against it."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "bad", error="KeyError: 'price' at app.shop.total")
        before = case_of(memory, "bad").trust
        listener = FeedbackListener(settings, memory)

        asyncio.run(publish_feedback(settings, Feedback("bad", "wrong", server=SERVER)))
        asyncio.run(run_until(listener, lambda: listener.stats.applied == 1))

        after = case_of(memory, "bad")
        assert after.trust == pytest.approx(before * settings.memory.trust.wrong_factor)
        assert after.feedback == -1.0

    def test_a_note_is_stored_redacted(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder
    ) -> None:
        """A note is untrusted text like a log: a secret or an address pasted into it is never stored (the case
        row and the verdict log both keep the redacted note), as `logagent memory show` would print it."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "noted", error="KeyError: 'price' at app.shop.total")
        listener = FeedbackListener(settings, memory)
        note = "db is fine, password=Hunter2Secret! ask alice@example.com"

        asyncio.run(publish_feedback(settings, Feedback("noted", "correct", note, server=SERVER)))
        asyncio.run(run_until(listener, lambda: listener.stats.applied == 1))

        detail = memory.show("noted", NOW, server=SERVER)
        assert detail is not None
        stored = [detail.verdicts[-1].note, case_of(memory, "noted").note]
        assert all("db is fine" in text for text in stored), stored
        assert not any("Hunter2Secret" in text or "alice@example.com" in text for text in stored), stored

    def test_wrong_forgets_when_configured(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder
    ) -> None:
        """With `forget_on_wrong`, a `wrong` verdict deletes the case."""
        settings = feedback_settings(forget_on_wrong=True)
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "bad", error="KeyError: 'price' at app.shop.total")
        remember(memory, "kept", error="KeyError: 'qty' at app.shop.total")
        listener = FeedbackListener(settings, memory)

        asyncio.run(publish_feedback(settings, Feedback("bad", "wrong")))
        asyncio.run(run_until(listener, lambda: listener.stats.applied == 1))

        assert case_of(memory, "bad") is None
        assert case_of(memory, "kept") is not None

    def test_bad_and_unknown_messages_are_skipped_and_committed(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder, kafka_io: KafkaIO
    ) -> None:
        """Malformed messages and unknown ids are logged and skipped; the verdict after them is applied and
        the group's committed offset moves past all of them."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "good", error="KeyError: 'price' at app.shop.total")
        topic = settings.kafka.feedback_topic
        asyncio.run(kafka_io.produce(topic, [
            b"not json at all",
            b'["a list"]',
            b'{"analysis_id": "good", "verdict": "maybe"}',
            b'{"verdict": "correct"}',
            b'{"analysis_id": 42, "verdict": "correct"}',
            b'{"analysis_id": "nobody-knows-me", "verdict": "correct"}',
            b'{"analysis_id": "good", "verdict": "correct"}',
        ]))
        listener = FeedbackListener(settings, memory)

        asyncio.run(run_until(listener, lambda: listener.stats.applied == 1))

        assert listener.stats.bad == 5 and listener.stats.unknown == 1
        assert case_of(memory, "good").feedback == 1.0
        committed = asyncio.run(kafka_io.committed(f"{settings.kafka.group_id}-feedback", topic))
        assert committed == {0: 7}

    def test_a_verdict_delivered_again_counts_once(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder, kafka_io: KafkaIO
    ) -> None:
        """A message redelivered (a listener killed before its commit: here a second group reads the topic
        again) and a copy of one `feedback_id` each count once; two messages without an id are two."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "twice", error="KeyError: 'price' at app.shop.total")
        before = case_of(memory, "twice").trust
        topic = settings.kafka.feedback_topic
        no_id = b'{"analysis_id": "twice", "verdict": "wrong", "server": "orders"}'
        asyncio.run(kafka_io.produce(topic, [no_id, no_id]))
        for _ in range(2):
            asyncio.run(publish_feedback(settings, Feedback("twice", "wrong", feedback_id="fb-1")))
        for group, applied in (("first", 3), ("again", 0)):
            regrouped = settings.model_copy(update={"kafka": settings.kafka.model_copy(update={"group_id": group})})
            listener = FeedbackListener(regrouped, memory)
            stats = listener.stats
            asyncio.run(run_until(listener, lambda: stats.applied + stats.duplicate == 4))  # noqa: B023 (run at once)

            assert (stats.applied, stats.duplicate) == (applied, 4 - applied), group  # counted as what they did
            case = case_of(memory, "twice")
            assert case.feedback == -3.0, group
            assert case.trust == pytest.approx(before * settings.memory.trust.wrong_factor ** 3), group
        detail = memory.show("twice", NOW, server=SERVER)
        assert detail is not None and len(detail.verdicts) == 3

    def test_a_verdict_for_another_tenant_touches_nothing(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder
    ) -> None:
        """A verdict that names a tenant judges only that tenant's case: sent for `globex` on an `acme`
        case it is unknown (and forgets nothing, with forget_on_wrong); sent for `acme` it applies."""
        settings = feedback_settings(forget_on_wrong=True)
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "theirs", error="KeyError: 'price' at app.shop.total")
        listener = FeedbackListener(settings, memory)

        asyncio.run(publish_feedback(settings, Feedback("theirs", "wrong", tenant="globex")))
        asyncio.run(publish_feedback(settings, Feedback("theirs", "correct", tenant="globex")))
        asyncio.run(run_until(listener, lambda: listener.stats.unknown == 2))
        assert case_of(memory, "theirs").feedback == 0.0

        asyncio.run(publish_feedback(settings, Feedback("theirs", "correct", tenant="acme")))
        asyncio.run(run_until(listener, lambda: listener.stats.applied == 1))
        assert case_of(memory, "theirs").feedback == 1.0

    def test_a_deployment_of_one_tenant_judges_only_its_cases(
        self, feedback_settings: Callable[..., Settings], embedder: OnnxEmbedder
    ) -> None:
        """With `input.tenant`, a verdict naming no tenant is that tenant's, and one naming another is
        skipped as unknown before the memory is asked: on a feedback topic shared by every tenant's
        deployment, globex's cannot judge acme's cases, even with acme's analysis ids."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        remember(memory, "acmes", error="KeyError: 'price' at app.shop.total")
        globex = settings.model_copy(update={"input": settings.input.model_copy(update={"tenant": "globex"})})
        listener = FeedbackListener(globex, memory)
        asyncio.run(publish_feedback(settings, Feedback("acmes", "correct")))
        asyncio.run(publish_feedback(settings, Feedback("acmes", "correct", tenant="acme")))
        asyncio.run(run_until(listener, lambda: listener.stats.unknown == 2))
        assert case_of(memory, "acmes").feedback == 0.0 and listener.stats.applied == 0

        acme = settings.model_copy(update={"input": settings.input.model_copy(update={"tenant": "acme"}),
                                           "kafka": settings.kafka.model_copy(update={"group_id": "acme"})})
        listener = FeedbackListener(acme, memory)
        asyncio.run(run_until(listener, lambda: listener.stats.applied == 2))
        assert case_of(memory, "acmes").feedback == 2.0

    def test_a_tenant_named_by_an_email_is_found(self, feedback_settings: Callable[..., Settings],
                                                 embedder: OnnxEmbedder) -> None:
        """The memory keeps a tenant or server named by an email or address as the service redacted it
        (`redact_id`); a verdict naming them as the producer did still finds the case."""
        settings = feedback_settings()
        memory = MemoryStore(settings.memory, embedder)
        redactor = Redactor(settings.redaction)
        tenant, server = redact_id("ops@acme.example", redactor), redact_id("203.0.113.7", redactor)
        assert tenant != "ops@acme.example" and server != "203.0.113.7"
        memory.remember(NewCase(
            id="mailed", server=server, tenant=tenant, scope="default", fingerprint="fp-mailed",
            exception_type="KeyError", error_text="KeyError: 'price'", analysis_json="{}", analyzer="llm",
            commit="c1", created_at=NOW))
        listener = FeedbackListener(settings, memory)
        asyncio.run(publish_feedback(settings, Feedback("mailed", "correct", server="203.0.113.7",
                                                        tenant="ops@acme.example")))
        asyncio.run(run_until(listener, lambda: listener.stats.applied + listener.stats.unknown == 1))
        assert listener.stats.applied == 1

        # A deployment of that tenant takes a verdict naming it as the analysis event shows it (redacted).
        pinned = settings.model_copy(update={
            "input": settings.input.model_copy(update={"tenant": "ops@acme.example"}),
            "kafka": settings.kafka.model_copy(update={"group_id": "pinned"})})
        asyncio.run(publish_feedback(settings, Feedback("mailed", "correct", tenant=tenant)))
        listener = FeedbackListener(pinned, memory)
        stats = listener.stats  # the first verdict again (its id known: a duplicate), then this one
        asyncio.run(run_until(listener, lambda: stats.applied + stats.duplicate + stats.unknown == 2))
        assert (stats.applied, stats.duplicate) == (1, 1)

    def test_stops_promptly_when_idle(self, feedback_settings: Callable[..., Settings],
                                      embedder: OnnxEmbedder) -> None:
        """Setting `stop` ends `run` within a poll or two, even with nothing to consume."""
        settings = feedback_settings()
        listener = FeedbackListener(settings, MemoryStore(settings.memory, embedder))

        async def scenario() -> float:
            stop = asyncio.Event()
            task = asyncio.create_task(listener.run(stop))
            await asyncio.sleep(2.0)
            assert not task.done()
            stop.set()
            started = time.monotonic()
            await asyncio.wait_for(task, timeout=10)
            return time.monotonic() - started

        assert asyncio.run(scenario()) < 5.0
