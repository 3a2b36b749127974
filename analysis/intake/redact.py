"""Secrets and personal data masked out of error events before they go anywhere (LLM, memory, output).

Each kind is one regex written to run in linear time (bounded repeats, no nested quantifiers over the same
characters) plus a cheap literal pre-check, so hostile messages cannot stall the consumer. Placeholders
name the kind: `[REDACTED:aws_access_key]`. User patterns run on the `regex` engine with a timeout.

Traces repeat line for line across a burst while their headers carry fresh ids, so a text is redacted
line by line from a cache of redacted lines whenever no rule that can match across a line break could
start on any of its lines; the cache remembers that too, so a repeated line is never scanned again.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import regex
from pydantic import BaseModel, ConfigDict, Field

from analysis.event import ErrorEvent, ExceptionInfo, new_event, new_exception

_EXTRA_PATTERN_TIMEOUT_SECONDS = 0.05
_MAX_VALUE_DEPTH = 64
_LINE_CACHE_SIZE = 16384
_MAX_CACHED_LINE = 1024
# What the line cache holds for a line on which a rule that can span lines (or a PEM key) may start:
# no redacted line can equal it, since lines are split at "\n".
_SPANNING = "\n"
_SECRET_KEY = re.compile(r"(?i)passw|secret|token|api[_-]?key|credential|authorization|private[_-]?key")


def _placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def _luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = "".join(char for char in match.group() if char.isdigit())
    return _placeholder("credit_card") if 13 <= len(digits) <= 19 and _luhn_valid(digits) else match.group()


def _ipv6(match: re.Match[str]) -> str:
    # `dead::beef`-like words and `A::B` scopes are not addresses worth hiding; real ones carry digits.
    text = match.group()
    return _placeholder("ipv6") if any(char.isdigit() for char in text) else text


@dataclasses.dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]
    hint: tuple[str, ...] = ()  # lower-case literals, one of which must appear for the rule to run
    # Set for the rules whose `\s` can match a line break: a test of the lower-cased text that is true
    # wherever the rule can match. When it is false, the text may be redacted line by line.
    spans_lines: Callable[[str], object] | None = None

    def may_match(self, lowered: str) -> bool:
        """False when the literal pre-check rules a match out."""
        for literal in self.hint:
            if literal in lowered:
                return True
        return not self.hint


def _rule(
    kind: str,
    pattern: str,
    hint: tuple[str, ...] = (),
    replacement: str | Callable[[re.Match[str]], str] | None = None,
    spans_lines: Callable[[str], object] | None = None,
) -> _Rule:
    return _Rule(kind, re.compile(pattern), _placeholder(kind) if replacement is None else replacement, hint,
                 spans_lines)


def _followed(keywords: tuple[str, ...], follow: str) -> Callable[[str], bool]:
    """A test for one of `keywords` followed by `follow` (a regex matched where the keyword ends). The
    keywords are found with `str.find`: a regex that starts with an alternation tries every position
    of a 4 kB trace, which cost more than all the other rules together."""
    tail = re.compile(follow)

    def found(lowered: str) -> bool:
        for keyword in keywords:
            start = lowered.find(keyword)
            while start >= 0:
                end = start + len(keyword)
                if tail.match(lowered, end):
                    return True
                start = lowered.find(keyword, end)
        return False

    return found


_HEX = "0-9a-fA-F"
# Order matters: specific token shapes first, then the generic `key=value` rule, then PII.
_RULES = (
    _rule("jwt", r"\beyJ[\w-]{5,4096}\.eyJ[\w-]{5,8192}\.[\w-]{5,4096}", ("eyj",)),
    _rule(
        "url_password",
        r"\b([a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]{1,256}):[^\s@/]{1,256}@",
        ("://",),
        r"\1:[REDACTED:url_password]@",
    ),
    _rule(
        "bearer",
        r"\b([Bb]earer|(?i:authorization:\s{0,4}basic))\s+[\w~+/.=-]{8,4096}",
        ("bearer", "basic"),
        r"\1 [REDACTED:bearer]",
        re.compile(r"bearer|authorization:").search,
    ),
    _rule("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b"),
    _rule(
        "aws_secret_key",
        r"(?i)(aws.{0,24}?(?:secret|key).{0,24}?[=:]\s{0,4}[\"']?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
        ("aws",),
        r"\1[REDACTED:aws_secret_key]",
        re.compile(r"aws.{0,24}?(?:secret|key).{0,24}?[=:]").search,
    ),
    _rule("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_\w{22,255})\b", ("gh", "github_pat_")),
    _rule("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,250}", ("xox",)),
    _rule(
        "secret",
        r"(?i)\b([\w.-]{0,40}?(?:api[_-]?key|apikey|token|secret|password|passwd|pwd|credentials?)[\"']?"
        r"\s{0,5}[:=]\s{0,5}[\"']?)(?!\[REDACTED)[^\s\"',;&<>]{1,512}",
        ("key", "token", "secret", "passw", "pwd", "credential"),
        r"\1[REDACTED:secret]",
        # Every keyword of the pattern ends in one of these; `s?` covers `credentials` (and lets `keys:` in).
        _followed(("key", "token", "secret", "password", "passwd", "pwd", "credential"), r"s?[\"']?\s{0,5}[:=]"),
    ),
    _rule("email", r"\b[\w.%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}\b", ("@",)),
    # Card numbers start with 2-6; epoch milliseconds (1…) and zero-padded ids stay untouched.
    _rule("credit_card", r"(?<![\w.-])[2-6](?:[ -]?\d){12,18}(?![\w.-])", (), _card),
    _rule(
        "ipv4",
        r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w]|\.\d)",
        (".",),
    ),
    _rule(
        "ipv6",
        rf"(?<![\w:])(?:(?:[{_HEX}]{{1,4}}:){{7}}[{_HEX}]{{1,4}}|(?:[{_HEX}]{{1,4}}:){{1,7}}(?::[{_HEX}]{{1,4}}){{1,7}}"
        rf"|::(?:[{_HEX}]{{1,4}}:){{0,6}}[{_HEX}]{{1,4}})(?![\w:])",
        (":",),
        _ipv6,
    ),
)
KINDS = ("private_key", *(rule.kind for rule in _RULES))
"""Every built-in kind of secret or personal data, in the order they are applied."""


class RedactionConfig(BaseModel):
    """Which kinds to redact, and extra patterns (`name → regex`) for secrets only this company has."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    kinds: tuple[str, ...] = Field(default=KINDS, description="Built-in kinds to redact.")
    extra_patterns: dict[str, str] = Field(default_factory=dict, description="Name → regex, each redacted.")


class Redactor:
    """Replaces secrets and personal data in text with typed placeholders like `[REDACTED:email]`."""

    def __init__(self, config: RedactionConfig | None = None) -> None:
        self.config = config or RedactionConfig()
        unknown = set(self.config.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown redaction kinds: {sorted(unknown)}")
        self._rules = tuple(rule for rule in _RULES if rule.kind in self.config.kinds)
        self._spanning = tuple((rule, rule.spans_lines) for rule in self._rules if rule.spans_lines is not None)
        self._line_rules = tuple(rule for rule in self._rules if rule.spans_lines is None)
        self._private_keys = "private_key" in self.config.kinds
        self._extra = tuple((name, regex.compile(pattern)) for name, pattern in self.config.extra_patterns.items())
        self._cached: Callable[[str], str] = lru_cache(maxsize=4096)(self._redact)
        # Line → redacted line, or `_SPANNING`; emptied when full (a burst refills it at once).
        self._lines: dict[str, str] = {}

    def redact(self, text: str) -> str:
        """`text` with every enabled kind replaced by its placeholder."""
        if not self.config.enabled or not text:
            return text
        return self._cached(text)

    def _redact(self, text: str) -> str:
        if not self._extra:
            # The usual path: every line from the cache, and none on which a match of a rule that can span
            # lines (or a PEM key) could start. Then every rule left matches within one line, and its
            # lookarounds see a line break as they see the ends of a string: redacting each line alone
            # gives the same text. A message is often also the first line of the trace and the value of
            # its exception: one cache serves all three.
            lines = self._lines
            redacted = [lines.get(line) or self._new_line(line) for line in text.split("\n")]
            if _SPANNING not in redacted:
                return "\n".join(redacted)
        if self._private_keys and "PRIVATE KEY-----" in text:
            text = _redact_private_keys(text)
        lowered = text.lower()
        if not self._extra and not any(rule.may_match(lowered) and spans(lowered)
                                       for rule, spans in self._spanning):
            # A line looked as if such a match could start on it, but none does: still line by line.
            return "\n".join([self._cached_line(line) for line in text.split("\n")])
        for rule in self._rules:
            if rule.may_match(lowered):
                text = rule.pattern.sub(rule.replacement, text)
        for name, pattern in self._extra:
            try:
                text = pattern.sub(_placeholder(name), text, timeout=_EXTRA_PATTERN_TIMEOUT_SECONDS)
            except TimeoutError:
                return _placeholder(name)  # a pattern that cannot finish may be hiding a secret: hide it all
        return text

    def _new_line(self, line: str) -> str:
        """The line redacted, or `_SPANNING` when a match of a rule that can span lines may start on it;
        cached either way."""
        lowered = line.lower()
        redacted = _SPANNING if self._may_span(line, lowered) else self._redact_line(line, lowered)
        if len(line) <= _MAX_CACHED_LINE:
            if len(self._lines) >= _LINE_CACHE_SIZE:
                self._lines.clear()
            self._lines[line] = redacted
        return redacted

    def _cached_line(self, line: str) -> str:
        redacted = self._lines.get(line)
        return redacted if redacted is not None and redacted != _SPANNING else self._redact_line(line, line.lower())

    def _redact_line(self, line: str, lowered: str) -> str:
        for rule in self._line_rules:
            if rule.may_match(lowered):
                line = rule.pattern.sub(rule.replacement, line)
        return line

    def _may_span(self, line: str, lowered: str) -> bool:
        """Whether a PEM key, or a match of a rule that can span lines, may start on `line`.

        Each spanning rule's test finds a keyword and what follows it on the same line, except the
        `secret` rule's: after its keyword come up to five spaces, which may be line breaks, then `:` or
        `=`. Testing the line with a line break and `=` appended is true wherever a match could start on
        this line, also one that would go on into the next; the whole text is then tested as it is.
        """
        if self._private_keys and "PRIVATE KEY-----" in line:
            return True
        probe = lowered + "\n="
        return any(spans(probe) for _, spans in self._spanning)


def _redact_private_keys(text: str) -> str:
    """PEM private key blocks, found with plain searches (a regex over a huge block would backtrack)."""
    parts: list[str] = []
    position = 0
    while True:
        begin = text.find("-----BEGIN ", position)
        if begin < 0:
            break
        header_end = text.find("-----", begin + 11)
        if header_end < 0:
            break
        if not text[begin:header_end].endswith("PRIVATE KEY"):
            parts.append(text[position : header_end + 5])
            position = header_end + 5
            continue
        end = text.find("-----END ", header_end + 5)
        footer_end = text.find("-----", end + 9) if end >= 0 else -1
        parts.append(text[position:begin])
        parts.append(_placeholder("private_key"))
        position = footer_end + 5 if footer_end >= 0 else len(text)  # unterminated: hide the rest
    parts.append(text[position:])
    return "".join(parts)


def redact_event(event: ErrorEvent, redactor: Redactor) -> ErrorEvent:
    """A copy of `event` with message, exception values, raw trace and string extras redacted."""
    if not redactor.config.enabled:
        return event
    exceptions = tuple([_redact_exception(exception, redactor) for exception in event.exceptions])
    if all(map(operator.is_, exceptions, event.exceptions)):
        exceptions = event.exceptions  # keep the shared chain of a repeated trace (cheap fingerprinting)
    return new_event(
        event.server_id,
        event.timestamp,
        redactor.redact(event.message),
        event.level,
        event.logger,
        event.commit,
        event.tenant,
        exceptions,
        redactor.redact(event.raw_trace),
        event.shape,
        _redact_value(event.extra, redactor, 0),
    )


def _redact_exception(exception: ExceptionInfo, redactor: Redactor) -> ExceptionInfo:
    value = redactor.redact(exception.value)
    if value == exception.value:
        return exception
    return new_exception(exception.type, value, exception.frames)


def _redact_value(value: Any, redactor: Redactor, depth: int) -> Any:
    if type(value) is str:
        return redactor.redact(value)
    if depth >= _MAX_VALUE_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {
            key: _placeholder("secret")
            if isinstance(key, str) and _SECRET_KEY.search(key) and isinstance(item, str | int) and item != ""
            else _redact_value(item, redactor, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_value(item, redactor, depth + 1) for item in value]
    return value
