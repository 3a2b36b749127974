"""Human verdicts on analyses: the feedback topic's listener, its message format, and the CLI's publisher.

A feedback message is JSON `{"analysis_id": "...", "verdict": "correct"|"wrong", "note"?: "...",
"server"?: "...", "tenant"?: "...", "feedback_id"?: "..."}`; with a `tenant` the verdict applies only to a
case of that tenant. `correct` raises the remembered case to human-confirmed trust;
`wrong` lowers it or forgets it (`memory.forget_on_wrong`). Delivery is at least once: an offset is
committed only after its verdict was applied, or after a bad message was logged and skipped, so nothing
blocks the topic. A verdict delivered again counts once: it is known by its `feedback_id` (the CLI sets
one; another producer's retries keep theirs), or else by its position on the topic.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from analysis.intake.field import MAX_ID_CHARS
from analysis.intake.redact import Redactor, redact_id
from consumer.kafka import (
    commit_offsets,
    make_consumer,
    make_producer,
    poll,
    start_client,
    start_with_retry,
    stop_clients,
)
from consumer.metrics import Metrics
from consumer.retry import Backoff, sleep_unless
from consumer.settings import Settings
from store import Judged, MemoryStore, RefusedCase, StoreError

__all__ = ["BadFeedback", "Feedback", "FeedbackListener", "FeedbackStats", "encode_feedback",
           "parse_feedback", "publish_feedback"]

log = logging.getLogger("logagent.feedback")

Verdict = Literal["correct", "wrong"]
_VERDICTS: frozenset[str] = frozenset({"correct", "wrong"})
_MAX_MESSAGE_BYTES = 64 * 1024
_MAX_NOTE_CHARS = 2000
_POLL_MS = 200


class BadFeedback(ValueError):
    """A feedback message that cannot be applied; `reason` is a short, bounded label for the log."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Feedback:
    """One verdict on one analysis; without `server` every memory table is searched for the id. With
    `tenant` only that tenant's case is judged. `feedback_id` names this verdict, so a copy counts once."""

    analysis_id: str
    verdict: Verdict
    note: str = ""
    server: str | None = None
    feedback_id: str | None = None
    tenant: str | None = None


@dataclass
class FeedbackStats:
    """What the listener did since it started."""

    applied: int = 0
    duplicate: int = 0
    unknown: int = 0
    bad: int = 0


def _text_field(doc: Mapping[str, Any], name: str, limit: int) -> str | None:
    """A short printable string field, or None when absent or empty."""
    value = doc.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadFeedback(f"bad_{name}", f"{name} must be a string")
    if len(value) > limit or not value.isprintable():
        raise BadFeedback(f"bad_{name}", f"{name} must be printable and at most {limit} characters")
    return value


def parse_feedback(raw: bytes | None) -> Feedback:
    """The feedback a message carries; raises BadFeedback with a reason for anything else."""
    if raw is None:
        raise BadFeedback("empty")
    if len(raw) > _MAX_MESSAGE_BYTES:
        raise BadFeedback("too_large", f"{len(raw)} bytes")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadFeedback("not_json", str(exc)[:100]) from None
    if not isinstance(doc, dict):
        raise BadFeedback("not_object")
    analysis_id = _text_field(doc, "analysis_id", MAX_ID_CHARS)
    if analysis_id is None:
        raise BadFeedback("missing_analysis_id")
    verdict = doc.get("verdict")
    if verdict not in _VERDICTS:
        raise BadFeedback("bad_verdict", "verdict must be 'correct' or 'wrong'")
    note = doc.get("note") or ""
    if not isinstance(note, str):
        raise BadFeedback("bad_note", "note must be a string")
    server = _text_field(doc, "server", MAX_ID_CHARS)
    checked: Verdict = "correct" if verdict == "correct" else "wrong"
    return Feedback(analysis_id, checked, note[:_MAX_NOTE_CHARS], server,
                    _text_field(doc, "feedback_id", MAX_ID_CHARS), _text_field(doc, "tenant", MAX_ID_CHARS))


def encode_feedback(feedback: Feedback) -> bytes:
    """The message `parse_feedback` reads back."""
    doc: dict[str, str] = {"analysis_id": feedback.analysis_id, "verdict": feedback.verdict}
    if feedback.note:
        doc["note"] = feedback.note
    if feedback.server:
        doc["server"] = feedback.server
    if feedback.feedback_id:
        doc["feedback_id"] = feedback.feedback_id
    if feedback.tenant:
        doc["tenant"] = feedback.tenant
    return orjson.dumps(doc)


async def publish_feedback(settings: Settings, feedback: Feedback) -> None:
    """Send one verdict to the feedback topic (keyed by analysis id) and wait for the broker's ack; it
    gets a fresh `feedback_id` unless it has one."""
    if not feedback.feedback_id:
        feedback = replace(feedback, feedback_id=str(uuid.uuid4()))
    producer = make_producer(settings.kafka)
    await start_client(producer, settings.kafka)  # a broker it cannot reach: one line naming the setting
    try:
        await producer.send_and_wait(settings.kafka.feedback_topic, value=encode_feedback(feedback),
                                     key=feedback.analysis_id.encode())
    finally:
        await producer.stop()


class FeedbackListener:
    """Consumes the feedback topic (group `<group_id>-feedback`) and applies each verdict to the memory.

    Auto-commit is off: an offset is committed after its verdict was applied (or the message was skipped
    as bad, or its analysis id is unknown). Store faults that may heal are retried with capped, jittered
    backoff until they succeed or `stop` is set; anything else propagates.
    """

    def __init__(self, settings: Settings, memory: MemoryStore, metrics: Metrics | None = None) -> None:
        self._kafka = settings.kafka.model_copy(update={
            "input_topic": settings.kafka.feedback_topic,
            "group_id": f"{settings.kafka.group_id}-feedback",
        })
        self._memory = memory
        self._metrics = metrics
        self._redactor = Redactor(settings.redaction)  # a note is stored and shown: a pasted secret goes first
        # A deployment's one tenant, as its cases hold it (`redact_id`): only its cases are judged here.
        self._tenant = redact_id(settings.input.tenant, self._redactor)
        # A verdict is retried until it is applied or the service stops: `attempts` bounds nothing here.
        p = settings.pipeline
        self._backoff = Backoff(p.retry_initial_s, p.retry_max_s, attempts=0)
        self.stats = FeedbackStats()

    def _count(self, outcome: str) -> None:
        setattr(self.stats, outcome, getattr(self.stats, outcome) + 1)
        if self._metrics is not None:
            self._metrics.feedback.labels(outcome).inc()

    async def run(self, stop: asyncio.Event) -> None:
        """Apply verdicts until `stop` is set; then commit what was applied and leave the group."""
        consumer = make_consumer(self._kafka)
        if not await start_with_retry(consumer, stop, self._backoff, "feedback consumer"):
            return
        try:
            while not stop.is_set():
                batch = await poll(consumer, _POLL_MS)
                done: dict[TopicPartition, int] = {}
                for tp, messages in batch.items():
                    for message in messages:
                        if not await self._handle(message, stop):
                            break  # stopping before this verdict was applied: it is redelivered
                        done[tp] = message.offset + 1
                if done:
                    await self._commit(consumer, done)
        finally:
            await stop_clients(consumer)

    async def _commit(self, consumer: Any, done: Mapping[TopicPartition, int]) -> None:
        try:
            await commit_offsets(consumer, done)
        except KafkaError as error:
            # A rebalance took the partition: its next owner re-applies these verdicts (at least once).
            log.warning("feedback offset commit failed", extra={"fields": {"error": type(error).__name__}})

    async def _handle(self, message: Any, stop: asyncio.Event) -> bool:
        """Apply one message; False only when `stop` interrupted a retry (the message stays uncommitted)."""
        try:
            feedback = parse_feedback(message.value)
        except BadFeedback as bad:
            self._count("bad")
            log.warning("feedback message skipped", extra={"fields": {"reason": bad.reason, "error": str(bad)}})
            return True
        # The memory holds ids as the service redacted them (`redact_id`: an email or IP tagged); a verdict may
        # name them either way.
        server = redact_id(feedback.server, self._redactor) if feedback.server else None
        tenant = redact_id(feedback.tenant, self._redactor) if feedback.tenant else self._tenant
        if self._tenant and tenant != self._tenant:  # another deployment's tenant
            self._count("unknown")
            log.warning("feedback for another tenant skipped", extra={"fields": {"analysis_id": feedback.analysis_id}})
            return True
        position = f"{message.topic}:{message.partition}:{message.offset}:{message.timestamp}"
        # Two namespaces: a producer's id can never stand for a position, so it cannot pre-empt a later verdict.
        verdict_id = f"id:{feedback.feedback_id}" if feedback.feedback_id else f"at:{position}"
        attempt = 0
        while True:
            try:
                found = await asyncio.to_thread(self._memory.feedback, server, feedback.analysis_id,
                                                feedback.verdict, self._redactor.redact(feedback.note), verdict_id,
                                                tenant or None)
                break
            except RefusedCase as refused:
                self._count("bad")
                log.warning("feedback refused", extra={"fields": {"reason": "refused", "error": str(refused)}})
                return True
            except StoreError as error:
                if not error.retriable:
                    raise
                attempt += 1
                log.warning("feedback not applied yet, retrying",
                            extra={"fields": {"error": str(error)[:200], "attempt": attempt}})
                if await sleep_unless(stop, self._backoff.delay(attempt)):
                    return False
        fields = {"analysis_id": feedback.analysis_id, "verdict": feedback.verdict}
        if found is Judged.APPLIED:
            self._count("applied")
            log.info("feedback applied", extra={"fields": fields})
        elif found is Judged.DUPLICATE:
            self._count("duplicate")
            log.info("feedback already applied (delivered again)", extra={"fields": fields})
        else:
            self._count("unknown")
            log.warning("feedback for an unknown analysis", extra={"fields": fields})
        return True
