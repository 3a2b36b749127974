"""The burst key of a message, and the repartition record that carries it to the key's owner; pure.

`KeyReader.read_sightings` is the one place the key is computed: `analysis.intake.quick_key` reads a
repeated failure from a few fields and one cache lookup, and anything else by decoding, redacting and
fingerprinting each record (the same key every other command computes; messages are carried redacted
once per template, see there). A message yields one `Sighting` per record; an OTLP batch can carry records
of several servers and failures.

How a message is forwarded (`forwarded_values`): a message whose records share one burst key (server,
tenant, fingerprint), the usual case, goes as its ORIGINAL bytes, keyed by (server, fingerprint). An
OTLP batch whose records have several keys is split: each group of records with one key goes as an OTLP
message of its own, holding the group's records under their original resource and scope, so each record
reaches the owner of its own key and is counted exactly once there. Sending the whole batch once per
group would multiply its bytes by the number of groups (a batch of 500 distinct failures, 500 times). Each
slice still repeats its records' resource and scope, so a batch of many keys under one large resource is
refused (`too_large_to_split`) once its slices would weigh over 4x the batch plus 1 MiB. With
`input.keyed_by_server` the window keeps the same slices as its samples. Within a group, records keep their
order; `events` indexes them in the value that is sent.

Headers of a repartition record (all text, redacted):

| header | value |
|---|---|
| `fingerprint`, `server`, `tenant`, `exception_type` | the group's burst key and type |
| `events` | JSON `[[record index, event time, commit or null, message], ...]` |
| `source_topic`, `source_partition`, `source_offset` | where the message was read (as in the DLQ) |
| `group` | the group's index in the message: (offset, group) orders the records of one source partition |
| `source_time` | the source record's broker timestamp, epoch seconds (the window's watermarks use that clock) |

Records forwarded before `source_time` existed lack it: the window then takes the repartition record's own
timestamp.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from analysis.errors import BadInput
from analysis.event import ErrorEvent
from analysis.intake.decode import DecodeConfig
from analysis.intake.quick_key import KeyCache
from analysis.intake.redact import Redactor
from analysis.intake.signature import Signature
from consumer.window import PartitionKey, Sighting

__all__ = ["KeyReader", "KeyedGroup", "Repartitioned", "forwarded_values", "group_sightings",
           "read_repartitioned", "repartition_record", "sighting_of"]  # fmt: skip

_HEADERS = ("fingerprint", "server", "tenant", "exception_type", "events", "source_topic", "source_partition",
            "source_offset", "group")  # fmt: skip
_REQUIRED = frozenset(_HEADERS)
_SPLIT_GROWTH = 4  # the slices of a batch may weigh this many times the batch, plus the slack
_SPLIT_SLACK_BYTES = 1 << 20


class KeyReader:
    """Reads the burst keys of input messages with the service's decode and redaction settings."""

    def __init__(self, config: DecodeConfig, redactor: Redactor) -> None:
        self._config = config
        self._keys = KeyCache(config, redactor)

    @property
    def config(self) -> DecodeConfig:
        """The decode settings, which the window's sample builder must share."""
        return self._config

    def read_sightings(self, raw: bytes, received_at: float) -> list[Sighting]:
        """One sighting per record of `raw`, in order; raises `BadInput` for a message that is not an event.

        `received_at` (the broker's timestamp, stable across replays) stands in for a missing event time.
        """
        # Redacted before anything else sees them (the key, the headers, the window): see quick_key.
        return self._keys.read(raw, received_at)


def sighting_of(event: ErrorEvent, signature: Signature) -> Sighting:
    """What the window counts of a decoded (and redacted) event."""
    return Sighting(event.server_id, event.tenant, signature.fingerprint,
                    signature.exception_type or event.exception_type, event.timestamp, event.commit,
                    event.exception_message)


@dataclass(frozen=True, slots=True)
class KeyedGroup:
    """The records of one message that share a burst key: (record index, sighting) pairs, in order."""

    records: tuple[tuple[int, Sighting], ...]

    @property
    def sighting(self) -> Sighting:
        """The first record's sighting, which names the group's key."""
        return self.records[0][1]

    @property
    def partition_key(self) -> bytes:
        """The repartition key: (server, fingerprint), so every tenant's events of a failure meet too."""
        first = self.sighting
        return orjson.dumps([first.server, first.fingerprint])


def group_sightings(sightings: Sequence[Sighting]) -> list[KeyedGroup]:
    """The records of one message grouped by burst key, groups in order of their first record."""
    if len(sightings) == 1:
        return [KeyedGroup(((0, sightings[0]),))]
    groups: dict[tuple[str, str, str], list[tuple[int, Sighting]]] = {}
    for index, sighting in enumerate(sightings):
        groups.setdefault(sighting[:3], []).append((index, sighting))
    return [KeyedGroup(tuple(records)) for records in groups.values()]


def forwarded_values(raw: bytes, groups: Sequence[KeyedGroup]) -> list[bytes]:
    """The value to forward for each group: `raw` itself for a single group, else the group's records cut
    out of the OTLP batch (with their records renumbered from 0 in that value, see the module doc).

    Each slice repeats its records' resource and scope, so the slices of a batch of many keys under one
    large resource add up to far more than the batch (8,000 failures under a 500 kB resource: 4 GB). Past
    4x the batch plus 1 MiB, `BadInput("too_large_to_split")`: the message goes to the DLQ whole."""
    if len(groups) == 1:
        return [raw]
    doc = orjson.loads(raw)
    located = list(_otlp_records(doc))
    budget = _SPLIT_GROWTH * len(raw) + _SPLIT_SLACK_BYTES
    values: list[bytes] = []
    for group in groups:
        # Records picked by index: the split costs what its slices weigh, however many groups there are
        # (scanning every record per group made a batch of 3,000 keys quadratic).
        values.append(orjson.dumps(_otlp_subset(doc, [located[index] for index, _ in group.records])))
        budget -= len(values[-1])
        if budget < 0:
            raise BadInput("too_large_to_split", f"its {len(groups)} burst keys, each sliced with its resource "
                           f"and scope, would add up to over {_SPLIT_GROWTH}x its {len(raw)} bytes")
    return values


def _otlp_records(doc: dict[str, Any]) -> Iterator[tuple[int, str, int, Any]]:
    """(resource index, scope list key, scope index, record) of every record, in `decode_otlp`'s order."""
    for r, resource_logs in enumerate(doc["resourceLogs"]):
        scopes_key = "scopeLogs" if resource_logs.get("scopeLogs") else "instrumentationLibraryLogs"
        for s, scope_logs in enumerate(resource_logs.get(scopes_key) or ()):
            for record in scope_logs.get("logRecords") or ():
                yield r, scopes_key, s, record


def _otlp_subset(doc: dict[str, Any], located: Sequence[tuple[int, str, int, Any]]) -> dict[str, Any]:
    """`doc` with only the `located` records, each under a copy of its own resource and scope."""
    resources: dict[int, dict[str, Any]] = {}
    scopes: dict[tuple[int, int], dict[str, Any]] = {}
    for r, scopes_key, s, record in located:
        if r not in resources:
            source = doc["resourceLogs"][r]
            resources[r] = {**{k: v for k, v in source.items() if k != scopes_key}, scopes_key: []}
        if (r, s) not in scopes:
            source = doc["resourceLogs"][r][scopes_key][s]
            scopes[(r, s)] = {**{k: v for k, v in source.items() if k != "logRecords"}, "logRecords": []}
            resources[r][scopes_key].append(scopes[(r, s)])
        scopes[(r, s)]["logRecords"].append(record)
    return {**{k: v for k, v in doc.items() if k != "resourceLogs"}, "resourceLogs": list(resources.values())}


def repartition_record(group: KeyedGroup, group_index: int, tp: PartitionKey, offset: int, split: bool,
                       source_time: float) -> list[tuple[str, bytes]]:
    """The headers that let the window count `group` without decoding the value it forwards; `split`
    when that value holds the group's records alone (numbered from 0), not the whole message."""
    first = group.sighting
    events = [[i if split else index, s.timestamp, s.commit, s.message]
              for i, (index, s) in enumerate(group.records)]
    return [
        ("fingerprint", first.fingerprint.encode()),
        ("server", first.server.encode()),
        ("tenant", first.tenant.encode()),
        ("exception_type", first.exception_type.encode()),
        ("events", orjson.dumps(events)),
        ("source_topic", tp[0].encode()),
        ("source_partition", str(tp[1]).encode()),
        ("source_offset", str(offset).encode()),
        ("group", str(group_index).encode()),
        ("source_time", repr(source_time).encode()),
    ]


@dataclass(frozen=True, slots=True)
class Repartitioned:
    """A repartition record read back: its records' sightings and where the message came from."""

    records: tuple[tuple[int, Sighting], ...]
    source: PartitionKey
    source_position: tuple[int, int]
    """(source offset, group index): increasing along one source partition, so replays are recognised."""
    source_time: float | None
    """The source record's broker time (epoch seconds); None from a key stage that predates it."""


def read_repartitioned(headers: Sequence[tuple[str, bytes]]) -> Repartitioned:
    """The sightings a repartition record carries; `BadInput("not_forwarded")` when it is not ours."""
    found = dict(headers)  # a header named twice: the last one, as Kafka clients read it
    if not found.keys() >= _REQUIRED:
        missing = sorted(_REQUIRED - found.keys())
        raise BadInput("not_forwarded", f"repartition record without headers {', '.join(missing)}")
    try:
        server, tenant = found["server"].decode(), found["tenant"].decode()
        fingerprint, exception_type = found["fingerprint"].decode(), found["exception_type"].decode()
        events: Any = orjson.loads(found["events"])
        records = tuple((_index(index), Sighting(server, tenant, fingerprint, exception_type, _moment(ts),
                                                 _text(commit) if commit is not None else None, _text(message)))
                        for index, ts, commit, message in events)
        source = (found["source_topic"].decode(), _index(int(found["source_partition"])))
        position = (_index(int(found["source_offset"])), _index(int(found["group"])))
        source_time = _moment(float(found["source_time"])) if "source_time" in found else None
    except (AttributeError, UnicodeDecodeError, orjson.JSONDecodeError, TypeError, ValueError) as error:
        # AttributeError: a null header value (Kafka allows them) has no `decode`.
        raise BadInput("not_forwarded", f"unreadable repartition headers ({type(error).__name__})") from None
    if not records:
        raise BadInput("not_forwarded", "repartition record without events")
    return Repartitioned(records, source, position, source_time)


def _index(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError("an index or offset that is not a non-negative integer")
    return value


def _moment(value: Any) -> float:
    """An event time as the key stage writes it: finite epoch seconds (a forged NaN would reach the output)."""
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise ValueError("an event time that is not finite epoch seconds")
    return float(value)


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError("a commit or message that is not text")
    return value
