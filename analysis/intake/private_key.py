"""Private key blocks: PEM, SSH2 (RFC 4716, `---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----`) and PuTTY key
files (from `PuTTY-User-Key-File-` to `Private-MAC:`), found with plain searches (a regex over a huge
block would backtrack).

`redact_private_keys` hides every block in one text. `KeyBlockLines` follows a block across a stream
redacted a line at a time (`logagent redact`), where the header, body and footer are separate texts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

from analysis.intake.redact_rules import PRIVATE_KEY, placeholder

__all__ = ["KEY_HEADERS", "KeyBlockLines", "redact_private_keys"]

KEY_HEADERS = b"PRIVATE KEY|PuTTY-User-Key-File-"
"""What every private key block the redactor hides holds (a Hyperscan pattern)."""

_BEGIN = re.compile(r"-----BEGIN |---- BEGIN |PuTTY-User-Key-File-")
_END = re.compile(r"-----END |---- END ")
# What follows `-----BEGIN ` or `-----END `: the label (`RSA PRIVATE KEY`), up to its dashes, a line break
# (real or JSON-escaped) or a bound; then the closing dashes, if any.
_LABEL = re.compile(r"[^-\r\n\\]{0,80}")
_FOOTER_REST = re.compile(r"[^-\r\n\\]{0,80}-{0,5}")
# After a private label: its dashes, or (a header cut before them) a line break and the body, or the end.
_HEADER_END = re.compile(r"-|(?:\r?\n|\\r\\n|\\n)[ \t]*(?:[A-Za-z0-9+/]|\Z)|\Z")
_PUTTY_END = re.compile(r"Private-(?:MAC|Hash):[ \t]{0,8}[0-9A-Fa-f]{0,128}")
# A line inside a block: base64 (blank after RFC 1421 headers, indented in YAML) or a `Name: value` header
# (`Proc-Type:`, `DEK-Info:`, `Comment:`, PuTTY's `Encryption:`, `Public-Lines:`, `Argon2-Salt:` ...).
_BODY_LINE = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]*|[A-Za-z][A-Za-z0-9-]{0,63}:(?:[ \t].*)?)[ \t]*")

_PEM, _PUTTY = "pem", "putty"


def redact_private_keys(text: str) -> str:
    """`text` with every private key block replaced by the placeholder; one with no end hides the rest.
    The block may sit on one line with escaped line breaks (`\\n` in JSON)."""
    return _private_keys(text)[0]


def _private_keys(text: str) -> tuple[str, str | None]:
    """`text` with every block hidden, and the kind of the block it leaves open at its end, if any."""
    parts: list[str] = []
    position = 0
    while (begin := _BEGIN.search(text, position)) is not None:
        if begin.group().startswith("PuTTY"):
            end = _PUTTY_END.search(text, begin.end())
            parts += [text[position : begin.start()], placeholder(PRIVATE_KEY)]
            if end is None:
                return "".join(parts), _PUTTY
            position = end.end()
            continue
        label = cast("re.Match[str]", _LABEL.match(text, begin.end()))
        if not (label.group().rstrip().endswith(("PRIVATE KEY", "PRIVATE KEY BLOCK"))
                and _HEADER_END.match(text, label.end())):
            # Not a private key's header (a certificate's, or one cut short): the next marker may start
            # anywhere after this one, even inside what looked like this header.
            parts.append(text[position : begin.start() + 1])
            position = begin.start() + 1
            continue
        parts += [text[position : begin.start()], placeholder(PRIVATE_KEY)]
        footer = _END.search(text, label.end())
        if footer is None:
            return "".join(parts), _PEM
        position = _past_footer(text, footer.end())
    parts.append(text[position:])
    return "".join(parts), None


def _past_footer(text: str, position: int) -> int:
    """Where the footer whose `-----END ` ends at `position` ends: after its label and dashes, if any (never
    past a line break, where the next block may begin)."""
    return cast("re.Match[str]", _FOOTER_REST.match(text, position)).end()


class KeyBlockLines:
    """Follows a private key block whose lines arrive one at a time: after a line that opens a block and
    does not close it, each line of its body and its footer stands as the placeholder (what follows the
    footer on its line is redacted as usual). A line that cannot be part of a block (not base64, not a
    `Name: value` header) ends it: the key was cut short, and that line is the stream's again."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        self._redact = redact
        self._open: str | None = None
        self._prefix = ""  # the opening line's text before its marker, digits masked (a log line's prefix)

    def redact(self, line: str) -> str | None:
        """What stands for `line` when it belongs to a block an earlier line opened, else None (and the
        caller redacts the line as usual, which hides the part of a block it opens).

        A block logged a line per record carries each record's prefix (`2024-01-15T10:00:01Z ERROR app: `):
        a line whose start has the opening line's prefix, digits aside, is read from there on."""
        kind, self._open = self._open, None
        if kind == _PEM and (footer := _END.search(line)) is not None:
            return self._after(line, _past_footer(line, footer.end()))
        if kind == _PUTTY and (end := _PUTTY_END.search(line)) is not None:
            return self._after(line, end.end())
        cut = len(self._prefix) if kind is not None and _digits_masked(line[: len(self._prefix)]) == self._prefix else 0
        if kind is not None and _BODY_LINE.fullmatch(line, cut):
            self._open = kind
            body = line[cut:]
            return line[:cut] + body[: len(body) - len(body.lstrip())] + placeholder(PRIVATE_KEY)  # as indented
        if "PRIVATE KEY" in line or "PuTTY-User-Key-File-" in line:
            self._open = _private_keys(line)[1]
            begin = _BEGIN.search(line)
            self._prefix = _digits_masked(line[: begin.start()]) if self._open and begin else ""
        return None

    def _after(self, line: str, end: int) -> str:
        """The footer's line, to `end`, is the key's; what follows is the stream's."""
        rest = line[end:]
        if "PRIVATE KEY" in rest or "PuTTY-User-Key-File-" in rest:
            self._open = _private_keys(rest)[1]
        return line[: len(line) - len(line.lstrip())] + placeholder(PRIVATE_KEY) + self._redact(rest)


def _digits_masked(text: str) -> str:
    return text.translate(_DIGITS)


_DIGITS = str.maketrans("0123456789", "0000000000")
