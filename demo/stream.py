"""A realistic, reproducible error stream from the sample services, in the four input shapes.

Events come in bursts (event time), one burst per bug and deployed commit plus message-only noise, and a
few malformed messages are mixed in. The same seed always gives the same bytes.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import orjson

from demo.traces import SampleException, SampleTrace

if TYPE_CHECKING:
    from demo.services import SampleBug, SampleService

Kind = Literal["error", "noise", "malformed"]
Shape = Literal["native", "ecs", "otel", "logstash", "malformed"]

TENANT = "acme"
"""The tenant every sample event belongs to."""
STREAM_START = 1_717_243_200.0
"""2024-06-01T12:00:00Z: event time of the first phase."""
PHASE_S = 1_800.0
"""Event time between deploys: bursts of different commits never touch."""
_BURST_SPREAD_S = 300.0
_BATCH_TIMEOUT_S = 0.5
_MAX_GAP_S = 0.5  # well under any sensible quiet period, so a burst never splits by accident
_SHAPES: Mapping[str, tuple[Shape, ...]] = {
    "python": ("native", "otel"),
    "java": ("native", "ecs", "otel", "logstash"),
    "go": ("ecs", "logstash"),
}


@dataclass(frozen=True, slots=True)
class SampleMessage:
    """One Kafka message of the stream; `records` is how many events it carries (0 when malformed)."""

    key: bytes | None
    value: bytes
    kind: Kind
    shape: Shape
    records: int
    bug: str = ""
    """The bug key (or `noise:<name>`) of the first event it carries; empty when malformed."""
    reason: str = ""
    """For a malformed message: the DLQ reason the decoder gives it."""


@dataclass(frozen=True, slots=True)
class ExpectedBurst:
    """What the consumer should find: one burst of one failure at one commit."""

    server_id: str
    bug: str
    """The bug key, or `noise:<name>` for a message-only burst."""
    commit: str | None
    first_seen: float
    last_seen: float
    count: int
    exception_type: str
    culprit_path: str | None
    culprit_line: int | None


@dataclass(frozen=True, slots=True)
class SampleStream:
    """The generated messages, in produce order, and the bursts they form."""

    messages: tuple[SampleMessage, ...]
    bursts: tuple[ExpectedBurst, ...]

    @property
    def event_count(self) -> int:
        """Events carried by valid messages."""
        return sum(m.records for m in self.messages)

    @property
    def malformed_count(self) -> int:
        """Messages that must go to the DLQ."""
        return sum(1 for m in self.messages if m.kind == "malformed")


@dataclass(frozen=True, slots=True)
class _Noise:
    name: str
    server_id: str
    template: str
    logger: str


_NOISE = (
    _Noise("inventory-timeout", "checkout-service",
           "Timeout after @@MS@@ ms calling inventory-service at @@IP@@:8080 (request @@UUID@@)",
           "com.acme.checkout.client.InventoryClient"),
    _Noise("receipt-email", "orders-service", "Failed to send receipt to @@EMAIL@@: connection reset by peer",
           "orders.notify"),
    _Noise("provider-503", "payments-service",
           "Payment provider returned HTTP 503 for charge ch_@@HEX@@ after @@MS@@ ms", "payments/provider"),
)


@dataclass(frozen=True, slots=True)
class _Event:
    bug: str
    service: SampleService
    timestamp: float
    message: str
    logger: str
    commit: str
    trace: SampleTrace | None
    shape: Shape


def _token_values(rng: random.Random) -> dict[str, str]:
    """Fresh values for every variable part an event can carry."""
    return {
        "ORDER": f"ord-{rng.randrange(100_000, 1_000_000)}",
        "CUSTOMER": str(rng.randrange(1_000, 100_000)),
        "COUPON": rng.choice(["SUMMER25", "BLACKFRIDAY", "VIP2024", "FREESHIP", "WINTER30"]),
        "REQUEST": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "UUID": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "CART": uuid.UUID(int=rng.getrandbits(128), version=4).hex[:12],
        "LINE": str(rng.randrange(0, 12)),
        "QTY": rng.choice(["3x", "two", "1O", "", "4 5", "-", "1e3"]),
        "BATCH": f"b-{rng.randrange(10_000, 99_999)}",
        "N": str(rng.randrange(1, 9)),
        "GOROUTINE": str(rng.randrange(20, 5_000)),
        "ADDR1": f"c000{rng.getrandbits(24):06x}",
        "ADDR2": f"c000{rng.getrandbits(24):06x}",
        "ADDR3": f"c000{rng.getrandbits(24):06x}",
        "MS": str(rng.randrange(2_000, 30_000)),
        "IP": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "EMAIL": f"customer{rng.randrange(1, 10_000)}@example.org",
        "HEX": f"{rng.getrandbits(64):016x}",
    }


def _fill(template: str, values: Mapping[str, str]) -> str:
    for name, value in values.items():
        template = template.replace(f"@@{name}@@", value)
    return template


def _burst_plan(services: Sequence[SampleService]) -> list[tuple[SampleService, int, SampleBug | _Noise]]:
    """Every (service, phase, bug-or-noise) that gets a burst; phase = index of the deployed commit."""
    by_id = {s.server_id: s for s in services}
    plan: list[tuple[SampleService, int, SampleBug | _Noise]] = []
    phases = max(len(s.deployed) for s in services)
    for phase in range(phases):
        for service in services:
            if phase < len(service.deployed):
                commit = service.deployed[phase]
                plan.extend((service, phase, bug) for bug in service.bugs if service.trace(bug.key, commit))
        plan.extend((by_id[n.server_id], phase, n) for n in _NOISE if n.server_id in by_id)
    return plan


def build_stream(
    services: Mapping[str, SampleService], n_events: int = 3_000, seed: int = 7,
    max_message_bytes: int = 1_048_576,
) -> SampleStream:
    """The whole stream: about `n_events` events in bursts, noise, and malformed messages.

    `max_message_bytes` is the consumer's cap: the oversized malformed message is just above it.
    """
    rng = random.Random(seed)
    ordered = [services[k] for k in sorted(services)]
    plan = _burst_plan(ordered)
    counts = _burst_sizes([0.4 if isinstance(item, _Noise) else 1.0 for _, _, item in plan], n_events)
    events: list[_Event] = []
    bursts: list[ExpectedBurst] = []
    for (service, phase, item), count in zip(plan, counts, strict=True):
        commit = service.deployed[min(phase, len(service.deployed) - 1)]
        burst_events = _burst(rng, service, phase, commit, item, count)
        events.extend(burst_events)
        trace = service.trace(item.key, commit) if not isinstance(item, _Noise) else None
        bursts.append(ExpectedBurst(
            service.server_id, f"noise:{item.name}" if isinstance(item, _Noise) else item.key, commit,
            burst_events[0].timestamp, burst_events[-1].timestamp, len(burst_events),
            "" if isinstance(item, _Noise) else item.exception_type,
            item.culprit_path if not isinstance(item, _Noise) else None,
            trace.culprit_line if trace else None,
        ))
    events.sort(key=lambda e: (e.timestamp, e.service.server_id))
    messages = _pack(rng, events)
    for malformed in _malformed(max_message_bytes):
        messages.insert(rng.randrange(len(messages) + 1), malformed)
    return SampleStream(tuple(messages), tuple(bursts))


def _burst_sizes(weights: list[float], total: int) -> list[int]:
    """Split `total` events by weight (largest remainder first), at least 5 per burst."""
    shares = [total * w / sum(weights) for w in weights]
    sizes = [int(s) for s in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: sizes[i] - shares[i])
    for i in by_remainder[: total - sum(sizes)]:
        sizes[i] += 1
    return [max(5, size) for size in sizes]


def generate_stream(
    services: Mapping[str, SampleService], n_events: int = 3_000, seed: int = 7
) -> list[bytes]:
    """The stream's message values in produce order (see `build_stream` for keys and expectations)."""
    return [m.value for m in build_stream(services, n_events, seed).messages]


def _burst(rng: random.Random, service: SampleService, phase: int, commit: str, item: SampleBug | _Noise,
           count: int) -> list[_Event]:
    start = STREAM_START + phase * PHASE_S + rng.uniform(0, _BURST_SPREAD_S)
    mean_gap = min(_MAX_GAP_S / 2, 40.0 / count)
    shapes = _SHAPES[service.language]
    base = service.trace(item.key, commit) if not isinstance(item, _Noise) else None
    out = []
    ts = start
    for _ in range(count):
        values = _token_values(rng)
        trace = base.render(values) if base else None
        key = f"noise:{item.name}" if isinstance(item, _Noise) else item.key
        out.append(_Event(key, service, round(ts, 3), _fill(item.template if isinstance(item, _Noise) else
                                                        item.log_message, values),
                          item.logger, commit, trace, rng.choice(shapes)))
        ts += rng.uniform(0.0, 2 * mean_gap)
    return out


def _pack(rng: random.Random, events: list[_Event]) -> list[SampleMessage]:
    """One message per event, except OTLP: the collector batches several records of a service.

    Like the collector's batch timeout, a batch older than `_BATCH_TIMEOUT_S` (event time) is sent
    before anything newer, so records never travel far from their neighbours.
    """
    messages: list[SampleMessage] = []
    pending: dict[str, list[_Event]] = {}
    for event in events:
        for server_id, batch in sorted(pending.items()):
            if batch and (event.timestamp - batch[0].timestamp > _BATCH_TIMEOUT_S
                          or (server_id == event.service.server_id and batch[0].commit != event.commit)):
                messages.append(_message(server_id, batch, _otel(batch)))
                pending[server_id] = []
        if event.shape != "otel":
            messages.append(_message(event.service.server_id, [event], _ENCODERS[event.shape](event)))
            continue
        batch = pending.setdefault(event.service.server_id, [])
        batch.append(event)
        if len(batch) >= rng.randint(2, 6):
            messages.append(_message(event.service.server_id, batch, _otel(batch)))
            pending[event.service.server_id] = []
    for server_id, batch in sorted(pending.items()):
        if batch:
            messages.append(_message(server_id, batch, _otel(batch)))
    return messages


def _message(server_id: str, events: list[_Event], value: bytes) -> SampleMessage:
    kind: Kind = "error" if events[0].trace is not None else "noise"
    return SampleMessage(server_id.encode(), value, kind, events[0].shape, len(events), events[0].bug)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _native_exception(exc: SampleException) -> dict[str, Any]:
    frames = []
    # Native frames go outermost first, the raising frame last (the order Sentry-style SDKs send).
    for f in reversed(exc.frames):
        frame: dict[str, Any] = {"function": f.function, "filename": f.filename, "lineno": f.lineno}
        if f.abs_path:
            frame["abs_path"] = f.abs_path
        if f.module:
            frame["module"] = f.module
        if f.in_app is not None:
            frame["in_app"] = f.in_app
        frames.append(frame)
    return {"type": exc.type, "value": exc.value, "stacktrace": frames}


def _native(event: _Event) -> bytes:
    doc: dict[str, Any] = {
        "server_id": event.service.server_id, "timestamp": _iso(event.timestamp), "level": "error",
        "logger": event.logger, "message": event.message, "commit": event.commit, "tenant": TENANT,
    }
    if event.trace:
        # The chain is outermost first; native puts the root cause's causes in `chained`.
        outer, *causes = event.trace.chain
        doc["exception"] = {**_native_exception(outer), "chained": [_native_exception(c) for c in causes]}
    return orjson.dumps(doc)


def _ecs(event: _Event) -> bytes:
    # ecs-logging writes dotted keys at the top level.
    doc: dict[str, Any] = {
        "@timestamp": _iso(event.timestamp), "log.level": "error", "message": event.message,
        "ecs.version": "1.6.0", "service.name": event.service.server_id, "service.version": event.commit,
        "log.logger": event.logger, "labels": {"tenant": TENANT},
    }
    if event.trace:
        root = event.trace.chain[0]
        doc |= {"error.type": root.type, "error.message": root.value, "error.stack_trace": event.trace.text}
    return orjson.dumps(doc)


def _logstash(event: _Event) -> bytes:
    doc: dict[str, Any] = {
        "@timestamp": _iso(event.timestamp), "@version": "1", "message": event.message,
        "logger_name": event.logger, "thread_name": "http-nio-8080-exec-3", "level": "ERROR",
        "level_value": 40000, "service": event.service.server_id, "commit": event.commit, "tenant": TENANT,
    }
    if event.trace:
        doc["stack_trace"] = event.trace.text
    return orjson.dumps(doc)


def _attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _otel(batch: list[_Event]) -> bytes:
    service = batch[0].service
    records = []
    for event in batch:
        attributes = [_attr("code.namespace", event.logger)]
        if event.trace:
            root = event.trace.chain[0]
            attributes += [_attr("exception.type", root.type), _attr("exception.message", root.value),
                           _attr("exception.stacktrace", event.trace.text)]
        nanos = str(round(event.timestamp * 1e9))
        records.append({
            "timeUnixNano": nanos, "observedTimeUnixNano": nanos,
            "severityNumber": 17, "severityText": "ERROR",
            "body": {"stringValue": event.message}, "attributes": attributes,
        })
    resource = [_attr("service.name", service.server_id), _attr("service.version", batch[-1].commit),
                _attr("tenant", TENANT)]
    return orjson.dumps({"resourceLogs": [{
        "resource": {"attributes": resource},
        "scopeLogs": [{"scope": {"name": batch[0].logger}, "logRecords": records}],
    }]})


_ENCODERS: Mapping[str, Callable[[_Event], bytes]] = {"native": _native, "ecs": _ecs, "logstash": _logstash}


def _malformed(max_message_bytes: int) -> list[SampleMessage]:
    """One message per way input goes wrong, labelled with the DLQ reason the decoder gives it."""
    deep: Any = "bottom"
    for _ in range(200):
        deep = [deep]
    cases: list[tuple[str, bytes]] = [
        ("not_json", b"2024-06-01 12:03:07 ERROR [checkout] upstream closed connection"),
        ("not_object", b'["checkout-service", "error", "boom"]'),
        ("too_large", orjson.dumps({"server_id": "orders-service",
                                    "message": "x" * (max_message_bytes + 1024)})),
        ("invalid_utf8", b'{"server_id": "orders-service", "message": "caf\xe9 \xff\xfe failed"}'),
        ("wrong_type", orjson.dumps({"server_id": "orders-service", "timestamp": _iso(STREAM_START),
                                     "message": ["boom"], "exception": 42})),
        ("no_error", orjson.dumps({"server_id": "orders-service", "timestamp": _iso(STREAM_START),
                                     "level": "error"})),
        ("too_deep", orjson.dumps({"server_id": "orders-service", "message": "nested", "extra": deep})),
    ]
    return [SampleMessage(None, value, "malformed", "malformed", 0, reason=reason) for reason, value in cases]
