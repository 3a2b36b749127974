"""The signature of a failure: the key that groups the events of one burst.

Fingerprint = exception type of the root cause + its normalised in-app frames (never line numbers,
addresses, or generated/proxy/lambda/closure suffixes). Without a trace it is the exception type plus the
message with its variable parts masked. A trace without in-app frames (a network error surfacing in the
runtime's own frames) is keyed by all its frames plus the masked message: its frames alone are shared by
every outage of that kind. Frame keys are built the same way from structured frames and from
frames parsed out of raw text, so one failure gets one fingerprint whichever input shape carried it.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from analysis.event import ErrorEvent, ExceptionInfo, Frame

MAX_SIGNATURE_FRAMES = 12
"""Innermost normalised frames that enter the fingerprint; deeper callers do not split a failure."""

_MASK_INPUT_LIMIT = 512
_MASK_CACHE_SIZE = 8192
_TEMPLATE = str.maketrans("0123456789abcdefABCDEF", "0000000000aaaaaaAAAAAA")
_TEMPLATE_BYTES = bytes.maketrans(b"0123456789abcdefABCDEF", b"0000000000aaaaaaAAAAAA")
_CHAIN_CACHE_SIZE = 4096
_FRAME_CACHE_SIZE = 65536

_JS_EXTENSIONS = frozenset({"js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts"})
_PY_EXTENSIONS = frozenset({"py", "pyc", "pyw"})
_JS_URL_PREFIXES = ("webpack-internal:///", "webpack:///", "file://", "app:///")
# Frames that come and go with the interpreter version or the call path, not with the failure site.
_PY_SYNTHETIC = frozenset({"<lambda>", "<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"})

_LIBRARY_PATH_MARKERS = (
    "site-packages/", "dist-packages/", "/lib/python", "node_modules/", "node:internal",
    "/pkg/mod/", "/usr/lib/go/", "/usr/local/go/src/", "/vendor/", "<frozen ",
)  # fmt: skip
_LIBRARY_PATH_PREFIXES = ("node:", "internal/", "<frozen", "runtime/")
_JVM_LIBRARY_PREFIXES = (
    "java.", "javax.", "jakarta.", "jdk.", "sun.", "com.sun.", "kotlin.", "kotlinx.", "scala.", "groovy.",
    "org.springframework.", "org.apache.", "org.hibernate.", "org.eclipse.", "org.junit.", "org.slf4j.",
    "ch.qos.logback.", "io.netty.", "reactor.", "io.reactivex.", "com.fasterxml.", "com.google.",
    "io.micrometer.", "io.grpc.", "okhttp3.", "feign.", "org.postgresql.", "com.zaxxer.", "io.undertow.",
    "net.bytebuddy.", "org.aspectj.", "io.opentelemetry.", "org.jboss.", "com.mysql.", "akka.", "io.vertx.",
    "org.glassfish.", "org.mockito.",
)  # fmt: skip
_GO_STDLIB = frozenset((
    "archive", "bufio", "builtin", "bytes", "cmp", "compress", "container", "context", "crypto", "database",
    "debug", "embed", "encoding", "errors", "expvar", "flag", "fmt", "go", "hash", "html", "image", "index",
    "internal", "io", "iter", "log", "maps", "math", "mime", "net", "os", "path", "plugin", "reflect",
    "regexp", "runtime", "slices", "sort", "strconv", "strings", "structs", "sync", "syscall", "testing",
    "text", "time", "unicode", "unique", "unsafe", "weak",
))  # fmt: skip

_JVM_RULES = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\$\$[A-Za-z]*CGLIB\$\$\w*", ""),  # Spring/CGLIB proxies: OrderService$$EnhancerBySpringCGLIB$$1a2b
        (r"\$(?:HibernateProxy|ByteBuddy|MockitoMock)\$\w*", ""),
        (r"\$\$Lambda(?:\$\d+)?(?:/0x[0-9a-fA-F]+)?", "$$Lambda"),
        (r"\$Proxy\d+", "$Proxy"),
        (r"\bjdk\.proxy\d+", "jdk.proxy"),
        (r"(Generated(?:Serialization)?(?:Method|Constructor)Accessor)\d+", r"\1"),
        (r"\$lambda-\d+", "$lambda"),  # Kotlin
        (r"\$\d+", "$"),  # anonymous classes Foo$1, lambda$handle$3, access$000
    )
)
_GO_RULES = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"\.func\d+(?:\.\d+)*", ""),  # closures: main.handler.func1.2
        (r"\.(?:gowrap|deferwrap)\d+", ""),
        (r"\[[^\]]*\]", "[...]"),  # generic instantiations
    )
)
# (branch, a literal it cannot match without): the masking alternation, in its order of precedence.
_MASK_BRANCHES = (
    (r"\[REDACTED:\w{1,40}\]", "[REDACTED:"),
    (r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "-"),
    (r"\"[^\"\n]{0,256}\"", '"'),
    (r"'[^'\n]{0,256}'", "'"),
    (r"\b[A-Za-z][\w+.-]{0,30}://[^\s\"'<>]+", "://"),
    (r"\b[\w.%+-]{1,64}@[\w-]+(?:\.[\w-]+)+", "@"),
    (r"(?<![\w/.])(?:/[\w.@~+-]+)+/?", "/"),
    (r"\b[A-Za-z]:\\[^\s\"']*", ":\\"),
    (r"\b[0-9a-fA-F]{8,}\b", ""),
    (r"\b\w*\d[\w.:+-]*", ""),  # numbers, ids, hex, IPs, timestamps, versions: anything carrying a digit
)
_MASK = re.compile("|".join(branch for branch, _ in _MASK_BRANCHES))
_MASKS_BY_LITERALS: dict[int, re.Pattern[str]] = {}


def _mask_pattern(text: str) -> re.Pattern[str]:
    """`_MASK` without the branches that cannot match in `text`: same matches, far fewer tries per char."""
    present = 0
    for bit, (_, literal) in enumerate(_MASK_BRANCHES):
        if not literal or literal in text:
            present |= 1 << bit
    pattern = _MASKS_BY_LITERALS.get(present)
    if pattern is None:
        branches = [branch for bit, (branch, _) in enumerate(_MASK_BRANCHES) if present >> bit & 1]
        pattern = _MASKS_BY_LITERALS[present] = re.compile("|".join(branches))
    return pattern


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
    """The signature of `event`: root-cause type plus in-app frames, or type plus masked message.

    Frames are read root cause first, then each enclosing exception's, so a Python chain (whose root
    cause carries only the frames below its `try`) still counts where it was caught and wrapped.
    """
    chain = event.exceptions
    if not chain:
        return _message_signature("", event.message)
    root = chain[-1]
    message = root.value or event.message
    signature = _stack_signature_of(chain, in_app_prefixes if type(in_app_prefixes) is tuple
                                    else tuple(in_app_prefixes))
    if signature is None:
        return _message_signature(root.type, message)
    return _with_message(signature, message) if signature.library_only else signature


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
        _remember(_BY_FRAMES, id(frames), (frames, root.type, prefixes, signature))
        return signature
    stacks = tuple([exception.frames for exception in reversed(chain) if exception.frames])
    if not stacks:
        return None
    key = (root.type, prefixes, *map(id, stacks))
    cached = _BY_STACKS.get(key)
    if cached is not None and all(map(operator.is_, cached[0], stacks)):
        return cached[1]
    signature = _stack_signature(root.type, stacks, prefixes)
    _remember(_BY_STACKS, key, (stacks, signature))
    return signature


def _remember(cache: OrderedDict[Any, Any], key: Any, entry: Any, size: int = _CHAIN_CACHE_SIZE) -> None:
    # FIFO is enough: a burst's entries are hot while it lasts. An OrderedDict drops its oldest entry in
    # O(1); a plain dict's `next(iter(...))` walks the holes earlier deletions left, which cost 20 µs an
    # insert in a full 64k-entry cache, per new frame, once a stream of distinct traces had filled it.
    if len(cache) >= size:
        cache.popitem(last=False)
    cache[key] = entry


_BY_FRAMES: OrderedDict[int, tuple[tuple[Frame, ...], str, tuple[str, ...], Signature]] = OrderedDict()
_BY_STACKS: OrderedDict[tuple[Any, ...], tuple[tuple[tuple[Frame, ...], ...], Signature]] = OrderedDict()
_BY_FRAME: OrderedDict[tuple[int, tuple[str, ...]], tuple[Frame, str, bool]] = OrderedDict()
_BY_MESSAGE: OrderedDict[tuple[str, str], Signature] = OrderedDict()
_BY_LIBRARY_MESSAGE: OrderedDict[tuple[str, str], Signature] = OrderedDict()
_MASK_SPANS: OrderedDict[bytes, tuple[tuple[int, int], ...]] = OrderedDict()


def describe(signature: Signature) -> dict[str, Any]:
    """The JSON line `logagent fingerprint` prints for one event."""
    return {
        "fingerprint": signature.fingerprint,
        "basis": signature.basis,
        "exception_type": signature.exception_type,
        "frames": list(signature.frames),
    }


def is_in_app(frame: Frame, prefixes: Sequence[str] = ()) -> bool:
    """Whether `frame` is the service's own code: the frame's flag, else the prefixes, else heuristics."""
    if frame.in_app is not None:
        return frame.in_app
    if prefixes:
        return _matches_prefix(frame, prefixes)
    return not _looks_like_library(frame)


def mask_message(text: str) -> str:
    """`text` with its variable parts (numbers, hex, UUIDs, IPs, emails, paths, quotes, times) masked."""
    text = text[:_MASK_INPUT_LIMIT]
    if "[REDACTED" in text:  # the placeholder's letters are hex digits: the template trick below can't see it
        return " ".join(_MASK.sub("<*>", text).split())
    # Every class of `_MASK` holds all of 0-9, all of a-f and all of A-F or none of them, so replacing
    # each digit by 0 and each hex letter by a (A) changes no match: the spans of a message's template
    # are those of the message. Messages of a burst differ only in such ids, so their templates repeat.
    # The template is built on the UTF-8 bytes: a byte table is far cheaper than str.translate, and
    # equal byte templates mean equal text templates (the encoding is one-to-one, digits are ASCII).
    key = text.encode("utf-8", "surrogatepass").translate(_TEMPLATE_BYTES)
    spans = _MASK_SPANS.get(key)
    if spans is None:
        template = text.translate(_TEMPLATE)
        spans = tuple(match.span() for match in _mask_pattern(template).finditer(template))
        _remember(_MASK_SPANS, key, spans, _MASK_CACHE_SIZE)
    if not spans:
        return " ".join(text.split())
    parts = []
    position = 0
    for start, end in spans:
        parts.append(text[position:start])
        position = end
    parts.append(text[position:])
    return " ".join("<*>".join(parts).split())


def normalise_frame(frame: Frame) -> str:
    """The frame's stable key: module or file path plus function, without any variable suffix.

    Returns "" for synthetic frames that must not count (comprehensions, JVM lambda classes).
    """
    return _frame_key(frame)


def _message_signature(exception_type: str, message: str) -> Signature:
    masked = mask_message(message)
    signature = _BY_MESSAGE.get((exception_type, masked))
    if signature is None:
        signature = Signature(_digest("message", exception_type, masked), "message", exception_type)
        _remember(_BY_MESSAGE, (exception_type, masked), signature, _MASK_CACHE_SIZE)
    return signature


def _stack_signature(
    exception_type: str, stacks: tuple[tuple[Frame, ...], ...], prefixes: tuple[str, ...]
) -> Signature:
    in_app: dict[str, None] = {}  # ordered sets: a frame seen twice (recursion, proxy + target) counts once
    every: dict[str, None] = {}
    for frames in stacks:
        for frame in frames:
            facts = _BY_FRAME.get((id(frame), prefixes))  # parsers share frame objects per line
            if facts is None or facts[0] is not frame:
                facts = (frame, *_frame_facts(frame, prefixes))
                _remember(_BY_FRAME, (id(frame), prefixes), facts, _FRAME_CACHE_SIZE)
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
        return _message_signature(exception_type, "")
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
        _remember(_BY_LIBRARY_MESSAGE, key, refined, _MASK_CACHE_SIZE)
    return refined


def _digest(basis: str, exception_type: str, body: str) -> str:
    text = f"{basis}\0{_type_key(exception_type)}\0{body}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _type_key(exception_type: str) -> str:
    """Qualified and simple spellings of one type hash alike (`java.io.IOException` = `IOException`)."""
    name = exception_type.strip()
    if " " in name or "/" in name:
        return name
    for pattern, replacement in _JVM_RULES[:4]:
        name = pattern.sub(replacement, name)
    return name.rpartition(".")[2]


@lru_cache(maxsize=65536)
def _frame_facts(frame: Frame, prefixes: tuple[str, ...]) -> tuple[str, bool]:
    return _frame_key(frame), is_in_app(frame, prefixes)


def _language(frame: Frame) -> str:
    path = frame.abs_path or frame.filename
    extension = path.partition("?")[0].rpartition(".")[2].lower()
    if extension in _PY_EXTENSIONS or path.startswith("<frozen"):
        return "python"
    if extension == "go":
        return "go"
    if extension in _JS_EXTENSIONS:
        return "node"
    return "jvm" if frame.module else ""


def _frame_key(frame: Frame) -> str:
    language = _language(frame)
    if language == "python":
        return _python_key(frame)
    if language == "node":
        return _node_key(frame)
    if language == "go":
        name = f"{frame.module}.{frame.function}" if frame.module else frame.function
        for pattern, replacement in _GO_RULES:
            name = pattern.sub(replacement, name)
        return name
    if language == "jvm":
        if "$$Lambda" in frame.module:  # hidden lambda classes: shown or not depending on the JVM
            return ""
        name = f"{frame.module}.{frame.function}"
        for pattern, replacement in _JVM_RULES:
            name = pattern.sub(replacement, name)
        return name
    path = frame.abs_path or frame.filename
    return f"{_path_tail(path, frozenset())}:{frame.function}" if path else frame.function


def _path_tail(path: str, extensions: frozenset[str], keep: int = 2) -> str:
    """The last `keep` path components without extension: deploy roots differ, the tail does not."""
    parts = [part for part in path.replace("\\", "/").split("/") if part and part != "."]
    if not parts:
        return ""
    stem, dot, extension = parts[-1].rpartition(".")
    if dot and extension.lower() in extensions:
        parts[-1] = stem
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return "/".join(parts[-keep:])


def _python_key(frame: Frame) -> str:
    function = frame.function.rpartition(".")[2]  # qualname (Foo.bar) and co_name (bar) agree
    if function in _PY_SYNTHETIC:
        return ""
    path = frame.abs_path or frame.filename
    if path.startswith("<"):
        return f"{path}:{function}"
    return f"{_path_tail(path, _PY_EXTENSIONS).replace('/', '.')}:{function}"


def _node_key(frame: Frame) -> str:
    function = frame.function.strip()
    for prefix in ("async ", "new "):
        function = function.removeprefix(prefix)
    alias = function.find(" [as ")
    if alias >= 0:
        function = function[:alias]
    if function in ("", "?", "Object.<anonymous>"):
        function = "<anonymous>"
    path = frame.abs_path or frame.filename
    for prefix in _JS_URL_PREFIXES:
        path = path.removeprefix(prefix)
    path = path.partition("?")[0]
    return f"{_path_tail(path, _JS_EXTENSIONS)}:{function}"


def _matches_prefix(frame: Frame, prefixes: Sequence[str]) -> bool:
    path = "/" + (frame.abs_path or frame.filename).replace("\\", "/").lstrip("/")
    for prefix in prefixes:
        if frame.module.startswith(prefix) or frame.function.startswith(prefix):
            return True
        as_path = prefix.replace(".", "/") if "/" not in prefix else prefix
        if len(path) > 1 and ("/" + as_path.lstrip("/")) in path:
            return True
    return False


def _looks_like_library(frame: Frame) -> bool:
    path = (frame.abs_path or frame.filename).replace("\\", "/")
    if path and (path.startswith(_LIBRARY_PATH_PREFIXES) or any(m in path for m in _LIBRARY_PATH_MARKERS)):
        return True
    language = _language(frame)
    if language == "go":
        if not frame.module:  # builtins such as panic()
            return True
        first = frame.module.partition("/")[0]
        return first in _GO_STDLIB or "@v" in path
    if frame.module and language in ("jvm", ""):
        return frame.module.startswith(_JVM_LIBRARY_PREFIXES)
    return not path and not frame.module
