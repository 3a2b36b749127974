"""Message templates: a log message with its variable parts masked, so one failure's messages agree.

`mask_message` is a pure function of the text: no statistics learned from earlier messages, so every
replica and every restart masks alike. Two passes:

1. Tokens (whitespace-separated, enclosing punctuation set aside). A token is masked when it carries a
   digit (numbers of any sign, hex, ids, IPs and IP lists, host:port, versions, times), is a path, a URL,
   an e-mail address, a quoted single value or an id of eight or more hex letters; in `key=value` only
   the value is masked (also a quoted value with spaces), in `key:value` the key is kept. Words stay
   words: HTTP methods, verbs and status words keep apart the messages they tell apart. These rules
   look at character classes only (digit or not, hex letter or not), so the template is computed once
   per "shape" of message: ids that differ in their digits and hex letters share one cached result.
   Of a run of digits and hex letters holding both (`8fbcc10aa1e9`, a fresh id in every event, in which
   digits and letters fall anywhere), the rules read only its length and whether it starts with a
   digit: every such run of one length and first class has one shape.
2. Phrases, on the masked text (cached by it): dates written with day and month names, host names,
   sizes and durations with their unit, user names, redaction placeholders, a value restated in
   parentheses, and runs or lists of masked values, each become one `<*>`.
"""

from __future__ import annotations

import re
import sys

from analysis.cache import OBJECT_BYTES, BoundedCache

MASK = "<*>"
_INPUT_LIMIT = 512
_CACHE_SIZE = 8192
_TEMPLATE = str.maketrans("0123456789abcdefABCDEF", "0000000000aaaaaaAAAAAA")
_TEMPLATE_BYTES = bytes.maketrans(b"0123456789abcdefABCDEF", b"0000000000aaaaaaAAAAAA")
_OPEN = "([{<\"'`"
_CLOSE = ")]}>\"'`,.;:!?"
_PAIRS = {")": "(", "]": "[", "}": "{", ">": "<"}
_QUOTES = "\"'`"
_HEX_LETTERS = frozenset("abcdefABCDEF")

# A run of digits and hex letters (as the template writes them: 0, a, A) holding both, from its start.
_MIXED_RUN = re.compile(r"(?<![0aA])(?:0+[aA]|[aA]+0)[0aA]*")
_TOKEN = re.compile(r"\S+")
_DIGIT = re.compile(r"\d")
# HTTP methods as the template spells them (hex letters read as `a`/`A`): a path after one is a route.
_METHODS = frozenset(method.translate(_TEMPLATE) for method in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD",
                                                               "OPTIONS", "CONNECT", "TRACE"))
# `key="a quoted value"` may hold spaces: the whole quoted value is the value.
_QUOTED_VALUE = re.compile(r"(?<=[\w\]]=)(?:\"[^\"\n]{0,256}\"|'[^'\n]{0,256}')")
_KEY = re.compile(r"[A-Za-z_][\w.\-\[\]]*")
_VALUE_STOP = frozenset(",;&)]}>")

_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|January|February|March|April|June|July|August|" \
          "September|October|November|December"  # fmt: skip
_DAYS = "Mon|Tue|Wed|Thu|Fri|Sat|Sun|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_ZONES = "UTC|GMT|Z|[ECMP][SD]T|CET|CEST|BST|IST|JST"
# Generic and common country top-level domains; not those that are also code file extensions (.py,
# .sh, .md, .pl, .rs, .in, ...) or common field names (.id, .is, .to).
TLDS = "com|net|org|edu|gov|mil|info|biz|io|co|dev|ai|cloud|online|site|xyz|top|me|tv|us|uk|de|fr|jp|cn|ru|" \
        "br|au|ca|nl|eu|kr|tw|hk|sg|ch|se|no|dk|fi|it|es|pt|be|at|cz|hu|ro|gr|tr|il|mx|ar|cl|za|nz|ie|om|ua|" \
        "vn|th|my|ph|ir|sa|ae|eg|local|internal|lan|arpa"  # fmt: skip
_UNITS = r"(?:[KMGTP]i?B|[kKMGT]?bytes?|B|bits?|ms|us|µs|ns|s|secs?\.?|seconds?|mins?\.?|minutes?|h|hrs?\.?|" \
         r"hours?|days?|%)"  # fmt: skip
_USER_FOLLOWERS = r"from|by|on|at|via|to|for|in|with"
_DATE_WORDS = frozenset(f"{name}{end}" for name in f"{_MONTHS}|{_DAYS}|{_ZONES}".split("|") for end in ("", ",", "."))
# Pass 2, in order: (rule, what the masked text must hold for the rule to match at all: a literal it
# contains, lower-cased for the one case-blind rule, or a set of words one of which it contains).
_PHRASES: tuple[tuple[re.Pattern[str], str | frozenset[str]], ...] = (
    (re.compile(r"\[REDACTED:\w{1,40}\]"), "[REDACTED:"),
    (re.compile(rf"\b(?:(?:{_DAYS}),? )?(?:{_MONTHS})\.? <\*>(?: (?:{_ZONES}))?|\b(?:{_DAYS}),? <\*>"
                rf"|<\*> (?:{_MONTHS}|{_ZONES})\b"), _DATE_WORDS),
    (re.compile(rf"(?<![\w.\-<>*])(?:[a-z0-9](?:[a-z0-9-]{{0,62}})\.)+(?:{TLDS})(?![\w.\-])"), "."),
    (re.compile(rf"(?i:(?<=\buser )(?!<\*>)[a-z_][\w.@-]{{0,63}}"
                rf"(?=$|\s*[\[(,;:]|\s+(?:{_USER_FOLLOWERS})\b))"), "user "),
    (re.compile(rf"<\*> ?{_UNITS}(?![\w.])"), MASK),
    (re.compile(r"<\*> ?\((?:<\*>)?\)"), MASK),
    (re.compile(r"<\*>(?:[ ,;|/]+<\*>)+"), MASK),
)
_SIGN = re.compile(r"[<>~≈](?=<\*>)")  # `<1 sec`: the sign belongs to the masked number after it

# Keys are cut at _INPUT_LIMIT characters; the budgets bound the spans and the phrased texts too.
_SPANS: BoundedCache[bytes, tuple[tuple[int, int], ...]] = BoundedCache("template.spans", _CACHE_SIZE, 8 << 20)
_PHRASED: BoundedCache[str, str] = BoundedCache("template.phrased", _CACHE_SIZE, 8 << 20)


def mask_message(text: str) -> str:
    """The template of `text`: its variable parts masked as `<*>`, whitespace collapsed."""
    text = text[:_INPUT_LIMIT]
    key = text.encode("utf-8", "surrogatepass").translate(_TEMPLATE_BYTES)
    spans = _SPANS.get(key)
    if spans is None:  # a new text: its shape may be known (a fresh id of digits and hex letters)
        # Latin-1 maps bytes to characters one to one: the key's bytes, read as text by a text pattern.
        shape = _MIXED_RUN.sub(_mixed_run_shape, key.decode("latin-1")).encode("latin-1")
        spans = _SPANS.get(shape) if shape != key else None
        if spans is None:
            spans = token_spans(text.translate(_TEMPLATE))
            for known in {shape, key}:  # the text's own too: a text that comes again as it is hits at once
                _SPANS.put(known, spans, sys.getsizeof(known) + OBJECT_BYTES * (1 + len(spans)))
    if spans:
        parts = []
        position = 0
        for start, end in spans:
            parts.append(text[position:start])
            position = end
        parts.append(text[position:])
        text = MASK.join(parts)
    masked = " ".join(text.split())
    phrased = _PHRASED.get(masked)
    if phrased is None:
        phrased = _phrases(masked)
        _PHRASED.put(masked, phrased, sys.getsizeof(masked) + sys.getsizeof(phrased) + OBJECT_BYTES)
    return phrased


def _mixed_run_shape(run: re.Match[str]) -> str:
    """One run of digits and hex letters holding both, as its shape: its first character, then a digit and
    a letter placed alike for every run of its length and first class."""
    found = run.group()
    return found[0] + ("a" + "0" * (len(found) - 2) if found[0] == "0" else "0" * (len(found) - 1))


def mask_uncached(text: str) -> str:
    """`mask_message` computed on `text` itself, without either cache: the reference the caches must match."""
    text = text[:_INPUT_LIMIT]
    parts = []
    position = 0
    for start, end in token_spans(text):
        parts.append(text[position:start])
        position = end
    parts.append(text[position:])
    return _phrases(" ".join(MASK.join(parts).split()))


def token_spans(template: str) -> tuple[tuple[int, int], ...]:
    """The spans pass 1 masks; the same for `text` and for `text.translate(_TEMPLATE)`."""
    if "=" in template:  # a quoted value with spaces becomes one digit-only token of the same length
        template = _QUOTED_VALUE.sub(lambda match: "0" * len(match.group()), template)
    spans: list[tuple[int, int]] = []
    route = False
    for match in _TOKEN.finditer(template):
        token = match.group()
        if token.isalpha():  # the usual word: nothing to mask, unless it is an id of hex letters only
            route = token.isupper() and token.translate(_TEMPLATE) in _METHODS
            if len(token) >= 8 and _HEX_LETTERS.issuperset(token):
                spans.append(match.span())
            continue
        base = match.start()
        if token.isdigit():
            spans.append((base, match.end()))
        elif route and token[:1] == "/":
            spans.extend(_route(token, base))
        else:
            spans.extend((base + start, base + end) for start, end in _token(token))
        route = token.lstrip(_QUOTES).translate(_TEMPLATE) in _METHODS
    return tuple(spans)


def _route(token: str, base: int) -> list[tuple[int, int]]:
    """An HTTP request path: its segments that carry ids are masked, the others name the route."""
    spans = []
    position = base
    path, mark, _ = token.partition("?")
    for segment in path.split("/"):
        if _token(segment):
            spans.append((position, position + len(segment)))
        position += len(segment) + 1
    if mark:
        spans.append((base + len(path) + 1, base + len(token)))
    return spans


def _token(token: str) -> list[tuple[int, int]]:
    start, end = _core(token)
    core = token[start:end]
    if not core:
        return []
    if start and token[start - 1] in _QUOTES and end < len(token) and token[end] == token[start - 1]:
        return [(start - 1, end + 1)]  # 'admin', "x-42": a quoted single value, quotes and all
    if "://" in core or ("@" in core and "." in core.rpartition("@")[2]):
        return [(start, end)]  # URLs, e-mail addresses
    if "=" in core:
        spans = _pairs(core)
        if spans is not None:
            return [(start + a, start + b) for a, b in spans]
    if "," in core:  # a list: each item on its own
        spans = []
        position = 0
        for item in core.split(","):
            spans += [(start + position + a, start + position + b) for a, b in _token(item)]
            position += len(item) + 1
        return spans
    colon = core.find(":")
    if 0 < colon < len(core) - 1 and core[colon + 1] not in ":/\\" and _KEY.fullmatch(core, 0, colon):
        value = core[colon + 1 :]
        if not (value.isdigit() and len(value) <= 5 and "." in core[:colon]):  # host.name:443, File.java:12
            return [(start + colon + 1 + a, start + colon + 1 + b) for a, b in _token(value)]
    if _is_path(core) or _has_digit(core) or (len(core) >= 8 and _HEX_LETTERS.issuperset(core)):
        return [(start, end)]
    return []


def _core(token: str) -> tuple[int, int]:
    """The token without enclosing punctuation; a closing bracket stays when it closes one inside."""
    start, end = 0, len(token)
    while start < end and token[start] in _OPEN:
        start += 1
    while end > start and token[end - 1] in _CLOSE:
        closer = token[end - 1]
        opener = _PAIRS.get(closer)
        if opener is not None and token.count(opener, start, end) >= token.count(closer, start, end):
            break
        end -= 1
    return start, end


def _pairs(core: str) -> list[tuple[int, int]] | None:
    """Spans of `a=1,b=x;c` joined pairs: each value, and each other part that carries a digit."""
    spans: list[tuple[int, int]] = []
    found = False
    position = 0
    length = len(core)
    while position < length:
        end = position
        while end < length and core[end] not in ",;&":
            end += 1
        part = core[position:end]
        equals = part.find("=")
        if equals > 0 and part[equals - 1] not in "=!<>" and (part[equals - 1].isalnum() or part[equals - 1] in "_]"):
            found = True
            value_start = position + equals + 1
            value_end = value_start
            while value_end < end and core[value_end] not in _VALUE_STOP:
                value_end += 1
            if value_end > value_start:
                spans.append((value_start, value_end))
        elif _has_digit(part):
            spans.append((position, end))
        position = end + 1
    return spans if found else None


def _is_path(core: str) -> bool:
    """`/var/x`, `./a`, `C:\\x`, `a/b/c`, `pkg/file.ext`; not `I/O`, `n/a` or `application/json`."""
    if "/" not in core and "\\" not in core:
        return False
    if core[0] in "/\\~." or (len(core) > 2 and core[1] == ":" and core[2] in "/\\"):
        return True
    separators = core.count("/") + core.count("\\")
    last = core.replace("\\", "/").rpartition("/")[2]
    return separators >= 2 or "." in last


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


def _phrases(masked: str) -> str:
    """Pass 2 on the masked text; a rule whose literal the text lacks is not run."""
    for _ in range(3):
        before = masked
        words = None
        for pattern, needs in _PHRASES:
            if isinstance(needs, str):
                if needs not in (masked.lower() if needs == "user " else masked):
                    continue
            else:
                words = set(masked.split()) if words is None else words
                if needs.isdisjoint(words):
                    continue
            masked = pattern.sub(MASK, masked)
        if "<*>" in masked:
            masked = _SIGN.sub("", masked)
        if masked == before:
            break
    return masked
