"""The signature of a failure: the key that groups the events of one burst.

Fingerprint = exception type of the root cause + its normalised in-app frames (`analysis.intake.frame_key`:
never line numbers, addresses, or generated/proxy/lambda/closure suffixes). Without a trace it is the
chain's exception types plus their messages as templates (`analysis.intake.template`). A trace without
in-app frames (a network error surfacing in the runtime's own frames) is keyed by all its frames plus the
masked message: its frames alone are shared by every outage of that kind. Frame keys are built the same
way from structured frames and from frames parsed out of raw text, so one failure gets one fingerprint
whichever input shape carried it. A fingerprint is a pure function of the event: nothing is learned.
"""

from __future__ import annotations

import hashlib
import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from analysis.cache import OBJECT_BYTES, BoundedCache
from analysis.event import ErrorEvent, ExceptionInfo, Frame
from analysis.intake.frame_key import frame_key, is_in_app
from analysis.intake.template import mask_message

__all__ = ["MAX_SIGNATURE_FRAMES", "Signature", "describe", "fingerprint_event", "is_in_app", "mask_message",
           "message_signature", "normalise_frame"]  # fmt: skip

MAX_SIGNATURE_FRAMES = 12
"""Innermost normalised frames that enter the fingerprint; deeper callers do not split a failure."""

_CACHE_SIZE = 8192
_CHAIN_CACHE_SIZE = 4096
_FRAME_CACHE_SIZE = 65536


@dataclass(frozen=True, slots=True)
class Signature:
    """What an event is grouped by. `frames` are the normalised frame keys that were hashed."""

    fingerprint: str
    basis: Literal["stacktrace", "message"]
    exception_type: str
    frames: tuple[str, ...] = ()
    library_only: bool = False
    """No frame is the service's own: the masked message enters the fingerprint too."""


def fingerprint_event(event: ErrorEvent, in_app_prefixes: Sequence[str] = ()) -> Signature:
    """The signature of `event`: root-cause type plus in-app frames, or types plus masked messages.

    Frames are read root cause first, then each enclosing exception's, so a Python chain (whose root
    cause carries only the frames below its `try`) still counts where it was caught and wrapped.
    """
    chain = event.exceptions
    if not chain:
        return message_signature("", event.message)
    root = chain[-1]
    # A trace logged as the message itself adds nothing beyond its own header line.
    message = root.value or ("" if event.raw_trace and event.message == event.raw_trace else event.message)
    signature = _stack_signature_of(chain, in_app_prefixes if type(in_app_prefixes) is tuple
                                    else tuple(in_app_prefixes))
    if signature is None:
        if len(chain) == 1:
            return message_signature(root.type, message)
        return _chain_signature(chain, event.message)
    return _with_message(signature, message) if signature.library_only else signature


def describe(signature: Signature) -> dict[str, Any]:
    """The JSON line `logagent fingerprint` prints for one event."""
    return {
        "fingerprint": signature.fingerprint,
        "basis": signature.basis,
        "exception_type": signature.exception_type,
        "frames": list(signature.frames),
    }


def normalise_frame(frame: Frame) -> str:
    """The frame's stable key (see `analysis.intake.frame_key`); "" for a frame that does not count."""
    return frame_key(frame)


def _stack_signature_of(chain: tuple[ExceptionInfo, ...], prefixes: tuple[str, ...]) -> Signature | None:
    """The stack signature of a chain, from the caches when its frames tuples were seen; None without frames.

    Decoding hands out the same frames tuples for a repeated trace, so identity is a cheap, exact key;
    each entry keeps its tuples alive, so their ids cannot be reused while cached.
    """
    root = chain[-1]
    if len(chain) == 1:
        frames = root.frames
        if not frames:
            return None
        entry = _BY_FRAMES.get(id(frames))
        if entry is not None and entry[0] is frames and entry[1] == root.type and entry[2] == prefixes:
            return entry[3]
        signature = _stack_signature(root.type, (frames,), prefixes)
        _BY_FRAMES.put(id(frames), (frames, root.type, prefixes, signature), _chain_bytes(root.type, (frames,)))
        return signature
    stacks = tuple([exception.frames for exception in reversed(chain) if exception.frames])
    if not stacks:
        return None
    key = (root.type, prefixes, *map(id, stacks))
    cached = _BY_STACKS.get(key)
    if cached is not None and all(map(operator.is_, cached[0], stacks)):
        return cached[1]
    signature = _stack_signature(root.type, stacks, prefixes)
    _BY_STACKS.put(key, (stacks, signature), _chain_bytes(root.type, stacks))
    return signature


def _chain_bytes(exception_type: str, stacks: tuple[tuple[Frame, ...], ...]) -> int:
    """What an entry keeping `stacks` alive costs: an object per frame and the type; the frames' strings are
    charged where the frames are made (the parse and decode caches, `_BY_FRAME`)."""
    return sys.getsizeof(exception_type) + OBJECT_BYTES * (1 + sum(map(len, stacks)))


# Bounded in entries and bytes (analysis.cache); first in, first out: a burst's entries are hot while it lasts.
_BY_FRAMES: BoundedCache[int, tuple[tuple[Frame, ...], str, tuple[str, ...], Signature]] = BoundedCache(
    "signature.by_frames", _CHAIN_CACHE_SIZE, 32 << 20)
_BY_STACKS: BoundedCache[tuple[Any, ...], tuple[tuple[tuple[Frame, ...], ...], Signature]] = BoundedCache(
    "signature.by_stacks", _CHAIN_CACHE_SIZE, 16 << 20)
_BY_FRAME: BoundedCache[tuple[int, tuple[str, ...]], tuple[Frame, str, bool]] = BoundedCache(
    "signature.by_frame", _FRAME_CACHE_SIZE, 16 << 20)
_FRAME_FACTS: BoundedCache[tuple[Frame, tuple[str, ...]], tuple[str, bool, int]] = BoundedCache(
    "signature.frame_facts", _FRAME_CACHE_SIZE, 16 << 20)
_BY_MESSAGE: BoundedCache[tuple[str, str], Signature] = BoundedCache("signature.by_message", _CACHE_SIZE, 8 << 20)
_BY_LIBRARY_MESSAGE: BoundedCache[tuple[str, str], Signature] = BoundedCache(
    "signature.by_library_message", _CACHE_SIZE, 4 << 20)


def message_signature(exception_type: str, message: str) -> Signature:
    """The signature of a failure without frames: what `fingerprint_event` gives an event with no chain
    (type "", its message) or with one exception without frames (its type, its message or the event's)."""
    masked = mask_message(message)
    signature = _BY_MESSAGE.get((exception_type, masked))
    if signature is None:
        signature = Signature(_digest("message", exception_type, masked), "message", exception_type)
        nbytes = 2 * sys.getsizeof(exception_type) + sys.getsizeof(masked) + OBJECT_BYTES
        _BY_MESSAGE.put((exception_type, masked), signature, nbytes)
    return signature


def _chain_signature(chain: tuple[ExceptionInfo, ...], message: str) -> Signature:
    """A chain without frames: every exception's type and masked message, outermost first.

    Consecutive repeats count once, as recursion does for frames: an exception group of N alike
    children is one failure whatever N is.
    """
    parts: list[str] = []
    for exception in chain:
        part = f"{_type_key(exception.type)}\0{mask_message(exception.value)}"
        if not parts or parts[-1] != part:
            parts.append(part)
    root = chain[-1]
    body = "\n".join(parts) if root.value or not message else "\n".join((*parts, mask_message(message)))
    return Signature(_digest("message", root.type, body), "message", root.type)


def _stack_signature(
    exception_type: str, stacks: tuple[tuple[Frame, ...], ...], prefixes: tuple[str, ...]
) -> Signature:
    in_app: dict[str, None] = {}  # ordered sets: a frame seen twice (recursion, proxy + target) counts once
    every: dict[str, None] = {}
    for frames in stacks:
        for frame in frames:
            facts = _BY_FRAME.get((id(frame), prefixes))  # parsers share frame objects per line
            if facts is None or facts[0] is not frame:
                key, own, nbytes = _frame_facts(frame, prefixes)
                facts = _BY_FRAME.put((id(frame), prefixes), (frame, key, own), nbytes)
            _, key, own = facts
            if not key:
                continue
            if len(every) < MAX_SIGNATURE_FRAMES:
                every[key] = None
            if own:
                in_app[key] = None
                if len(in_app) == MAX_SIGNATURE_FRAMES:
                    break
        if len(in_app) == MAX_SIGNATURE_FRAMES:
            break
    chosen = tuple(in_app or every)
    if not chosen:
        return message_signature(exception_type, "")
    return Signature(
        fingerprint=_digest("stacktrace", exception_type, "\n".join(chosen)),
        basis="stacktrace",
        exception_type=exception_type,
        frames=chosen,
        library_only=not in_app,
    )


def _with_message(signature: Signature, message: str) -> Signature:
    """A library-only stack signature refined by the masked message of its root cause."""
    masked = mask_message(message)
    key = (signature.fingerprint, masked)
    refined = _BY_LIBRARY_MESSAGE.get(key)
    if refined is None:
        body = "\n".join((*signature.frames, masked))
        refined = Signature(_digest("stacktrace", signature.exception_type, body), "stacktrace",
                            signature.exception_type, signature.frames, library_only=True)
        _BY_LIBRARY_MESSAGE.put(key, refined, sys.getsizeof(masked) + OBJECT_BYTES * (2 + len(refined.frames)))
    return refined


def _digest(basis: str, exception_type: str, body: str) -> str:
    text = f"{basis}\0{_type_key(exception_type)}\0{body}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _type_key(exception_type: str) -> str:
    """Qualified and simple spellings of one type hash alike (`java.io.IOException` = `IOException`)."""
    name = exception_type.strip()
    if " " in name or "/" in name:
        return name
    return name.rpartition(".")[2]


def _frame_facts(frame: Frame, prefixes: tuple[str, ...]) -> tuple[str, bool, int]:
    """Key and in-app flag of a frame, shared by equal frames that are distinct objects, and the bytes an
    entry keeping the frame and its key alive costs (the object and its strings)."""
    facts = _FRAME_FACTS.get((frame, prefixes))
    if facts is None:
        key = frame_key(frame)
        size = sys.getsizeof
        nbytes = (OBJECT_BYTES + size(frame.function) + size(frame.filename) + size(frame.abs_path)
                  + size(frame.module) + size(key))
        facts = _FRAME_FACTS.put((frame, prefixes), (key, is_in_app(frame, prefixes), nbytes), nbytes)
    return facts
