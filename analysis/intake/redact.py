"""Secrets and personal data masked out of everything Log Agent lets leave: events, analyses, prompts, logs.

The rules (`analysis.intake.redact_rules`) are exact Python regular expressions. Running each of them over
every text would cost a pass per rule, so all of them are first compiled together into one Hyperscan
database in prefilter mode, where each pattern matches a superset of what its Python rule matches
(lookarounds and back-references relaxed, upper bounds dropped, non-ASCII ranges as bytes). One scan of a
text names the rules that may match; a text it names none for is returned as it is, and otherwise only
the rules it named run. A property test checks that this gives exactly what every rule in turn gives.

A long multi-line text with hits is redacted line by line from a cache of redacted lines when no rule
that can span lines was named: trace lines repeat across a burst while headers carry fresh ids. Caches
are bounded in entries and in characters. Placeholders name the kind: `[REDACTED:aws_access_key]`. User
patterns (`extra_patterns`) run on the `regex` engine with a timeout, after the built-in rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import operator
import platform
import re
import sys
import threading
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from typing import Any, cast
from urllib.parse import unquote

import hyperscan
import regex
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from analysis.cache import OBJECT_BYTES, BoundedCache, memoize
from analysis.event import ErrorEvent, ExceptionInfo, Frame, new_event, new_exception
from analysis.intake import disk_cache
from analysis.intake.private_key import KEY_HEADERS, KeyBlockLines, redact_private_keys
from analysis.intake.redact_rules import (
    INTL,
    PRIVATE_KEY,
    RULES,
    Rule,
    header_or_flag,
    looks_generated,
    placeholder,
    secret_key,
)
from analysis.report import Analysis

__all__ = ["KINDS", "RedactionConfig", "Redactor", "redact_analysis", "redact_event", "redact_id", "redact_key_fields",
           "redact_value"]

KINDS = tuple(dict.fromkeys((PRIVATE_KEY, *(rule.kind for rule in RULES))))
"""Every built-in kind of secret or personal data."""

_EXTRA_PATTERN_TIMEOUT_SECONDS = 0.05
_MAX_VALUE_DEPTH = 64
_SHORT_TEXT = 256  # texts up to this long are cached whole (types, loggers, tenants, repeated messages)
_LONG_TEXT = 512  # a multi-line text with hits past this length goes line by line
_MAX_CACHED_LINE = 1024
_log = logging.getLogger(__name__)
_FRAMES_CACHE_SIZE = 4096


_MIN_ID_KEY = 16  # characters: an id key shorter than this could be guessed, and the tags with it


class RedactionConfig(BaseModel):
    """Which kinds to redact, and extra patterns (`name → regex`) for secrets only this company has."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    kinds: tuple[str, ...] = Field(default=KINDS, description="Built-in kinds to redact.")
    extra_patterns: dict[str, str] = Field(default_factory=dict, description="Name → regex, each redacted.")
    id_key: SecretStr | None = Field(
        None, description="Key of the digest that tags an id redaction changed (a tenant's email, a server's IP); "
                          "the same on every replica. Unset, the digest is unkeyed and confirms a guessed id.")

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, kinds: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown redaction kinds: {unknown}")
        return kinds

    @field_validator("id_key")
    @classmethod
    def _strong_key(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and len(key.get_secret_value().strip()) < _MIN_ID_KEY:
            raise ValueError(f"the id key must hold at least {_MIN_ID_KEY} characters: a shorter one can be guessed")
        return key

    @field_validator("extra_patterns")
    @classmethod
    def _compiling_patterns(cls, patterns: dict[str, str]) -> dict[str, str]:
        for name, pattern in patterns.items():
            try:
                regex.compile(pattern)
            except regex.error as error:
                raise ValueError(f"pattern {name!r} is not a regular expression: {error}") from None
        return patterns


# ---------------------------------------------------------------- the prefilter

_UPPER_BOUND = re.compile(r"\{(\d+),\d+\}\+?")  # a possessive repeat is a plain one to Hyperscan


def _prefilter_pattern(rule: Rule) -> bytes:
    """The rule's pattern as Hyperscan reads it over UTF-8 bytes, matching at least what the rule matches."""
    pattern = (rule.prefilter or rule.pattern.pattern).replace(INTL, r"\x80-\xff")  # a non-ASCII character: 2-4 bytes
    return _UPPER_BOUND.sub(r"{\1,}", pattern).encode()  # ... so character counts may not cap byte counts


def _on_match(rule_id: int, start: int, end: int, flags: int, hits: object) -> None:
    cast("list[int]", hits).append(rule_id)


_FLAGS = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_SINGLEMATCH
_CACHE_FORMAT = 1  # raise it when what is compiled changes other than by its expressions
_CACHE_KEPT = 8  # databases kept (~1.5 MB each): a service's, the CLI's, and those of other rules or versions
_EVERY_RULE_CHARS = 16384  # while the prefilter compiles, a text up to this long goes through every rule


def _cache_name(expressions: list[bytes]) -> str:
    """The cached database's file name: a digest of the expressions, the flags, the Hyperscan version and the
    machine (Hyperscan refuses a database of another version or platform)."""
    made_by = f"{_CACHE_FORMAT} {_FLAGS} {getattr(hyperscan, '__version__', '')} {platform.machine()}".encode()
    digest = hashlib.sha256(b"\0".join([made_by, *expressions])).hexdigest()
    return f"prefilter-{digest[:32]}.hsdb"


def _read_back(name: str) -> Any:
    """The database cached as `name` in the user's cache directory (`analysis.intake.disk_cache`, which no
    other user can feed), or None: absent, or one that does not load."""
    kept = disk_cache.read(name)
    if kept is not None:
        with contextlib.suppress(hyperscan.error):
            return hyperscan.loadb(kept, hyperscan.HS_MODE_BLOCK)
    return None


def _compile(expressions: list[bytes]) -> Any:
    """The database (0.4-0.8 s of CPU for the built-in rules, which Hyperscan spends outside the GIL)."""
    database = hyperscan.Database()
    database.compile(expressions=expressions, ids=list(range(len(expressions))), flags=[_FLAGS] * len(expressions))
    return database


def _keep(name: str, database: Any) -> None:
    disk_cache.write(name, hyperscan.dumpb(database), kin=("prefilter-", ".hsdb"), keep=_CACHE_KEPT)


class _Prefilter:
    """One Hyperscan scan per text names the rules that may match it; with `pem`, a PEM block is `len(rules)`.

    A database not in the user's cache yet (a machine's first start, new rules) compiles in a thread of its
    own, and until it is there every rule may match a text up to `_EVERY_RULE_CHARS` long: that is the
    reference the prefilter must equal (`Redactor.every_rule`), only slower (such a text takes 50-300 ms
    through every rule against 0.1-13 ms prefiltered), so `logagent fingerprint` answers its first line as
    soon on a machine's first run as on any other. A longer text (or one its placeholders make longer) waits
    for the database; once it is there, each thread finishes at most the one text it is reading the slow way.
    The thread is no daemon: a run that ends sooner still leaves the database in the cache for the next
    start (not when it is killed, nor at a second Ctrl-C). A compile that fails is raised by every later
    redaction; the services wait for the database before they start (`Redactor.ready`), so there it stops
    the start, as the compile did when it ran in the constructor."""

    def __init__(self, rules: tuple[Rule, ...], pem: bool) -> None:
        expressions = [_prefilter_pattern(rule) for rule in rules] + ([KEY_HEADERS] if pem else [])
        self._every = range(len(expressions))
        self._local = threading.local()  # scratch space is per thread (the explainer runs in workers)
        self._database: Any = None
        self._error: Exception | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if not expressions:  # no kinds: no database (Hyperscan takes no empty set)
            self._ready.set()
            return
        self._job = expressions, _cache_name(expressions)
        self._database = _read_back(self._job[1])
        if self._database is not None:
            self._ready.set()
        else:
            self._thread = threading.Thread(target=self._compile, name="redaction-prefilter")
            self._thread.start()

    def _compile(self) -> None:
        """Compile, hand the database out, then keep it in the cache. Nothing here logs: a thread holding a
        logging handler's lock may be waiting for this one (a log record's text is redacted)."""
        expressions, name = self._job
        try:
            database = _compile(expressions)
        except Exception as error:
            self._error = error
            self._ready.set()
            return
        # Not in a `finally`: a Ctrl-C in a forked child's compile leaves it unset, to be compiled again.
        self._database = database
        self._ready.set()
        _keep(name, database)

    def wait(self) -> Any:
        """The database, once compiled (None with no kinds); raises when the compile failed. In a process
        forked while the thread ran, the thread is not there: the database is compiled here."""
        # An Event, not join: Python 3.11's join, interrupted by Ctrl-C, lets the exit skip the thread.
        while not self._ready.wait(0.05):
            if self._thread is not None and not self._thread.is_alive():
                with self._lock:
                    if not self._ready.is_set():
                        self._compile()
        if self._error is not None:
            raise RuntimeError("the redaction prefilter did not compile") from self._error
        return self._database

    def hits(self, text: str) -> list[int]:
        """Indices of the rules that may match `text`, in rule order."""
        database = self._database
        if database is None:
            if not self._every:
                return []
            thread = self._thread
            if len(text) <= _EVERY_RULE_CHARS and not self._ready.is_set() and thread is not None \
                    and thread.is_alive():
                return [*self._every]
            database = self.wait()
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(database)
        found: list[int] = []
        database.scan(text.encode("utf-8", "surrogatepass"), _on_match, context=found, scratch=scratch)
        if len(found) > 1:
            found.sort()
        return found


@lru_cache(maxsize=8)
def _prefilter(kinds: tuple[str, ...]) -> tuple[tuple[Rule, ...], _Prefilter]:
    """The rules of `kinds` and their compiled prefilter (compiled once per process and set of kinds)."""
    rules = tuple(rule for rule in RULES if rule.kind in kinds)
    return rules, _Prefilter(rules, PRIVATE_KEY in kinds)


# ---------------------------------------------------------------- text


class Redactor:
    """Replaces secrets and personal data in text with typed placeholders like `[REDACTED:email]`."""

    def __init__(self, config: RedactionConfig | None = None) -> None:
        self.config = config or RedactionConfig()
        self._rules, self._prefilter = _prefilter(tuple(sorted(set(self.config.kinds))))
        self._pem = len(self._rules) if PRIVATE_KEY in self.config.kinds else -1
        self._extra = tuple((name, regex.compile(pattern)) for name, pattern in self.config.extra_patterns.items())
        # Bounded in entries and bytes (analysis.cache), each charged for the text and its redacted copy.
        self._texts: BoundedCache[str, str] = BoundedCache("redact.texts", 16384, 8 << 20)
        self._lines: BoundedCache[str, str] = BoundedCache("redact.lines", 32768, 16 << 20)
        # id(frames) → (frames, redacted frames): decoding hands out one tuple per repeated trace.
        self._frames: BoundedCache[int, tuple[tuple[Frame, ...], tuple[Frame, ...]]] = BoundedCache(
            "redact.frames", _FRAMES_CACHE_SIZE, 16 << 20)

    def redact(self, text: str) -> str:
        """`text` with every enabled kind replaced by its placeholder."""
        if not self.config.enabled or not text:
            return text
        if len(text) > _SHORT_TEXT:
            return self._redact(text)
        cached = self._texts.get(text)
        if cached is None:
            cached = self._redact(text)
            self._texts.put(text, cached, _pair_bytes(text, cached))
        return cached

    def ready(self) -> None:
        """Return once the prefilter is compiled (at once when it was read back from the cache); raises when
        its compile failed. A service calls it before it starts, so a failure stops the start."""
        self._prefilter.wait()

    def key_block_lines(self) -> KeyBlockLines | None:
        """A follower of private key blocks across lines redacted one at a time (None when keys are kept)."""
        return KeyBlockLines(self.redact) if self.config.enabled and self._pem >= 0 else None

    def every_rule(self, text: str, decode: bool = True) -> str:
        """`text` through every enabled rule in turn, without the prefilter (the reference it must equal)."""
        text = without_terminal_codes(text)
        if self._pem >= 0:
            text = redact_private_keys(text)
        for rule in self._rules:
            text = rule.pattern.sub(rule.replacement, text)
        text = self._apply_extra(text)
        if decode and _may_be_encoded(text):
            text = _decoded(text, lambda run: self.every_rule(run, decode=False))
        return text

    def _redact(self, text: str, decode: bool = True) -> str:
        text = without_terminal_codes(text)
        hits = self._prefilter.hits(text)
        if hits:
            if len(text) > _LONG_TEXT and "\n" in text and not self._spans(hits):
                text = "\n".join([self._line(line) for line in text.split("\n")])
            else:
                text = self._apply(text, hits)
        if self._extra:
            text = self._apply_extra(text)
        if decode and _may_be_encoded(text):
            text = _decoded(text, lambda run: self._redact(run, decode=False))
        return text

    def _spans(self, hits: list[int]) -> bool:
        """Whether a hit may run across lines: a PEM block or a key with its value on the next line."""
        return hits[-1] == self._pem or any(self._rules[index].spans_lines for index in hits)

    def _line(self, line: str) -> str:
        cached = self._lines.get(line)
        if cached is None:
            hits = self._prefilter.hits(line)
            cached = self._apply(line, hits) if hits else line
            if len(line) <= _MAX_CACHED_LINE:
                self._lines.put(line, cached, _pair_bytes(line, cached))
        return cached

    def _apply(self, text: str, hits: list[int]) -> str:
        pending = hits
        if pending[-1] == self._pem:  # PEM blocks go first, as in `every_rule`
            text = redact_private_keys(text)
            pending = self._rule_hits(text, after=-1)
        while pending:
            index = pending[0]
            rule = self._rules[index]
            changed = rule.pattern.sub(rule.replacement, text)
            if changed == text:
                pending = pending[1:]
                continue
            # A placeholder can complete a later rule's context (`AKIA…:<secret>` becomes
            # `[REDACTED:aws_access_key]:<secret>`, which the AWS secret rule reads): scan again, so the
            # rules still to come are those running every rule in turn would find.
            text = changed
            pending = sorted({*pending[1:], *self._rule_hits(text, after=index)})
        return text

    def _rule_hits(self, text: str, after: int) -> list[int]:
        """The rules past index `after` that the prefilter says may match `text` (PEM blocks excluded)."""
        return [index for index in self._prefilter.hits(text) if after < index != self._pem]

    def _apply_extra(self, text: str) -> str:
        for name, pattern in self._extra:
            try:
                text = pattern.sub(placeholder(name), text, timeout=_EXTRA_PATTERN_TIMEOUT_SECONDS)
            except TimeoutError:
                return placeholder(name)  # a pattern that cannot finish may be hiding a secret: hide it all
        return text

    def frames(self, frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
        """`frames` with every text field redacted; the very same tuple when nothing changed."""
        if not frames or not self.config.enabled:
            return frames
        entry = self._frames.get(id(frames))
        if entry is not None and entry[0] is frames:
            return entry[1]
        redacted = frames
        joined = "\n".join([f"{f.function}\t{f.filename}\t{f.abs_path}\t{f.module}" for f in frames])
        if self._extra or self._prefilter.hits(joined) or _has_terminal_codes(joined) or _may_be_encoded(joined):
            redact = self.redact
            redacted = tuple([Frame(redact(f.function), redact(f.filename), redact(f.abs_path), redact(f.module),
                                    f.lineno, f.in_app) for f in frames])
            if redacted == frames:
                redacted = frames
        # The entry keeps the frames alive (and their redacted copies): their strings, about the size of
        # `joined`, and an object each.
        copies = 1 if redacted is frames else 2
        self._frames.put(id(frames), (frames, redacted),
                         copies * (sys.getsizeof(joined) + OBJECT_BYTES * (1 + len(frames))))
        return redacted


# A terminal's control sequences (ANSI colours, cursor moves, window titles, device strings), by ESC or as
# C1 controls, and a colour written out as text between a key and its value (`\u001b[31m` in JSON text,
# `\x1b[1m`, `\033[0m`, `\e[`, `^[[` as `cat -v` shows it; colour constants in source lines stay): a
# coloured log line hides a secret from the rules (`password=\x1b[31mhunter2`), and the sequences would act
# on the terminal of whoever reads the output. Any other C1 control (U+0080-U+009F) goes too.
_WRITTEN_COLOUR = r"(?:\\(?:u001[bB]|x1[bB]|033|e|u\{1[bB]\})|\^\[)\[[0-9;:]{0,64}m"
_TERMINAL_CODE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # colours, cursor moves
                            # colours written out as text, where they would split a key from its value: a run
                            # after the separator, or one before it (`_drop_code` keeps a run followed by
                            # neither: read whole once, so a long run costs one pass, not one per code)
                            rf"|(?:(?<=[=:])|(?<=[=:] ))(?:{_WRITTEN_COLOUR})++|(?P<run>(?:{_WRITTEN_COLOUR})++)"
                            r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c\r\n]{0,4096}(?:\x07|\x1b\\|\x9c)?"  # a title, a link
                            r"|(?:\x1bP|\x90)[^\x1b\x9c\r\n]{0,4096}(?:\x1b\\|\x9c)?"  # a device control string
                            r"|\x1b[ -/]{0,4}[0-~]?|[\x80-\x9f]")  # a character set, a reset, a lone ESC, C1
_C1 = re.compile(r"[\x80-\x9f]")
_SEPARATOR_NEXT = re.compile(r" ?[=:]")
_WRITTEN_OUT = ("\\u001b[", "\\u001B[", "\\x1b[", "\\x1B[", "\\033[", "\\e[", "\\u{1b}[", "\\u{1B}[", "^[[")


def _has_terminal_codes(text: str) -> bool:
    """Whether `text` may hold one, by plain searches first (this runs on every text redacted)."""
    if "\x1b" in text or (("\\" in text or "^[" in text) and any(form in text for form in _WRITTEN_OUT)):
        return True
    return not text.isascii() and _C1.search(text) is not None


def without_terminal_codes(text: str) -> str:
    """`text` without terminal control sequences; `text` itself when it has none."""
    return _TERMINAL_CODE.sub(_drop_code, text) if _has_terminal_codes(text) else text


def _drop_code(match: re.Match[str]) -> str:
    if match.group("run") is None or _SEPARATOR_NEXT.match(match.string, match.end()):
        return ""
    return match.group()  # a colour constant in a source line


# Encoded text (a query string, a form body, a URL passed as a parameter, JSON that escapes `=` and `'` as
# `\u003d` and `\u0027` as Gson does, HTML): `token%3Dghp_…`, `https%3A%2F%2Fuser%3Apass%40host`,
# `password \u0027hunter2\u0027`, `{&quot;password&quot;:…}`. After the rules have read a text as it came,
# they read it decoded, whole (so a key outside an encoded run names the value inside it; a text over 64 KiB
# line by line), to three layers (`%253D` is `%3D` encoded again), the first redacted before the others are
# decoded, so a value is taken as that layer wrote it (`p%2526ss` is one password, not `p` and `ss`). A
# text with percent escapes is read with its `+` as written (a Gson key's), then, when that took nothing,
# with each `+` it holds as the space a form writes (`%2B` stays a `+`). Escapes of control characters stay
# as written (`\u001b]0;…`: a title sequence decoded would hide the rest of its line); a line break is read
# (a key and its value on two lines), as JSON's `\n` already is. A reading that took
# text no placeholder already stood for goes out, decoded and redacted; when none took any, the text goes
# out as it came.
_ESCAPED = re.compile(r"%[0-9A-Fa-f]{2}|\\(?:u00|x)[0-9A-Fa-f]{2}|&(?:#[0-9]{2,3}|#[xX][0-9A-Fa-f]{2}|quot|amp|apos"
                      r"|lt|gt);")
_CHAR_ESCAPE = re.compile(r"\\(?:u00|x)([0-9A-Fa-f]{2})")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_ESCAPED_ESC = re.compile(r"(?:%1[bB]|&#(?:27|[xX]1[bB]);)(?=\[|%5[bB])")
_PERCENT_CONTROL = re.compile(r"%(?:0[0-8BbCcEeFf]|1[0-9A-Fa-f]|7[Ff])|%[Cc]2%[89][0-9A-Fa-f]")  # and UTF-8 C1
_HTML_ESCAPE = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9A-Fa-f]{1,6})|(quot|amp|apos|lt|gt));")
_HTML_NAMES = {"quot": '"', "amp": "&", "apos": "'", "lt": "<", "gt": ">"}
_MAX_DECODES = 3
_LAYERED_CHARS = 64 * 1024
_PLACEHOLDER = re.compile(r"\[REDACTED:\w+\]")


def _may_be_encoded(text: str) -> bool:
    return ("%" in text or "\\" in text or "&" in text) and _ESCAPED.search(text) is not None


def _layer(text: str) -> str:
    """`text` with one layer of escapes read (`+` kept). An escape of a control character stays as written:
    decoded, a terminal's title sequence would take the rest of its line out of the rules' sight. An escaped
    ESC before `[` is written as `\x1b`, a colour `without_terminal_codes` drops between a key and its value
    (`password%3D%1B%5B31mhunter2`)."""
    text = _ESCAPED_ESC.sub(r"\\x1b", text)
    text = unquote(_PERCENT_CONTROL.sub(lambda m: m.group().replace("%", "%25"), text))
    return _HTML_ESCAPE.sub(_html_char, _CHAR_ESCAPE.sub(lambda m: _char(int(m[1], 16), m.group()), text))


def _html_char(match: re.Match[str]) -> str:
    """The character an HTML reference names. Only terminated references are read: `html.unescape` also
    reads `&para` in `?a=1&param=2` as `¶`."""
    decimal, hexadecimal, name = match.groups()
    return _HTML_NAMES[name] if name else _char(int(decimal) if decimal else int(hexadecimal, 16), match.group())


def _char(code: int, written: str) -> str:
    """The character `code`, or `written` for a control character, a surrogate or no character at all."""
    if code in (9, 10, 13) or 0x20 <= code < 0x7F or (0x9F < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF):
        return chr(code)
    return written


def _decoded(text: str, redact: Callable[[str], str]) -> str:
    """`text` (redacted as it came) read decoded by `redact`: the first reading that took text, if one did."""
    if len(text) > _LAYERED_CHARS and "\n" in text:  # a long text (a trace), line by line: escapes sit in lines
        return "\n".join([_decoded(line, redact) if _may_be_encoded(line) else line for line in text.split("\n")])
    sources = (text, text.replace("+", " ")) if "+" in text and _PERCENT_ESCAPE.search(text) else (text,)
    for source in sources:  # `+` as written, then, when that took nothing, as the space a form writes
        plain, current = _reading(source, redact)
        if _PLACEHOLDER.sub("", current) != _PLACEHOLDER.sub("", without_terminal_codes(plain)):
            return current
    return text


def _reading(text: str, redact: Callable[[str], str]) -> tuple[str, str]:
    """(`text` decoded, `text` decoded and redacted): the first layer redacted before the others are decoded
    (a value as that layer wrote it), the others wholly decoded, then redacted once: two passes at most, so
    three times the raw cost at most; a line over 64 KiB (a hostile one) wholly decoded, redacted once."""
    plain = _layer(text)
    if plain == text:  # only control characters' escapes, which stay as written
        return text, text
    layered = len(text) <= _LAYERED_CHARS
    current = redact(plain) if layered else plain
    rest = plain
    for _ in range(_MAX_DECODES - 1):
        layer = _layer(rest)
        if layer == rest:
            break
        rest, current = layer, _layer(current)
    if rest is not plain or not layered:  # layers past the first, or a long line: redacted once, now
        current = redact(current)
    return rest, current


def _pair_bytes(text: str, redacted: str) -> int:
    return OBJECT_BYTES + sys.getsizeof(text) + (0 if redacted is text else sys.getsizeof(redacted))


# ---------------------------------------------------------------- events and values


def redact_event(event: ErrorEvent, redactor: Redactor) -> ErrorEvent:
    """A copy of `event` with every text in it redacted: ids, message, logger, tenant, exception types,
    values and frames, the raw trace, and the keys and values of `extra`."""
    if not redactor.config.enabled:
        return event
    exceptions = _redact_chain(event.exceptions, redactor)
    redact = redactor.redact
    return new_event(
        redact_id(event.server_id, redactor),
        event.timestamp,
        redact(event.message),
        redact(event.level),
        redact(event.logger),
        redact_commit(event.commit, redactor),
        redact_id(event.tenant, redactor),
        exceptions,
        redact(event.raw_trace),
        event.shape,
        redact_value(event.extra, redactor),
    )


def redact_key_fields(event: ErrorEvent, redactor: Redactor) -> ErrorEvent:
    """What a burst key and the fingerprint read of `event`, redacted as `redact_event` redacts it: the ids,
    the message, the chain, and the raw trace when the fingerprint reads it (a root cause without a
    message); the logger, `extra` and otherwise the raw trace are left empty. A new event's key is spared
    the redaction of its trace text, which its sample redacts again anyway (~20 µs of a 5 kB trace)."""
    if not redactor.config.enabled:
        return event
    exceptions = _redact_chain(event.exceptions, redactor)
    redact = redactor.redact
    reads_trace = bool(exceptions) and not exceptions[-1].value
    return new_event(
        redact_id(event.server_id, redactor),
        event.timestamp,
        redact(event.message),
        event.level,
        "",
        redact_commit(event.commit, redactor),
        redact_id(event.tenant, redactor),
        exceptions,
        redact(event.raw_trace) if reads_trace else "",
        event.shape,
        {},
    )


def _redact_chain(chain: tuple[ExceptionInfo, ...], redactor: Redactor) -> tuple[ExceptionInfo, ...]:
    exceptions = tuple([_redact_exception(exception, redactor) for exception in chain])
    if all(map(operator.is_, exceptions, chain)):
        return chain  # keep the shared chain of a repeated trace (cheap fingerprinting)
    return exceptions


def redact_id(value: str, redactor: Redactor) -> str:
    """An identifier (server, tenant, commit) redacted, and tagged with a digest of the original when that
    changed it: ids that redact alike (two tenants' emails, two servers' IPs) stay apart in bursts, in the
    memory's tenant scope and tables, and the same id gets the same tag on every replica and restart.
    The tag is 12 hex digits of an HMAC-SHA256 under `redaction.id_key`: without the key, nobody who
    reads it can test guesses against it (there are only 2^32 IPv4 addresses). Unset, it is a plain
    SHA-256, and the first such tag logs a warning."""
    redacted = redactor.redact(value)
    if redacted == value:
        return value
    raw = value.encode("utf-8", "surrogatepass")
    key = redactor.config.id_key
    if key is None:
        _warn_unkeyed()
        digest = hashlib.sha256(raw).hexdigest()
    else:
        digest = hmac.new(key.get_secret_value().encode(), raw, hashlib.sha256).hexdigest()
    return f"{redacted}~{digest[:12]}"


# What the service and git mint: a UUID (analysis and memory ids) or a hex digest of their lengths (a
# fingerprint, a commit or blob of SHA-1 or SHA-256), which no card number or other redacted kind has.
_MINTED = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{32}(?:[0-9a-f]{8}|[0-9a-f]{32})?")


def redact_commit(value: str | None, redactor: Redactor) -> str | None:
    """A log's commit: kept as it is when it has the shape git mints (`_MINTED`: 40 or 64 hex digits, or
    32, or a UUID), whatever a company pattern matches inside it (`[0-9a-f]{12}` for MAC addresses took a
    piece of every sha and left each deployment unresolvable); anything else redacted as an id (`redact_id`)."""
    if not value or _MINTED.fullmatch(value):
        return value
    return redact_id(value, redactor)


@cache  # once per process
def _warn_unkeyed() -> None:
    _log.warning(
        "an id was redacted and tagged with an unkeyed digest, which confirms a guessed id to anyone who reads "
        "it; set LOGAGENT_REDACTION__ID_KEY (the same on every replica)")


def _redact_exception(exception: ExceptionInfo, redactor: Redactor) -> ExceptionInfo:
    type_, value = redactor.redact(exception.type), redactor.redact(exception.value)
    frames = redactor.frames(exception.frames)
    if type_ == exception.type and value == exception.value and frames is exception.frames:
        return exception
    return new_exception(type_, value, frames)


# A secret stored as a name and a value (Kubernetes and ECS environments, CloudFormation parameters).
_NAMED_VALUES = (("name", "value"), ("key", "value"), ("Name", "Value"), ("Key", "Value"), ("OptionName", "Value"),
                 ("ParameterKey", "ParameterValue"))


def redact_value(value: Any, redactor: Redactor, depth: int = 0, numbers: bool = True) -> Any:
    """JSON-like `value` with every string redacted, dict keys included; the value under a secret-named
    key is replaced whole (under a name like `key` or `session`, when it looks generated); with `numbers`,
    a number that is a card number too."""
    if type(value) is str:
        return redactor.redact(value)
    if not redactor.config.enabled:
        return value
    if depth >= _MAX_VALUE_DEPTH:  # too deep to walk: its JSON text, redacted as text, stands for it
        try:
            return redactor.redact(json.dumps(value, default=str))
        except (RecursionError, ValueError):
            return placeholder("secret")
    if isinstance(value, Mapping):
        mapping = {_redact_key(key, redactor): _redact_item(key, item, redactor, depth, numbers)
                   for key, item in value.items()}
        for name_key, value_key in _NAMED_VALUES:  # `{"name": "DB_PASSWORD", "value": …}`: the value goes
            name = value.get(name_key)
            if type(name) is str and value_key in value and secret_key(name) == "strong":
                mapping[_redact_key(value_key, redactor)] = placeholder("secret")
        location = value.get("loc")  # pydantic's `errors()`, FastAPI's 422 body: the input a secret field refused
        if "input" in value and isinstance(location, list | tuple) and any(
                type(part) is str and secret_key(part) == "strong" for part in location):
            mapping[_redact_key("input", redactor)] = placeholder("secret")
        return mapping
    if isinstance(value, list | tuple):
        items = [redact_value(item, redactor, depth + 1, numbers) for item in value]
        # A name and its value side by side (Node's `rawHeaders`, an argument list): the value goes whole, when
        # the name is written as a header's or a flag's, or the value looks generated (`["token", "expired"]`).
        for index in range(1, len(value)):
            name, item = value[index - 1], value[index]
            if type(name) is str and len(name) <= 64 and type(item) is str and secret_key(name) == "strong" and (
                    header_or_flag(name) or looks_generated(item)):
                items[index] = placeholder("secret")
        return items
    if not numbers:
        return value
    # A card number sent as a number, also as a float (`4111111111111111.0`).
    number = int(value) if type(value) is float and value.is_integer() and 1e12 <= abs(value) < 1e19 else value
    if type(number) is int and 13 <= len(str(abs(number))) <= 19:
        text = str(number)
        return redacted if (redacted := redactor.redact(text)) != text else value
    return value


def redact_analysis(analysis: Analysis, redactor: Redactor) -> Analysis:
    """A copy of `analysis` with every string in it redacted before it is published or stored: quoted
    repository code, the model's answer, notes, failure reasons. Its numbers are the schema's (line numbers,
    counts, scores): a line `4111111111111111` from a log's frame stays a number. The ids the service or git
    minted stay too, whatever a company's own patterns match: memory, feedback, replays and citation checks
    look them up as they are. Only an id of a minted shape (a UUID, or a digest's length of hex) is kept:
    anything else there is text, redacted as any other."""
    if not redactor.config.enabled:
        return analysis
    original = analysis.model_dump(mode="json")
    doc = redact_value(original, redactor, numbers=False)
    _keep_minted(doc, original, "analysis_id", "recurrence_of", "commit")
    _keep_minted(doc["cluster"], original["cluster"], "fingerprint")
    for field, names in (("past_cases", ("memory_id",)), ("citations", ("commit", "blob_sha")),
                         ("suspect_commits", ("sha",))):
        for item, before in zip(doc[field], original[field], strict=True):
            _keep_minted(item, before, *names)
    return Analysis.model_validate(doc)


def _keep_minted(redacted: dict[str, Any], original: dict[str, Any], *names: str) -> None:
    redacted.update({name: original[name] for name in names
                     if isinstance(original[name], str) and _MINTED.fullmatch(original[name])})


def _redact_key(key: Any, redactor: Redactor) -> Any:
    return redactor.redact(key) if type(key) is str else key


@memoize("redaction.key_strength", 4096, 4 << 20)
def _key_strength(key: str) -> str | None:
    return secret_key(key)


def _redact_item(key: Any, item: Any, redactor: Redactor, depth: int, numbers: bool) -> Any:
    if type(key) is str and item is not None and item != "" and type(item) is not bool:
        # Field names repeat across a stream; long ones (rare, hostile) are not cached.
        strength = _key_strength(key) if len(key) <= _SHORT_TEXT else secret_key(key)
        # Under a secret name the whole value goes, whatever its type (`{"password": {"v": …}}`, `"pin": 1234.0`).
        if strength == "strong" and (item or not isinstance(item, Mapping | list | tuple)):
            return placeholder("secret")
        if strength == "weak" and type(item) in (str, int) and looks_generated(str(item)):
            return placeholder("secret")
    return redact_value(item, redactor, depth + 1, numbers)
