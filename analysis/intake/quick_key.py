"""The burst key of a message without the full path: a few dict reads and one lookup for a repeated failure.

`KeyCache.read` gives, per record, what the window counts (`EventKey`: server, tenant, fingerprint, type,
event time, commit, message), all redacted, equal to decode → redact → fingerprint (`full_keys`).

How a repeated failure is read. The message is decoded with orjson and split by its layout's plan
(`decode.layout_plan`) into per-event slots and a skeleton. Slots are what varies between the events of a
burst: the event time, the log message, the exception message field, the trace or structured exception (and
in OTLP the body, trace and span ids). The skeleton is everything else (server, tenant, commit, type
fields, level, logger, nested unknown fields), as JSON text, so `1`, `1.0` and `true` differ as they do to
the decoder (a skeleton of text values alone is kept as a tuple, as exact and cheaper to make); unknown
scalar fields are left out (decoding keeps them aside, no key reads them). An OTLP export is read record by
record, in decoding's order: a record's skeleton is its resource and scope and its own fields and
attributes but the slots, so the Collector's batches, a new mix of records each time, hit record by record
(an export's records all hit, or it is read in full). The trace goes through the parse cache
(`parse_trace`, `structured_chain`: the frame-region lookup, which hands out the same frames tuples for a
repeated frame region whatever its message lines, goroutine numbers included). The entry is keyed by
(skeleton, root cause type, identity of each exception's frames) and holds the redacted server, tenant,
commit and type, the fingerprint and the frames tuples (so their ids are not reused), and is charged for
those frames and their strings, which the parse caches may have let go. A hit is exact: decoding reads the
slots only into the time, the message and the chain, which are computed here by the very functions decoding
uses; the slots are checked to be of the types that decode without error; and a stack signature with in-app
frames depends on the root type and the frames alone.

A failure without frames (a message-only error; one exception of a type and a message) is signed by its
message, redacted, which differs in every event (ids): its entry, keyed by (skeleton, type), holds all but
the fingerprint, which each hit computes as `fingerprint_event` does, from the message redacted by the
redactor itself (`Redactor.redact`: one prefilter scan when no rule may match, the rules it names
otherwise; no text is keyed on before its redaction is established). Anything else (an unusual layout, a
stack signature that reads the message, a type without a message over a trace field that is no trace, a
wrong type, a skeleton nested too deep to write) runs the full path, which also fills the cache.

Messages. The window's tally counts each event's root-cause message, and the repartition headers carry it,
so it must be redacted, and redacting a message with a fresh id costs 2-5 µs, as much as all the rest. So a
message is redacted once per template (`tally.message_template`: digits to 0, hex letters to a/A): every
later message of the template in the same burst (redacted server, tenant and fingerprint, as the window
groups them) carries the first one's redacted text, which never crosses from one tenant, server or failure
to another. What the tally counts changes in one way: messages that differ only in digits and hex letters
count as one message as logged (the first), where before they counted apart and then merged under
`mask_variable` at the close, which gives the same line unless their masks differ. They differ when a word
is made of hex letters (`bad` and `dab`), or when redaction depends on the digits themselves (a card number
that passes the Luhn check and one that does not): the later message is then counted under the first one's
line. Nothing unredacted leaves: the text carried is always a redacted message, and a secret in a later
message is never carried (its template's first message stands for it). Messages over 512 characters are
redacted each time.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, NamedTuple, cast

import orjson

from analysis.cache import OBJECT_BYTES, BoundedCache
from analysis.errors import BadInput
from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.intake.decode import (
    SPELLINGS,
    DecodeConfig,
    decode_message,
    decode_record,
    field_value,
    layout_plan,
    record_chain,
)
from analysis.intake.field import declared_chain, text, timestamp, trace_chain
from analysis.intake.otlp import (
    ENTRY_BYTES,
    MESSAGE_ATTRIBUTES,
    TRACE_ATTRIBUTES,
    TYPE_ATTRIBUTES,
    attributes_of,
    copies_bound,
    first_text,
)
from analysis.intake.redact import Redactor, redact_event, redact_key_fields
from analysis.intake.signature import Signature, fingerprint_event, message_signature
from analysis.intake.stacktrace import parse_trace
from analysis.intake.tally import message_template

__all__ = ["EventKey", "KeyCache", "full_keys"]

_TEMPLATE_CHARS = 512  # the tally reads no further (`tally.message_template`)
_SCALARS = (str, int, float, bool, type(None))
_OTLP_SLOTS = frozenset({*TRACE_ATTRIBUTES, *MESSAGE_ATTRIBUTES})
_OTLP_RECORD_SLOTS = frozenset({"timeUnixNano", "observedTimeUnixNano", "body", "traceId", "spanId", "attributes"})
_OTLP_SCOPE_LISTS = frozenset({"scopeLogs", "instrumentationLibraryLogs"})
_NOT_QUICK = ()  # a layout the quick path leaves to the full path
_FALLS_BACK = "\0the log message"  # kept for a template whose root message redacts to nothing (`_carried`)
_TEXT_TYPES = frozenset({str, type(None)})
_SCALAR_TYPES = frozenset(_SCALARS)  # what orjson decodes to is of these exact types, or a list or a dict
_FRAMES = operator.attrgetter("frames")
_TUPLE_KEY_TYPES = _TEXT_TYPES | {tuple}  # the layout, then text or absent values (JSON has no tuples)


class EventKey(NamedTuple):
    """What the window counts of one record, all redacted (the consumer's `Sighting`); `message` is the root
    cause's message, or the log message, as carried (see the module doc)."""

    server: str
    tenant: str
    fingerprint: str
    exception_type: str
    timestamp: float
    commit: str | None
    message: str


def full_keys(raw: bytes, config: DecodeConfig, redactor: Redactor, received_at: float) -> list[EventKey]:
    """The full path: decode, redact, fingerprint every record; raises `BadInput` for a bad message."""
    return [_key_of(event, fingerprint_event(event, config.in_app_prefixes), event.exception_message)
            for event in (redact_event(e, redactor) for e in decode_message(raw, config, received_at))]


def _key_of(event: ErrorEvent, signature: Signature, message: str) -> EventKey:
    return EventKey(event.server_id, event.tenant, signature.fingerprint,
                    signature.exception_type or event.exception_type, event.timestamp, event.commit, message)


class _Entry(NamedTuple):
    stacks: tuple[Any, ...]  # the frames tuples the key names by identity, kept alive so ids are not reused
    burst: tuple[str, str, str]  # server, tenant, fingerprint ("" when the message makes it: see the module doc)
    exception_type: str
    commit: str | None


class _Read(NamedTuple):
    """A record as the quick path reads it: its entry's key, its chain, log message and time."""

    key: tuple[Any, ...]
    chain: tuple[ExceptionInfo, ...]
    message: str
    moment: float
    chained: tuple[Any, ...] | None  # what `record_chain` gave, for the full path to reuse


class _Layout(NamedTuple):
    plan: tuple[Any, ...]
    extra: tuple[str, ...]  # unknown keys: only their nesting counts (scalars are left out)
    kept: tuple[str, ...]  # keys whose values enter the skeleton
    time: str | None  # the one key the time is read from by a plain get, if that is how decoding reads it
    trace: str | None  # likewise the text trace's key, when the type and message fields are read so too
    checked: tuple[str, ...]  # the keys of those type and message fields, which must hold text or nothing


class KeyCache:
    """Event keys of input messages under one decode and redaction configuration (see the module doc)."""

    def __init__(self, config: DecodeConfig, redactor: Redactor) -> None:
        self._config = config
        self._redactor = redactor
        self._fields = frozenset(("server_id", *config.server_id_fields))
        # The OTLP slots must be read by nothing but the chain (a commit or server field configured there is).
        self._otlp_quick = not (self._fields & _OTLP_SLOTS or config.commit_field in _OTLP_SLOTS)
        # 7 MiB in all, within the intake's 400 MiB (tests/unit/test_memory_bounds.py): an entry of a
        # 30-frame trace is charged ~10 kB, so a few hundred distinct failures stay quick.
        self._entries: BoundedCache[tuple[Any, ...], _Entry] = BoundedCache("quick_key.entries", 8192, 4 << 20)
        self._layouts: BoundedCache[tuple[str, ...], _Layout | tuple[()]] = BoundedCache(
            "quick_key.layouts", 1024, 1 << 20)
        self._messages: BoundedCache[tuple[str, str, str, bytes], str] = BoundedCache(
            "quick_key.messages", 16384, 2 << 20)
        self.hits = 0
        self.misses = 0

    def read(self, raw: bytes, received_at: float) -> list[EventKey]:
        """One key per record of `raw`, in order; raises `BadInput` for a message that is not an event."""
        reads = flat = None
        if len(raw) <= self._config.max_message_bytes:
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError:
                doc = None
            if type(doc) is dict:
                otlp = "resourceLogs" in doc
                flat = None if otlp else doc
                try:
                    reads = self._otlp(doc, received_at) if otlp else self._flat(doc, received_at)
                except (BadInput, orjson.JSONEncodeError):  # the full path says why (a skeleton too deep: too_deep)
                    reads = None
        if reads is not None:
            # The key names the frames tuples by id, and the entry keeps those alive: while it is there,
            # no other object has their ids, so a hit holds the very frames it was made from.
            get = self._entries.get
            if len(reads) == 1:  # the usual message
                entry = get(reads[0].key)
                if entry is not None and (key := self._hit(entry, reads[0])) is not None:
                    self.hits += 1
                    return [key]
            else:
                entries = [get(read.key) for read in reads]
                if None not in entries:
                    keys = [*map(self._hit, cast("list[_Entry]", entries), reads)]
                    if None not in keys:
                        self.hits += 1
                        return cast("list[EventKey]", keys)
        self.misses += 1
        return self._learn(raw, received_at, reads, flat)

    def _hit(self, entry: _Entry, read: _Read) -> EventKey | None:
        """The key of a record whose entry was found: with its fingerprint, or with the one its redacted
        message makes (a failure without frames); None when the root message redacts to nothing (terminal
        codes alone), where the full path reads the log message, or the trace, instead."""
        chain = read.chain
        value = chain[-1].value if chain else ""
        text = value or read.message  # what the tally and a message signature read
        burst = entry.burst
        if burst[2]:
            return EventKey(*burst, entry.exception_type, read.moment, entry.commit,
                            self._carried(burst, text, None, read.message))
        redacted = self._redactor.redact(text)
        if value and not redacted:
            return None
        burst = (burst[0], burst[1], message_signature(entry.exception_type, redacted).fingerprint)
        return EventKey(*burst, entry.exception_type, read.moment, entry.commit, self._carried(burst, text, redacted))

    def _learn(self, raw: bytes, received_at: float, reads: list[_Read] | None,
               flat: dict[str, Any] | None) -> list[EventKey]:
        """The full path; each record's entry is remembered (`_remember`). A flat record already parsed is
        decoded from that document, and with the chain `record_chain` read from it, rather than parsed and
        read again (the JSON parse alone is ~5-8 µs of a new 5 kB event)."""
        if flat is not None:
            events = [decode_record(flat, self._config, received_at, reads[0].chained if reads is not None else None)]
        else:
            events = decode_message(raw, self._config, received_at=received_at)
        keys = []
        for index, event in enumerate(events):
            redacted = redact_key_fields(event, self._redactor)
            signature = fingerprint_event(redacted, self._config.in_app_prefixes)
            burst = (redacted.server_id, redacted.tenant, signature.fingerprint)
            # The root message as `_carried` takes it (raw and redacted), with the log message to fall back on.
            root, redacted_root = event.root_cause, redacted.root_cause
            said = redacted_root.value if root and root.value and redacted_root else redacted.message
            keys.append(_key_of(redacted, signature, self._carried(burst, event.exception_message, said,
                                                                   event.message)))
            if reads is not None and len(reads) == len(events):
                self._remember(reads[index], event, signature, keys[-1])
        return keys

    def _remember(self, read: _Read, event: ErrorEvent, signature: Signature, key: EventKey) -> None:
        """Keep the entry of a record read quickly and in full, when the quick read saw the chain decoding
        saw: a stack signature that reads no message (with its fingerprint), or a failure without frames
        whose signature its message makes (without)."""
        chain, exceptions = read.chain, event.exceptions
        if len(chain) != len(exceptions) or (chain and chain[-1].type != exceptions[-1].type):
            return
        stacks = tuple([e.frames for e in chain])
        if len(read.key) == 2:  # the key of a failure without frames (`_key`)
            if signature.basis == "message":
                self._entries.put(read.key, _Entry((), (key.server, key.tenant, ""), key.exception_type, key.commit),
                                  OBJECT_BYTES * 2 + _skeleton_bytes(read.key[0]))
        elif signature.basis == "stacktrace" and not signature.library_only and \
                all(map(operator.is_, stacks, [e.frames for e in exceptions])):
            entry = _Entry(stacks, key[:3], key.exception_type, key.commit)
            self._entries.put(read.key, entry, OBJECT_BYTES * (2 + len(stacks)) + _skeleton_bytes(read.key[0])
                              + sum(map(_frames_bytes, stacks)))

    def _carried(self, burst: tuple[str, str, str], message: str, redacted: str | None, logged: str = "") -> str:
        """The redacted text carried for `message` (`redacted`, when known) in the burst (server, tenant,
        fingerprint): its template's first message there, redacted (module doc); text never crosses from one
        burst to another. A root message that redacts to nothing (terminal codes alone) stands for the
        `logged` message, as in the redacted event: that is carried, under its own template."""
        if len(message) > _TEMPLATE_CHARS:
            text = redacted if redacted is not None else self._redactor.redact(message)
            return text or (self._carried(burst, logged, None) if logged and logged != message else "")
        key = (*burst, message_template(message))
        carried = self._messages.get(key)
        if carried is None:
            carried = redacted if redacted is not None else self._redactor.redact(message)
            if not carried and logged and logged != message:
                carried = _FALLS_BACK
            self._messages.put(key, carried, OBJECT_BYTES + sum(map(sys.getsizeof, key)) + sys.getsizeof(carried))
        return self._carried(burst, logged, None) if carried is _FALLS_BACK else carried

    def _flat(self, doc: dict[str, Any], received_at: float) -> list[_Read] | None:
        """The read of a native, ECS or logstash record, or None: the full path reads it."""
        layout = tuple(doc)
        shape = self._layouts.get(layout)
        if shape is None:
            shape = self._layout(doc)
        if not shape:
            return None
        plan, extra, kept, time_key, trace_key, checked = shape
        get = doc.get
        # map rather than comprehensions: each of those is a call of its own (~0.2 µs in all here).
        skeleton: Any = (layout, *map(get, kept))
        # Text and absent values as a tuple: equal exactly when their JSON is (a string equals only a
        # string). Anything else is written out, so `1`, `1.0` and `true` differ; dumps costs ~0.5 µs.
        if not {*map(type, map(get, extra))} <= _SCALAR_TYPES:
            skeleton = orjson.dumps([*skeleton, *[(name, value) for name in extra
                                                  if type(value := get(name)) not in _SCALAR_TYPES]])
        elif not {*map(type, skeleton)} <= _TUPLE_KEY_TYPES:
            skeleton = orjson.dumps(skeleton)
        moment = timestamp(get(time_key) if time_key is not None else field_value(doc, plan[0]), received_at)
        chain: tuple[ExceptionInfo, ...] = ()
        trace: Any = None
        read = None  # what `record_chain` gave, for the full path to reuse
        if trace_key is not None and type(trace := get(trace_key)) is str and trace and \
                {*map(type, map(get, checked))} <= _TEXT_TYPES:
            chain = parse_trace(trace, self._config.max_frames)  # what `record_chain` reads, without its detours
            message = get("message")
        if not chain:
            read = record_chain(doc, plan, self._config.max_frames)
            chain, trace, message = read
        if type(message) is not str or not message:
            return None
        return [_Read(_key(skeleton, chain, trace), chain, message, moment, read)]

    def _layout(self, doc: dict[str, Any]) -> _Layout | tuple[()]:
        """Which keys of this layout are slots, skeleton or ignored unknowns; () when not for the quick path.

        Slots are the keys the time, the message and the chain are read from (computed per event by
        decoding's own functions); everything else decoding reads enters the skeleton."""
        plan = layout_plan(doc, self._config)
        slots = {"message", *_names(plan[0]), *_names(plan[4]), *_names(plan[5]), *_names(plan[6])}
        commit_root = (self._config.commit_field or "").partition(".")[0]
        others = {commit_root, *self._fields, *_names(plan[1]), *_names(plan[2]), *_names(plan[7]),
                  *_names(plan[8]), *_names(plan[9])}
        quick: _Layout | tuple[()] = _NOT_QUICK
        if plan[3] is not None and not slots & others:
            read = {name for names in SPELLINGS.values() for name in names} | others
            kept = tuple(k for k in doc if k not in slots and (k in read or k.partition(".")[0] in read))
            checked = tuple(_plain_key(spec) or "" for spec in (plan[4], plan[5]) if spec is not None)
            trace = _plain_key(plan[6]) if all(checked) else None
            quick = _Layout(plan, tuple(k for k in doc if k not in slots and k not in kept), kept,
                            _plain_key(plan[0]), trace, checked)
        self._layouts.put(tuple(doc), quick, OBJECT_BYTES * (2 + len(doc)) + sum(map(sys.getsizeof, doc)))
        return quick

    def _otlp(self, doc: dict[str, Any], received_at: float) -> list[_Read] | None:
        """The reads of an OTLP export's records, in `decode_otlp`'s order, or None: the full path reads it.
        A record's skeleton is its resource and scope and its own fields but the slots."""
        resources = doc["resourceLogs"]
        if not self._otlp_quick or type(resources) is not list:
            return None
        reads: list[_Read] = []
        copied = 0
        for resource_logs in resources:
            if type(resource_logs) is not dict:
                return None
            scopes = resource_logs.get("scopeLogs") or resource_logs.get("instrumentationLibraryLogs")
            if type(scopes) is not list:
                return None
            resource = orjson.dumps({k: v for k, v in resource_logs.items() if k not in _OTLP_SCOPE_LISTS})
            attributes = inner.get("attributes") if type(inner := resource_logs.get("resource")) is dict else None
            weight = len(resource) + ENTRY_BYTES * (len(attributes) if type(attributes) is list else 0)
            for scope_logs in scopes:
                if type(scope_logs) is not dict or type(records := scope_logs.get("logRecords")) is not list:
                    return None
                copied = copies_bound(weight, len(records), copied)  # past it, the full path says why
                outer = (resource, orjson.dumps({k: v for k, v in scope_logs.items() if k != "logRecords"}))
                for record in records:
                    read = self._otlp_record(record, outer, received_at) if type(record) is dict else None
                    if read is None:
                        return None
                    reads.append(read)
        return reads or None

    def _otlp_record(self, record: dict[str, Any], outer: tuple[bytes, bytes], received_at: float) -> _Read | None:
        """The read of one OTLP log record under its resource and scope (`outer`, each as JSON), or None."""
        body, moment = record.get("body"), record.get("timeUnixNano")
        if type(body) is not dict or len(body) != 1 or type(message := body.get("stringValue")) is not str \
                or not message or type(moment) is not str or moment in ("", "0") \
                or not isinstance(record.get("traceId"), _SCALARS) or not isinstance(record.get("spanId"), _SCALARS):
            return None
        attributes = attributes_of(record.get("attributes"))
        # As `otlp._record` reads them (a field of the wrong type raises BadInput: the full path says why).
        get = attributes.get
        traces = [text(get(name), name) for name in TRACE_ATTRIBUTES]
        kind, value = first_text(attributes, TYPE_ATTRIBUTES), first_text(attributes, MESSAGE_ATTRIBUTES)
        chain, trace = trace_chain(traces, message, self._config.max_frames)
        chain = chain or declared_chain(kind, value, trace)
        # The resource's and the scope's JSON are shared by the records' skeletons, not copied into each.
        skeleton = (outer, orjson.dumps([{k: v for k, v in record.items() if k not in _OTLP_RECORD_SLOTS},
                                         {k: v for k, v in attributes.items() if k not in _OTLP_SLOTS}]))
        return _Read(_key(skeleton, chain, trace), chain, message, timestamp(moment, received_at), None)


def _key(skeleton: Any, chain: tuple[ExceptionInfo, ...], trace: str) -> tuple[Any, ...]:
    """The entry's key of a record: its skeleton, and the root cause's type and the identity of every
    exception's frames; of a failure without frames whose signature reads its message (no chain, or one
    exception without frames, with a message or not standing for a trace), the skeleton and the type."""
    if not chain or (len(chain) == 1 and not chain[0].frames and (chain[0].value or not trace)):
        return skeleton, chain[0].type if chain else None
    return skeleton, chain[-1].type, *map(id, map(_FRAMES, chain))


def _frames_bytes(frames: tuple[Frame, ...]) -> int:
    """What keeping `frames` alive costs once the parse caches have let them go: an object per frame and
    its strings (charged as if no two frames shared one)."""
    size = sys.getsizeof  # a list, not a generator: ~40% less per frame, for every new trace's entry
    return OBJECT_BYTES * (1 + len(frames)) + sum([size(f.function) + size(f.filename) + size(f.abs_path)
                                                   + size(f.module) for f in frames])


def _skeleton_bytes(skeleton: bytes | tuple[Any, ...]) -> int:
    """What a skeleton key holds: its JSON text, or its tuple, its values and its layout (the tuple of key
    names, which the entry keeps alive: the layouts cache may have dropped it, so it is charged here too)."""
    size = sys.getsizeof
    if isinstance(skeleton, bytes):
        return size(skeleton)
    layout: tuple[str, ...] = skeleton[0]
    return size(skeleton) + sum(map(size, skeleton[1:])) + size(layout) + sum(map(size, layout))


def _plain_key(spec: str | tuple[str, ...] | None) -> str | None:
    """The key a plan's field spec reads by a plain `get` (one flat spelling, or one without a dot), else None."""
    if type(spec) is str:
        return spec
    return spec[0] if spec and len(spec) == 1 and "." not in spec[0] else None


def _names(spec: str | tuple[str, ...] | None) -> set[str]:
    """The top-level keys a plan's field spec may read: its spellings and the objects they may nest in."""
    names = (spec,) if type(spec) is str else spec or ()
    return {*names, *(name.partition(".")[0] for name in names)}
