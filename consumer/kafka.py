"""The Kafka edges: consumer and producer construction, the event sink, DLQ headers, rebalance, lag.

Everything here is thin: decisions (what to commit, what is a burst) live in pure modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import IllegalStateError, KafkaError, KafkaTimeoutError, TopicAlreadyExistsError
from aiokafka.helpers import create_ssl_context
from aiokafka.partitioner import DefaultPartitioner, murmur2

from analysis.cache import memoize
from consumer.retry import Backoff, sleep_unless
from consumer.settings import ConfigError, KafkaSettings, RepartitionSettings, env_name
from consumer.window import PartitionKey

__all__ = [
    "COMMIT_WAIT_S",
    "STOP_WAIT_S",
    "EventSink",
    "Headers",
    "RebalanceHooks",
    "as_topic_partition",
    "commit_offsets",
    "committed_offsets",
    "dlq_headers",
    "ensure_repartition_topic",
    "fetched_at",
    "forward_max_bytes",
    "make_consumer",
    "make_forward_producer",
    "make_producer",
    "measure_lag",
    "partition_by_key",
    "poll",
    "require_input_topic",
    "start_client",
    "start_with_retry",
    "stop_clients",
    "watch_broker",
]

log = logging.getLogger(__name__)
_POSITION_WAIT_S = 0.5  # longest the lag measure waits for a fetch position before it gives the turn back
_DEFAULT_REPLICAS = 3  # the repartition topic's replication factor when unset, brokers permitting
_REQUEST_BYTES = 1_048_576  # aiokafka's default max_request_size: DLQ copies are cut below it
# Forwards go in batches of up to this (uncompressed). aiokafka's default 16 kB held ~7 forwards of 2 kB:
# a produce request each, which costs more CPU than the records it carries, and the 8th forward waited
# for the batch to leave. Half the smallest repartition record limit (`forward_max_bytes`), so a
# compressed batch of incompressible records still fits.
_FORWARD_BATCH_BYTES = 512 * 1024
_POLL_GRACE_S = 1.0  # past a poll's own timeout: aiokafka's getmany waits for a rebalance without bound
# The caps of a shutdown against a broker that is away, read at each call (a test shortens them):
COMMIT_WAIT_S = 10.0  # aiokafka retries a commit without bound while the coordinator is unavailable
STOP_WAIT_S = 5.0  # a client's stop: a producer flushes (each batch retried for up to 40 s), a consumer
# waits for its group coordination (a rebalance under way)

Headers = Sequence[tuple[str, bytes]]
PartitionsCallback = Callable[[Collection[Any]], Awaitable[None]]


def _security(kafka: KafkaSettings) -> dict[str, Any]:
    """Client arguments for TLS and SASL, shared by consumer and producer."""
    options: dict[str, Any] = {"security_protocol": kafka.security_protocol}
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        password = kafka.ssl_key_password.get_secret_value() if kafka.ssl_key_password else None
        try:
            options["ssl_context"] = create_ssl_context(
                cafile=kafka.ssl_cafile, certfile=kafka.ssl_certfile, keyfile=kafka.ssl_keyfile, password=password
            )
        except (ssl.SSLError, OSError) as error:
            files = ", ".join(env_name("kafka", name) for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
                              if getattr(kafka, name) is not None) or "the system CA store"
            raise ConfigError(f"TLS setup failed ({error}): check {files} hold PEM data and "
                              f"{env_name('kafka', 'ssl_key_password')} matches the key") from None
    if kafka.sasl_mechanism:
        options["sasl_mechanism"] = kafka.sasl_mechanism
        options["sasl_plain_username"] = kafka.sasl_username
        options["sasl_plain_password"] = kafka.sasl_secret()
    return options


def make_consumer(
    kafka: KafkaSettings, listener: ConsumerRebalanceListener | None = None, topics: Sequence[str] = ()
) -> AIOKafkaConsumer:
    """A group consumer of `topics` (default: the input topic) with auto-commit off: offsets move only when
    work is done."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=kafka.group_id,
        client_id=kafka.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=kafka.isolation_level,
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=kafka.heartbeat_interval_ms,
        rebalance_timeout_ms=kafka.rebalance_timeout_ms,
        max_poll_records=kafka.max_poll_records,
        fetch_max_wait_ms=kafka.fetch_max_wait_ms,
        **_security(kafka),
    )
    consumer.subscribe(list(topics or [kafka.input_topic]), listener=listener)
    return consumer


def make_producer(kafka: KafkaSettings) -> AIOKafkaProducer:
    """A producer that waits for all in-sync replicas, so a published event survives a broker loss; its
    requests take an analysis event of `kafka.max_event_bytes` (1 MiB at least, aiokafka's default)."""
    return AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id=kafka.client_id,
        acks="all",
        enable_idempotence=kafka.enable_idempotence,
        linger_ms=kafka.linger_ms,
        max_request_size=max(_REQUEST_BYTES, kafka.max_event_bytes),
        **_security(kafka),
    )


@memoize("kafka.key_hash", 2048, 512 << 10)  # keys are (server, fingerprint): a few hundred
def _key_hash(key: bytes) -> int:
    return int(murmur2(key)) & 0x7FFFFFFF


def partition_by_key(key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
    """aiokafka's default partitioner (Kafka's: murmur2 of the key, made positive, modulo the partition
    count; no key: any available partition), remembering each key's hash. aiokafka's murmur2 is pure
    Python, 11.7 us for a 55-byte key: paid for every forward, whose keys are (server, fingerprint), few."""
    if key is None:
        return int(DefaultPartitioner()(key, all_partitions, available))
    return all_partitions[_key_hash(key) % len(all_partitions)]


def forward_max_bytes(max_message_bytes: int) -> int:
    """The largest repartition record: the largest accepted input message, plus its headers."""
    return max(1_048_576, max_message_bytes + 262_144)


def make_forward_producer(kafka: KafkaSettings, repartition: RepartitionSettings,
                          max_message_bytes: int) -> AIOKafkaProducer:
    """The key stage's producer: the key stage fills its batches (up to 512 kB, compressed) and hands them
    over each turn; records of one key keep their order, since aiokafka sends one batch per partition at a
    time. Every message the input accepts (`max_message_bytes`) fits, so no valid event fails its forward."""
    return AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id=f"{kafka.client_id}-forward",
        acks="all",
        enable_idempotence=kafka.enable_idempotence,
        linger_ms=repartition.linger_ms,
        compression_type=None if repartition.compression == "none" else repartition.compression,
        max_request_size=forward_max_bytes(max_message_bytes),
        max_batch_size=_FORWARD_BATCH_BYTES,
        **_security(kafka),
    )


def _require_input(kafka: KafkaSettings, listed: set[str]) -> None:
    """A ConfigError when the input topic is not among the broker's topics: subscribing would have a broker
    that creates topics on demand (tansu, Kafka's default) make an empty one of a mistyped name, and the
    service would wait on it, ready and reading nothing (a trial's `nosuch3`)."""
    if kafka.input_topic not in listed:
        raise ConfigError(f"the input topic {kafka.input_topic!r} does not exist: create it, or check "
                          f"{env_name('kafka', 'input_topic')}")


@contextlib.asynccontextmanager
async def _admin(kafka: KafkaSettings) -> AsyncIterator[AIOKafkaAdminClient]:
    """A started admin client of the service's settings, closed after."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers, client_id=kafka.client_id,
                                request_timeout_ms=max(kafka.rebalance_timeout_ms, 10_000), **_security(kafka))
    await start_client(admin, kafka)
    try:
        yield admin
    finally:
        await admin.close()


async def require_input_topic(kafka: KafkaSettings) -> None:
    """`_require_input` for a service that reads its input keyed by server (no repartition topic to ensure)."""
    async with _admin(kafka) as admin:
        _require_input(kafka, set(await admin.list_topics()))


async def ensure_repartition_topic(kafka: KafkaSettings, repartition: RepartitionSettings,
                                   max_message_bytes: int) -> str:
    """Create the repartition topic unless it exists (partitions: the setting, else the input topic's); its
    name. A missing input topic, or a broker refusing the creation, is a ConfigError naming the fix."""
    name = repartition.topic_for(kafka.group_id)
    async with _admin(kafka) as admin:
        # Listing first: some brokers (tansu) create a topic that is merely described.
        listed = set(await admin.list_topics())
        _require_input(kafka, listed)
        if name in listed or not repartition.create:
            return name
        partitions = repartition.partitions
        if not partitions:
            (described,) = await admin.describe_topics([kafka.input_topic])
            partitions = len(described["partitions"])
        configs = {"retention.ms": str(repartition.retention_ms), "cleanup.policy": "delete",
                   "compression.type": "producer", "max.message.bytes": str(forward_max_bytes(max_message_bytes))}
        replicas = await _replication_factor(admin, repartition.replication_factor)
        topic = NewTopic(name, partitions, replicas, topic_configs=configs)
        try:
            response = await admin.create_topics([topic])
        except TopicAlreadyExistsError:  # another replica created it first
            return name
        for _, code, message in response.topic_errors:
            if code not in (0, TopicAlreadyExistsError.errno):
                raise ConfigError(f"cannot create the repartition topic {name!r} (error {code}: {message}); "
                                  f"create it beforehand (docs/architecture.md) and set "
                                  f"{env_name('repartition', 'create')}=false, or check "
                                  f"{env_name('repartition', 'replication_factor')}")
        # Until the metadata lists it, a producer could make the broker auto-create it with defaults.
        for _ in range(100):
            if name in set(await admin.list_topics()):
                break
            await asyncio.sleep(0.1)
        log.info("repartition topic created",
                 extra={"fields": {"topic": name, "partitions": partitions, "replication_factor": replicas}})
        return name


async def _replication_factor(admin: AIOKafkaAdminClient, setting: int) -> int:
    """The repartition topic's replicas: the setting, else min(3, the brokers the cluster's metadata lists)
    (3 copies survive one broker loss during another's restart; a dev cluster has one broker). A setting
    above the brokers there are is a ConfigError: Kafka would refuse the topic (INVALID_REPLICATION_FACTOR)."""
    brokers = len((await admin.describe_cluster())["brokers"])
    name = env_name("repartition", "replication_factor")
    if not setting:
        chosen = max(1, min(_DEFAULT_REPLICAS, brokers))
        log.info("repartition replication factor from the cluster",
                 extra={"fields": {"replication_factor": chosen, "brokers": brokers, "setting": f"{name}=0"}})
        return chosen
    if setting > brokers:
        raise ConfigError(f"{name}={setting} but the Kafka cluster has {brokers} broker(s): set it to at most "
                          f"{brokers}, or 0 to take min(3, brokers)")
    return setting


async def start_client(client: AIOKafkaConsumer | AIOKafkaProducer | AIOKafkaAdminClient,
                       kafka: KafkaSettings) -> None:
    """Start a consumer or producer; a broker it cannot reach or log in to is a ConfigError naming the
    settings to check (the process exits 2 and the orchestrator retries it)."""
    try:
        await client.start()
    except KafkaError as error:
        await (client.close() if isinstance(client, AIOKafkaAdminClient) else client.stop())
        detail = " ".join(str(error).split())[:200]
        if not detail.startswith(type(error).__name__):
            detail = f"{type(error).__name__}: {detail}".rstrip(": ")
        raise ConfigError(
            f"cannot connect to Kafka at {env_name('kafka', 'bootstrap_servers')}={kafka.bootstrap_servers} "
            f"({detail}); check the address and port, that the broker is up, and "
            f"{env_name('kafka', 'security_protocol')}={kafka.security_protocol} with its credentials"
        ) from None


async def watch_broker(
    consumer: AIOKafkaConsumer, answered: Callable[[], None], every_s: float, stop: asyncio.Event
) -> None:
    """Ask the brokers for metadata every `every_s` and call `answered` after each answer; readiness turns
    false once none came for its grace period. Runs beside the main loop: a dead broker never blocks it."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(consumer.topics(), every_s)
            answered()
        except (KafkaError, TimeoutError):
            log.debug("broker did not answer a metadata request")
        if await sleep_unless(stop, every_s):
            return


class EventSink:
    """Publishes records on an already started producer."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer

    async def publish(self, topic: str, key: bytes | None, value: bytes, headers: Headers = ()) -> None:
        """Send one record and wait until the broker acknowledged it."""
        delivery = await self.enqueue(topic, key, value, headers)
        await delivery

    async def enqueue(
        self, topic: str, key: bytes | None, value: bytes, headers: Headers = (), partition: int | None = None
    ) -> asyncio.Future[Any]:
        """Hand one record to the producer's batch (to `partition`, else by key); the returned future
        resolves on acknowledgement."""
        future: asyncio.Future[Any] = await self._producer.send(
            topic, value=value, key=key, headers=list(headers) or None, partition=partition
        )
        return future

    def batch(self) -> Any:
        """An empty batch for `send_batch` (aiokafka's `BatchBuilder`, with the producer's compression and
        batch size): filling one costs ~3 us a record where `enqueue` costs ~35 (its own future, lookups,
        the accumulator's coroutine, per record)."""
        return self._producer.create_batch()

    async def send_batch(self, batch: Any, topic: str, partition: int) -> asyncio.Future[Any]:
        """Hand a filled batch to the producer for `partition`, after the ones sent there before it; the
        returned future resolves on acknowledgement to the metadata of its first record."""
        future: asyncio.Future[Any] = await self._producer.send_batch(batch, topic, partition=partition)
        return future

    async def partitions(self, topic: str) -> tuple[list[int], list[int]]:
        """All partitions of `topic` and those with a leader, as the producer's metadata has them and as
        its `send` hands them to a partitioner; waits for that metadata when there is none yet."""
        cluster = self._producer.client.cluster
        found = cluster.partitions_for_topic(topic) or await self._producer.partitions_for(topic)
        return sorted(found), sorted(cluster.available_partitions_for_topic(topic) or ())

    def known_partitions(self, topic: str) -> set[int]:
        """The partitions of `topic` in the producer's metadata as it stands (empty before it has any):
        never waits, so a broker that went away cannot stall the caller."""
        found: set[int] | None = self._producer.client.cluster.partitions_for_topic(topic)
        return set(found or ())


def dlq_headers(
    reason: str, tp: PartitionKey, offset: int, error: str, max_chars: int
) -> list[tuple[str, bytes]]:
    """Headers of a DLQ record: why, where it came from, and a bounded error text."""
    topic, partition = tp
    return [
        ("reason", reason.encode()),
        ("source_topic", topic.encode()),
        ("source_partition", str(partition).encode()),
        ("source_offset", str(offset).encode()),
        # The error text can quote the untrusted input; the cap keeps a hostile message from bloating it.
        ("error", error[:max_chars].encode("utf-8", "replace")),
    ]


DLQ_MAX_KEY_BYTES = 64 * 1024
"""A longer key is cut in a DLQ copy (headers say so, with its sha256), as a value past its cap is."""


def dlq_copy(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]], max_value_bytes: int,
             ) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """The key, value and headers of a bad record's DLQ copy: the original bytes as they came (the documented
    exception), or, past their caps, their heads, the headers naming the originals by size and sha256. The
    broker refuses records past its limit, and a key near it leaves no room for the headers added here; the
    originals stay in their topic for its retention."""
    headers = list(headers)
    if len(value) > max_value_bytes:
        headers += [("truncated", b"true"), ("original_bytes", str(len(value)).encode()),
                    ("original_sha256", hashlib.sha256(value).hexdigest().encode())]
        value = value[:max_value_bytes]
    if key is not None and len(key) > DLQ_MAX_KEY_BYTES:
        headers += [("key_truncated", b"true"), ("original_key_bytes", str(len(key)).encode()),
                    ("original_key_sha256", hashlib.sha256(key).hexdigest().encode())]
        key = key[:DLQ_MAX_KEY_BYTES]
    return key, value, headers


class RebalanceHooks(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no types
    """Calls the pipeline around a rebalance: commit what is safe on revoke, note the new assignment.

    The callbacks must not take a lock that `getmany` holds: aiokafka runs them inside its own poll.
    """

    def __init__(self, on_revoked: PartitionsCallback, on_assigned: PartitionsCallback) -> None:
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned

    async def on_partitions_revoked(self, revoked: Collection[Any]) -> None:
        """Commit safe offsets of the partitions about to go, then forget them."""
        await self._on_revoked(revoked)

    async def on_partitions_assigned(self, assigned: Collection[Any]) -> None:
        """Record the partitions now owned."""
        await self._on_assigned(assigned)


async def measure_lag(
    consumer: AIOKafkaConsumer, tps: Iterable[PartitionKey]
) -> dict[PartitionKey, int | None]:
    """Messages between this consumer's fetch position and the end offset per partition; None until a
    fetch has reported the end offset.

    Negative when the log is now shorter than the position: the topic was recreated or truncated.
    A position that is not known within `_POSITION_WAIT_S` (a rebalance is under way: aiokafka's
    `position` would wait for the next assignment without bound) leaves that partition and the rest at
    None, so the main loop turns and still sees its stop.
    """
    lag: dict[PartitionKey, int | None] = dict.fromkeys(tps)
    for tp in lag:
        highwater = consumer.highwater(tp)
        if highwater is None:
            continue
        try:
            position = await asyncio.wait_for(consumer.position(tp), _POSITION_WAIT_S)
        except (TimeoutError, IllegalStateError):
            break
        lag[tp] = int(highwater) - int(position)
    return lag


def fetched_at(consumer: AIOKafkaConsumer, tp: PartitionKey) -> float | None:
    """When `consumer` last handled a fetch response for `tp` (epoch seconds; aiokafka's per-partition
    fetch state, which `measure_lag`'s end offset comes from); None before the first."""
    stamp = consumer.last_poll_timestamp(as_topic_partition(tp))
    return stamp / 1000 if stamp is not None else None


async def commit_offsets(consumer: AIOKafkaConsumer, offsets: Mapping[TopicPartition, int]) -> None:
    """Commit `offsets`, giving up after `COMMIT_WAIT_S` with a KafkaError like any failed commit: a
    coordinator that never comes back (or a rebalance the broker never finishes) must not hold a rebalance
    callback or a shutdown. An offset not committed is replayed by the next owner (at least once)."""
    try:
        await asyncio.wait_for(consumer.commit(dict(offsets)), COMMIT_WAIT_S)
    except TimeoutError:
        raise KafkaTimeoutError(f"offset commit not acknowledged within {COMMIT_WAIT_S:.0f}s") from None


async def poll(consumer: AIOKafkaConsumer, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
    """`consumer.getmany(timeout_ms=...)`, empty once `timeout_ms` plus `_POLL_GRACE_S` passed: while a
    rebalance is under way aiokafka waits for the new assignment whatever the timeout, and a rebalance the
    broker does not finish (a member that left, a broker under load) would keep the caller from ever
    seeing its stop. Nothing is drained before the assignment, so giving up loses no record."""
    try:
        batch: dict[TopicPartition, list[Any]] = await asyncio.wait_for(
            consumer.getmany(timeout_ms=timeout_ms), timeout_ms / 1000 + _POLL_GRACE_S)
    except TimeoutError:
        return {}
    return batch


async def committed_offsets(
    consumer: AIOKafkaConsumer, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """The group's committed offset of each of `tps` (None: none committed). aiokafka retries the fetch
    without bound while the coordinator is unavailable, so all of them together get `COMMIT_WAIT_S`: past it
    the rest are left out, and a KafkaError stops the fetch the same way."""
    found: dict[TopicPartition, int | None] = {}
    deadline = time.monotonic() + COMMIT_WAIT_S
    for tp in tps:
        try:
            found[tp] = await asyncio.wait_for(consumer.committed(tp), max(0.0, deadline - time.monotonic()))
        except (TimeoutError, KafkaError):
            break
    return found


async def stop_clients(*clients: AIOKafkaConsumer | AIOKafkaProducer) -> None:
    """Stop `clients` together, giving up after `STOP_WAIT_S`: a producer flushing into a broker that is
    away, or a consumer whose group is mid-rebalance, must not hold SIGTERM past the pod's grace period.
    What a producer had not delivered was never acknowledged, so its offsets are uncommitted and replayed."""
    # Not wait_for: it would wait for the cancelled stops to finish, which is the wait being bounded.
    stopping = [asyncio.ensure_future(client.stop()) for client in clients]
    _, pending = await asyncio.wait(stopping, timeout=STOP_WAIT_S)
    for stop in pending:
        stop.cancel()
    if pending:
        log.warning("Kafka clients not stopped in time; left to the process exit",
                    extra={"fields": {"clients": len(pending), "waited_s": STOP_WAIT_S}})
    for stop in stopping:
        # aiokafka's fetcher lets its own tasks' cancellation out of stop(): that stop is done all the same.
        if stop.done() and not stop.cancelled() and (error := stop.exception()) is not None:
            raise error


def as_topic_partition(tp: PartitionKey) -> TopicPartition:
    """aiokafka's own type, which its commit API insists on."""
    return tp if isinstance(tp, TopicPartition) else TopicPartition(tp[0], tp[1])


async def _abandon(client: AIOKafkaConsumer | AIOKafkaProducer, starting: asyncio.Future[Any],
                   stopping: asyncio.Future[Any]) -> None:
    """Give up a start under way: cancel it and the stop watch, and close what it opened."""
    stopping.cancel()
    starting.cancel()
    await asyncio.wait({starting})
    await stop_clients(client)


async def start_with_retry(client: AIOKafkaConsumer | AIOKafkaProducer, stop: asyncio.Event, backoff: Backoff,
                           what: str) -> bool:
    """Start an aiokafka client, retrying while the broker is unreachable; False when stopped first, also
    in the middle of a start (a broker that accepts and never answers, a group join held for long)."""
    attempt = 0
    while not stop.is_set():
        starting = asyncio.ensure_future(client.start())
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # a sibling task failed (the service refused to start): close it too
            await _abandon(client, starting, stopping)
            raise
        if not starting.done():
            await _abandon(client, starting, stopping)
            return False
        stopping.cancel()
        try:
            starting.result()
            return True
        except KafkaError as error:
            attempt += 1
            log.warning("kafka client cannot start, retrying",
                        extra={"fields": {"client": what, "error": type(error).__name__, "attempt": attempt}})
            await client.stop()
            if await sleep_unless(stop, backoff.delay(min(attempt, 10))):
                return False
    return False
