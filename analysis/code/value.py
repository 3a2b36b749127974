"""What a value read at a frame's line is: a parameter, a local, the object's state, a constant.

`roles` answers it for every operand of an expression; the blame rules decide from those roles whether a
value came into the method (follow it to the caller), was made there (blame the method), or is the
object's own state (blame whoever drove the object there).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from analysis.code.expression import CONSTANT_NAME, IDENT, call_args, is_literal, operands
from analysis.code.site import Site

_CONSTANT = re.compile(r"^(?:[A-Z][\w$]*\.)*[A-Z][A-Z0-9_]*$|^[\w$.]+\.class$")
_NULLISH = frozenset(("null", "None", "nil", "undefined", "true", "false", "True", "False"))
_OPERAND = re.compile(r"^((?:this\.|self\.)?)(" + IDENT + r")(.*)$", re.DOTALL)
_MEMBER_CHAIN = re.compile(r"(?:\??\.[\w$]++|\[[^\][]*+\])++")
_QUOTED = re.compile(r"[\"'`]")


def roles(site: Site, expr: str, mode: str, line: int | None = None) -> list[str]:
    """Roles of the operands of `expr` read at the site: param, local, field, call, literal, constant, config.

    `mode` says how a call counts. 'fault': the raising line computed it (only a bare parameter, or a
    member of one, is still the parameter). 'condition': a check reads its operands (`p.isValid()` checks
    the parameter p). 'argument': a caller's argument; a method called on a parameter makes a new value,
    while a helper wrapping it (`wrap(p)`) or a member (`p.x`, `args[0]`) passes the parameter on.
    """
    if is_literal(expr):  # an object or list literal as a whole, before its keys look like names
        return ["literal"]
    at = line or site.line or 0
    return [r for op in operands(expr) for r in operand_roles(site, op, mode, at)]


def operand_roles(site: Site, op: str, mode: str, line: int, depth: int = 0) -> list[str]:
    """Roles of one operand, with those of a call's arguments after its own."""
    source, method = site.source, site.method
    assert source is not None and method is not None
    text = op.strip()
    if is_literal(text) or text in _NULLISH:
        return ["literal"]
    if _CONSTANT.match(text):
        return ["constant"]
    match = _OPERAND.match(text)
    if match is None:
        return []
    owner, base, rest = match.group(1), match.group(2), match.group(3).strip()
    inner: list[str] = []
    args = call_args(text)
    if args and depth < 3:
        if all(is_constant(a) for a in args) and (owner or base[:1].islower()):
            return ["config"]  # a feature or setting lookup such as isEnabled(Feature.X)
        if mode != "fault":
            inner = [r for a in args for o in operands(a) for r in operand_roles(site, o, mode, line, depth + 1)]
    if base in ("this", "self", "super") and not rest:
        return ["field"]
    if owner:
        return ["field", *inner]
    if CONSTANT_NAME.fullmatch(base) and not rest.startswith("("):
        return ["constant", *inner]  # SETTINGS["timeout"], LIMITS.max: a module or class constant
    if base[:1].isupper():
        return inner if rest else []  # a class: a static call reads its arguments; a bare name is a type
    if rest.startswith("("):  # a bare call: a method of the object itself in Java, a function elsewhere
        return (["field"] if source.lang == "java" else ["call"]) + inner
    kind = source.role(method, base, line)
    if kind == "param" and rest and not _MEMBER_CHAIN.fullmatch(rest) and mode != "condition":
        return ["call"]  # a new value computed from the parameter
    return [kind, *inner]


def is_constant(expr: str) -> bool:
    """A literal, an ALL_CAPS constant, `Enum.MEMBER` or `Foo.class`."""
    text = expr.strip()
    return is_literal(text) or bool(_CONSTANT.match(text))


def base_name(expr: str) -> str:
    """The variable an expression starts from (`order.items[0]` → order; a cast is skipped)."""
    match = re.search(r"(?:^|[^\w$.])(?:this\.|self\.)?([a-z_$][\w$]*)", " " + expr.strip())
    return match.group(1) if match else ""


def producer(site: Site, expr: str) -> int | None:
    """The line in the site's method that assigned the local an expression starts with."""
    name = base_name(expr)
    if not site.readable or not name:
        return None
    assert site.source is not None and site.method is not None and site.line is not None
    return site.source.assignment(site.method, name, site.line)


def from_params(site: Site, name: str) -> bool:
    """Whether every assignment to the local `name` builds it from parameters, literals and the object."""
    source, method = site.source, site.method
    if source is None or method is None or not name:
        return False
    pattern = re.compile(r"(?<![\w$.])" + re.escape(name) + r"\s*=(?!=)(.*)")
    found = False
    for n in range(max(method.body, method.start) + 1, method.end + 1):
        match = pattern.search(source.statement_text(n)) if pattern.search(source.masked(n)) else None
        if match:
            rhs = re.sub(r"(?<![\w$.])" + re.escape(name) + r"\b", "null", match.group(1).rstrip(";"))
            if not set(roles(site, rhs, "argument", n)) <= {"param", "literal", "constant", "config", "field"}:
                return False
            found = True
    return found


def message_literal(site: Site, message: str) -> bool:
    """Whether the site's statement writes part of the exception's message: it decided the failure."""
    def words(text: str) -> list[str]:
        return re.findall(r"[A-Za-z]{3,}", text)

    wanted = set(words(message))
    for double, single in re.findall(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'", site.statement(masked=False)):
        found = words(double or single)
        if len(found) >= 2 and sum(w in wanted for w in found) >= max(2, len(found) // 2):
            return True
    return False


def message_values(raw_args: Sequence[str], args: Sequence[str]) -> list[str]:
    """The values a raise reports: those written into its message, else its non-constant arguments.

    `raw_args` are the raise's arguments as written (with their string literals), `args` masked.
    """
    if not any(_QUOTED.search(a) for a in raw_args):
        return [a for a in args if not is_constant(a)]
    found: list[str] = []
    for index, raw in enumerate(raw_args):
        found += [a or b for a, b in re.findall(
            r"[\"'`]\s*+\+\s*+([\w$.]++(?:\([^()]*+\))?)|(?<![\w$.])([\w$.]++(?:\([^()]*+\))?)\s*+\+\s*+[\"'`]", raw)]
        found += re.findall(r"\$?\{([\w$.]++)[^{}]*+\}", raw)  # f-strings and template literals
        if re.search(r"%[sdrf]|\{\}|\bformat\b", raw):
            found += [a for a in raw_args[index + 1 :] if not _QUOTED.search(a)]
    return list(dict.fromkeys(n for n in found if n and not is_constant(n)))
