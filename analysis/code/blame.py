"""Which frame the code blames: read what the raising code does, then move along the evidence.

Starting from the innermost application frame of the root cause:

- an exception class, an exception factory, or a method that only reports (it raises whenever it is
  called, or raises with just what its caller handed it) raises for its caller: climb to the caller;
- a check that rejects a parameter (an `if` before a raise, `requireNonNull`, `checkArgument`, index and
  range checks, a parser fed the value, a runtime fault on a parameter): follow the parameter up through
  the call lines to the frame whose argument expression produced the value, however many frames up. A
  value that came from outside the application stays with the code that checked it (the caller of a
  dedicated guard method);
- a check on the object's own state: the caller that drove the object there, from its loop or branch;
- a value computed in the raising method (a local, a call's result): that method; the fault of an array
  this method allocated: the allocation;
- a switch that falls to a raising default: the switch has no case for the value;
- the stack ran out (`RecursionError`, `StackOverflowError`, V8's call stack, Go's stack overflow): the call
  that goes round, where the innermost function is called again.

Every step is written as a sentence a person can check against the code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from analysis.code.expression import call_args, calls_in, is_literal, operands, receivers_in
from analysis.code.shape import (
    INLINE_CHECK,
    RAISE,
    THROWABLE,
    Condition,
    branch,
    condition,
    default_case,
    only_exits_before,
    returns_value,
)
from analysis.code.site import Site, code_name, is_throwable_class
from analysis.code.value import base_name, from_params, message_literal, message_values, operand_roles, producer, roles
from analysis.event import Frame

_CHECK_API = re.compile(
    r"(?:^|\.)(?:check\w*|require\w*|assert\w*|verify\w*|validate\w*|ensure\w*|notNull|notBlank|notEmpty|isTrue"
    r"|validState|validIndex|noNullElements|invariant|ok|strictEqual|deepStrictEqual|must\w*)$"
)
_PARSE_API = re.compile(
    r"(?:^|\.)(?:parse\w*|valueOf|decode|loads?|fromJson|readValue|fromString|fromisoformat|strptime|Unmarshal"
    r"|Atoi|ParseInt|ParseFloat|ParseBool|forInputString)$"
)
_NULL_CHECK = re.compile(r"(?:^|\.)(?:requireNonNull\w*|checkNotNull|notNull|isNotNull|assertNotNull|nonNull)$")
_ALLOCATION = re.compile(r"\bnew\s+[\w$.<>]+\s*\[|\bArray\.newInstance\s*\(|\bmake\s*\(\s*\[\]|\bnew\s+Array\s*\(")
_GUARD_STATEMENT = re.compile(
    r"^(?:\}\s*)?(?:else\b|elif\b|if\b|assert\b|throw\b|raise\b|[\w.]*(?:check|require|validate|verify|ensure)\w*\s*\()"
)
# The stack ran out: Python, the JVM, Ruby by type; V8 and the Go runtime by message.
_STACK_RAN_OUT = re.compile(r"(?:^|\.)(?:RecursionError|StackOverflowError|SystemStackError)$")
_STACK_RAN_OUT_MESSAGES = ("Maximum call stack size exceeded", "stack overflow")
_RAISE_CALL = re.compile(r"(?<![\w$.])(?:throw|raise|panic)\s*+(?:new\s++)?[\w$.]*+\s*+\(")

Adjacent = Callable[[Site, Site], bool]


@dataclass
class Blame:
    """The frame the evidence points at, the line cited there, and the reasoning, step by step."""

    site: Site
    line: int | None
    evidence: list[str] = field(default_factory=list)
    raiser: Site | None = None
    """The frame the exception surfaced in, when the blame moved away from it."""
    producer: tuple[str, int] | None = None
    """Where the value at fault was produced, when that is another line."""
    passed: list[Site] = field(default_factory=list)
    """Frames that only passed the value on, or only reported the failure."""
    constants: list[str] = field(default_factory=list)
    """Constants the failing value involved; their definitions are suspects the trace does not name."""


@dataclass(frozen=True)
class _Raise:
    kind: str
    """check, parse or call (a library frame raised); guard, raise or unhandled (in-app code); fault."""
    expr: str
    """What the raise depends on (its operands)."""
    api: str = ""
    text: str = ""
    """How the evidence quotes it (a condition or the operands as written: strings not blanked), when not
    `expr`."""
    made_here: str = ""
    """An operand the raising line itself computed (an index `len(batch)`, `i + 1`)."""


def blame(sites: Sequence[Site], exc_type: str, message: str, deeper: Sequence[Frame], adjacent: Adjacent) -> Blame:
    """The frame the code's evidence blames, starting from the innermost mapped site `sites[0]`.

    `deeper` are the frames below it (library, runtime, test code); `adjacent(caller, callee)` says
    whether `caller` calls `callee` directly.
    """
    raiser = sites[0]
    if not raiser.readable:
        return Blame(raiser, raiser.line, [f"the code at {raiser.where} could not be read"])
    if _STACK_RAN_OUT.search(exc_type) or message.startswith(_STACK_RAN_OUT_MESSAGES):
        recursion = _recursion(sites, adjacent)
        if recursion is not None:
            return recursion
    evidence: list[str] = []
    passed: list[Site] = []
    k = 0
    while not deeper and k + 1 < len(sites) and adjacent(sites[k + 1], sites[k]) and sites[k + 1].readable:
        why = _reports_for_caller(sites[k], sites[k - 1] if k else None, message)
        if not why:
            break
        evidence.append(f"{sites[k].who} {why} ({sites[k].where})")
        passed.append(sites[k])
        k += 1
    site = sites[k]
    moved_from = raiser if k else None
    found = _raise_at(site, exc_type, message, deeper if k == 0 else (), sites[k - 1] if k else None)
    if found.kind == "unhandled":
        evidence.append(f"{site.who} has no case for this {_short(found.expr)}: its switch falls to the default "
                        f"branch, which raises ({site.where})")
        return Blame(site, site.line, evidence, moved_from, None, passed)
    # A null check's argument is the value itself (a call's result is made here); any other check's
    # condition reads its operands (`p.isValid()` checks the parameter p).
    mode = "fault" if found.kind == "fault" else "argument" if _NULL_CHECK.search(found.api) else "condition"
    found_roles = [(op, operand_roles(site, op, mode, site.line or 0)) for op in operands(found.expr)]
    constants = [re.sub(r"[\[(].*", "", op).rsplit(".", 1)[-1] for op, r in found_roles
                 if "constant" in r and not op.endswith(".class")]
    verdict = _decide(sites, k, found, found_roles, exc_type, evidence, passed, adjacent)
    verdict.constants = constants
    return verdict


def _recursion(sites: Sequence[Site], adjacent: Adjacent) -> Blame | None:
    """The stack ran out: the calls that go round (the innermost frame's function, called again further up),
    blamed at the call that closes the cycle; None when no application function recurs."""
    def key(site: Site) -> tuple[str, str]:
        return site.path, site.frame.function  # a comprehension's frame is not its function's

    period = next((p for p in range(1, len(sites)) if key(sites[p]) == key(sites[0])), None)
    if period is None or not all(adjacent(sites[i + 1], sites[i]) for i in range(period)):
        return None
    cycle = sites[period]
    names = _distinct([site.who for site in reversed(sites[: period + 1])])
    if len(set(names)) == 1:
        evidence = [f"{cycle.who} calls itself at {cycle.where}"]
    else:
        calls = dict.fromkeys(site.where for site in reversed(sites[1 : period + 1]))
        evidence = [f"the calls go round {' → '.join(names)} (at {', '.join(calls)})"]
    evidence[0] += " and never reached a case that ends the recursion before the stack ran out"
    going_round = {key(site) for site in sites[:period]}
    entry = next((i for i in range(period, len(sites)) if key(sites[i]) not in going_round), None)
    if entry is not None and adjacent(sites[entry], sites[entry - 1]):
        evidence.append(f"it was entered from {sites[entry].who} at {sites[entry].where}")
    return Blame(cycle, cycle.line, evidence, sites[0] if sites[0].line != cycle.line else None)


def _distinct(items: list[str]) -> list[str]:
    """`items` without an item equal to the one before it."""
    return [item for i, item in enumerate(items) if not i or item != items[i - 1]]


def _decide(sites: Sequence[Site], k: int, found: _Raise, found_roles: list[tuple[str, list[str]]], exc_type: str,
            evidence: list[str], passed: list[Site], adjacent: Adjacent) -> Blame:
    raiser, site = sites[0], sites[k]
    moved_from = raiser if k else None
    if found.kind == "raise":  # no condition: the value its message names first
        found_roles = [(op, r) for op, r in found_roles if set(r) & {"param", "local", "call"}][:1]
    what = {"check": f"calls {found.api} on", "parse": f"hands {found.api}", "call": f"calls {found.api} with",
            "guard": "raises when", "raise": "raises about", "fault": "fails on"}[found.kind]
    computed = [found.made_here] if found.made_here else []
    computed += [op for op, r in found_roles if set(r) & {"local", "call"}]
    params = [op for op, r in found_roles if "param" in r]
    state = [op for op, r in found_roles if "field" in r]
    if computed:
        return _computed_here(site, found, what, computed, exc_type, evidence, moved_from, passed)
    if params:
        param = base_name(params[0])
        quoted = _short(found.text or found.expr)
        evidence.append(f"{site.who} {what} {quoted}, its parameter {param} ({site.where})")
        return _follow(sites, k, param, found.kind, evidence, passed, adjacent, raiser)
    if state and found.kind in ("guard", "check", "raise"):
        quoted = _short(found.text or found.expr)
        evidence.append(f"{site.who} {what} {quoted}: the object's own state ({site.where})")
        return _drive(sites, k, evidence, passed, adjacent, raiser)
    evidence.append(f"{site.who} {what} {_short(found.text or found.expr)} at {site.where}" if found.expr
                    else f"{site.who} raises at {site.where} whatever it is given")
    return Blame(site, site.line, evidence, moved_from, None, passed)


def _computed_here(site: Site, found: _Raise, what: str, computed: Sequence[str], exc_type: str,
                   evidence: list[str], moved_from: Site | None, passed: list[Site]) -> Blame:
    """The value at fault was made in the raising method: blame it, and say where the value was made."""
    source = site.source
    sized = found.kind == "fault" and not found.made_here and re.search(r"Index|ArrayStore", exc_type)
    for array in computed if source and sized else ():
        allocated = producer(site, array)
        if allocated and source and _ALLOCATION.search(source.statement_text(allocated)):
            evidence.append(f"{site.who} fails on the array {_short(array)}, allocated at {site.path}:{allocated}: "
                            "its size and element type decide what fits")
            return Blame(site, allocated, evidence, moved_from, (site.path, site.line or allocated), passed)
    value = computed[0]
    line = producer(site, value)
    where = f", assigned at {site.path}:{line}" if line else ""
    quoted = _short(found.text or found.expr)
    evidence.append(f"{site.who} {what} {quoted}: {_short(value)} is computed in {site.who} itself{where}")
    return Blame(site, site.line, evidence, moved_from, (site.path, line) if line and line != site.line else None,
                 passed)


# -- what the raise at a site depends on ----------------------------------------------------------------


def _raise_at(site: Site, exc_type: str, message: str, deeper: Sequence[Frame], callee: Site | None) -> _Raise:
    source, method, line = site.source, site.method, site.line
    assert source is not None and method is not None and line is not None
    statement = site.statement()
    if deeper and callee is None:  # a library or runtime frame raised: read the call the application made
        api = deeper[-1]
        target = code_name(api)
        qualified = f"{api.module}.{api.function}" if api.module else api.function
        kind = "check" if _CHECK_API.search(qualified) else "parse" if _PARSE_API.search(qualified) else "call"
        calls = calls_in(statement, target) if target else []
        if not calls:
            return _Raise(kind, statement, qualified)
        receiver, args = calls[0]
        inputs = args if kind in ("check", "parse") or not receiver else [receiver, *args]
        return _Raise(kind, ", ".join(inputs), qualified, text=", ".join(source.as_written(line, inputs)))
    if callee is None and not RAISE.search(statement) and not INLINE_CHECK.search(statement):
        faulty = _fault_operands(statement, exc_type, message)
        return _Raise("fault", ", ".join(faulty), text=", ".join(source.as_written(line, faulty)),
                      made_here=_computed_index(statement, exc_type))
    unhandled = default_case(source, method, line)
    if unhandled is not None:
        return _Raise("unhandled", unhandled)
    guard = condition(source, method, line)
    if guard is not None:
        ops = operands(guard.text)
        kept = [op for op in ops if "config" not in operand_roles(site, op, "condition", line)]
        if kept:
            return _Raise("guard", ", ".join(kept), text=_guard_text(guard) if kept == ops else "")
    return _Raise("raise", ", ".join(message_values(_raise_args_raw(site), _raise_args(site, callee) or [])))


def _guard_text(guard: Condition) -> str:
    """The condition as the evidence quotes it ("raises when …"); a `try` body as what fails there
    (`Integer.parseInt(raw.trim()) fails`, not `return Integer.parseInt(raw.trim());`)."""
    if not guard.caught:
        return guard.text.strip()
    return re.sub(r"^return\s+|;$", "", guard.text.strip()).strip() + " fails"


def _fault_operands(statement: str, exc_type: str, message: str) -> list[str]:
    """The expressions a runtime fault of `exc_type` can come from on this statement; the message says
    which operation failed when it names one (an operator, an attribute, a subscript, a call)."""
    if re.search(r"ZeroDivision|Arithmetic", exc_type):
        return [d for d in re.findall(r"[/%]\s*([\w$.]+(?:\([^()]*\))?)", statement) if not is_literal(d)]
    if re.search(r"IndexOutOfBounds|IndexError|ArrayStore|NegativeArraySize", exc_type):
        pairs = re.findall(r"(?<![\w$.])([\w$.]++(?:\([^()]*+\))?)\s*+\[([^\[\]]*+)\]", statement)
        return [a for a, _ in pairs] + [i.strip() for _, i in pairs if re.fullmatch(r"[\w$.]+", i.strip())]
    if re.search(r"ClassCast", exc_type):
        return re.findall(r"\(\s*[A-Z][\w$.<>\[\], ?]*\)\s*([\w$.]+(?:\([^()]*\))?)", statement)
    named = _operation(statement, message)
    if named:
        return named
    if re.search(r"NullPointer|AttributeError|TypeError|KeyError|undefined|nil", exc_type) or not exc_type:
        return receivers_in(statement)[:2]
    return [a for call in re.findall(r"\(([^()]*)\)", statement) for a in call.split(",") if a.strip()]


def _computed_index(statement: str, exc_type: str) -> str:
    """An index the faulting line computes (`batch[len(batch)]`, `a[i + 1]`): the line chose it."""
    if not re.search(r"IndexOutOfBounds|IndexError", exc_type):
        return ""
    indexes = re.findall(r"[\w$.)\]]\s*\[([^\[\]]+)\]", statement)
    return next((i.strip() for i in indexes if re.search(r"[-+*/%]|[\w$]\s*\(", i)), "")


# An operand, tried from the start of its run only and never given back: what follows it is an operator.
_OPERAND = r"(?<![\w$.])([\w$.]++(?:\([^()]*+\)|\[[^\][]*+\])*+)"
# An operand before `.name`: its pieces are bounded, as the name's own dots may have to be given back.
_RECEIVER = r"(?<![\w$.])([\w$.]{1,200}(?:\([^()]{0,200}\)|\[[^\][]{0,200}\]){0,4})"


def _operation(statement: str, message: str) -> list[str]:
    """The operands of the operation a runtime message names, found on the statement."""
    operator = re.search(r"operand type\(s\) for ([^:\s]+):|can only concatenate|'([<>]=?)' not supported between",
                         message)
    if operator:
        op = re.escape(operator.group(1) or operator.group(2) or "+")
        pairs = re.findall(_OPERAND + r"\s*+" + op + r"=?\s*+" + _OPERAND, statement)
        return [side for pair in pairs for side in pair if side and not is_literal(side)]
    attribute = re.search(r"has no attribute '(\w+)'|\(reading '([^']+)'\)|property '([^']+)'", message)
    if attribute:
        name = re.escape(next(g for g in attribute.groups() if g))
        return re.findall(_RECEIVER + r"\??\." + name + r"\b", statement)
    if "not subscriptable" in message:
        return re.findall(r"(?<![\w$.])([\w$.]++(?:\([^()]*+\))?)\s*+\[", statement)
    called = re.search(r"(?<![\w$.])([\w$.]++) is not a function|'(\w++)' object is not callable", message)
    if called:
        return [called.group(1) or called.group(2)]
    return []


def _raise_args_raw(site: Site) -> list[str]:
    """The raise's arguments as written (string literals kept), to read its message."""
    statement = site.statement(masked=False)
    match = re.search(r"(?<![\w$.])(?:throw|raise|panic|return)\s*+(?:new\s++)?[\w$.]*+\s*+\(", statement) or re.search(
        r"(?<![\w$.])[\w$.]++\s*+\(", statement)
    return call_args(statement[match.start() :].rstrip().rstrip(";").strip()) if match else []


def _raise_args(site: Site, callee: Site | None) -> list[str] | None:
    """Arguments of the exception, or of the reporter call, that the site's statement raises with."""
    statement = site.statement()
    if callee is not None:
        calls = calls_in(statement, callee.name) if callee.name else []
        return calls[0][1] if calls else None
    match = _RAISE_CALL.search(statement)
    return call_args(statement[match.start() :].split(";")[0].strip()) or None if match else None


# -- frames that only report -------------------------------------------------------------------------------


def _reports_for_caller(site: Site, callee: Site | None, message: str) -> str:
    """Why the site raises only for its caller; '' when it decides the failure itself."""
    source, method, line = site.source, site.method, site.line
    if source is None or method is None or line is None:
        return ""
    if is_throwable_class(site):
        return "builds the exception"
    if method.returns and THROWABLE.search(method.returns):
        return "returns the exception for its caller to throw"
    if branch(source, method, line) or (callee is None and not RAISE.search(site.statement())):
        return ""
    if not returns_value(source, method, line) and only_exits_before(source, method, line):
        return "raises whenever it is called"
    args = _raise_args(site, callee)
    if args is None or message_literal(site, message):
        return ""
    found = [r for a in args for r in roles(site, a, "argument")]
    made = [a for a in args if "local" in roles(site, a, "argument")]
    if ("param" in found or made) and all(from_params(site, base_name(a)) for a in made) and set(found) <= {
            "param", "constant", "config", "field", "literal", "local"}:
        return "reports what its caller passed it"
    return ""


def _is_guard_method(site: Site) -> bool:
    """A method that only checks its arguments: conditions, raises, checks, returns of a parameter."""
    source, method = site.source, site.method
    if source is None or method is None:
        return False
    n = max(method.body, method.start) + 1
    while n <= method.end:
        text = source.masked(n).strip()
        returned = re.match(r"^return\b\s*(.*?);?$", text)
        if text in ("", "{", "}", "};") or _GUARD_STATEMENT.match(text):
            n = source.statement(n)[1] + 1
        elif returned and set(roles(site, returned.group(1), "argument", n)) <= {"param", "literal", "constant"}:
            n += 1
        else:
            return False
    return True


# -- following the value up the call lines ------------------------------------------------------------------


def _argument(caller: Site, callee: Site) -> tuple[str, list[str]] | None:
    """(receiver, arguments) of the call to `callee` on the caller's line."""
    statement = caller.statement()
    calls = calls_in(statement, callee.name) if callee.name else []
    if not calls and callee.frame.function == "<init>":
        calls = calls_in(statement, "this") or calls_in(statement, "super")
    return calls[0] if calls else None


def _param_index(callee: Site, param: str) -> int | None:
    method = callee.method
    if method is None or param not in method.params:
        return None
    index = method.params.index(param) - (1 if method.params[0] in ("self", "cls") else 0)
    return index if index >= 0 else None


def _follow(sites: Sequence[Site], k: int, param: str, kind: str, evidence: list[str], passed: list[Site],
            adjacent: Adjacent, raiser: Site) -> Blame:
    """Follow a parameter up the call lines to the frame whose argument expression produced the value."""
    start = k
    given, giver = "", None
    while k + 1 < len(sites) and adjacent(sites[k + 1], sites[k]) and sites[k + 1].readable:
        callee, caller = sites[k], sites[k + 1]
        call = _argument(caller, callee)
        index = _param_index(callee, param)
        if call is None or index is None or index >= len(call[1]):
            evidence.append(f"{_caller(caller)} calls it at {caller.where}")
            return Blame(caller, caller.line, evidence, raiser, None, passed)
        arg = call[1][index].strip()
        arg_roles = roles(caller, arg, "argument")
        written = caller.source.as_written(caller.line, [arg])[0] if caller.source and caller.line else arg
        if "local" in arg_roles or "call" in arg_roles or ("field" in arg_roles and "param" not in arg_roles):
            line = producer(caller, arg) if "local" in arg_roles else None
            made = f", assigned at {caller.path}:{line}" if line else ""
            evidence.append(f"{_caller(caller)} passed {_short(written)} at {caller.where}{made}")
            return Blame(caller, caller.line, evidence, raiser, (caller.path, line) if line else None, passed)
        if "param" in arg_roles:
            passes = f"{caller.who} passes its own parameter on ({_short(written)} at {caller.where})"
            if passes not in evidence:  # a recursion passes it on at the same lines in every round
                evidence.append(passes)
            passed.append(caller)
            param = next(base_name(op) for op in operands(arg)
                         if "param" in operand_roles(caller, op, "argument", caller.line or 0))
            k += 1
            continue
        if k + 2 < len(sites) and adjacent(sites[k + 2], caller):
            evidence.append(f"{_caller(caller)} passed the constant {_short(written)} at {caller.where}")
            return Blame(caller, caller.line, evidence, raiser, None, passed)
        if caller.top_level:  # a script's input, written in it: its checks are where bad input is caught
            given = f"the value is the constant {_short(written)}, which {caller.who} passes at {caller.where}"
            giver = caller
        break
    # The value came from outside the application (a test, a request, the command line): the code that
    # checked it is the place; for a method that only checks, the code that chose to call the check.
    target = sites[start]
    if kind in ("guard", "raise") and _is_guard_method(target) and start + 1 < len(sites) and adjacent(
            sites[start + 1], target):
        target = sites[start + 1]
    done = "checks it" if kind in ("guard", "check", "raise") else "is the first code of the application to use it"
    if given:
        evidence.append(given if target is giver else f"{given}; {target.who} at {target.where} {done}")
    else:
        evidence.append(f"the value comes from outside the application; {target.who} at {target.where} {done}")
    return Blame(target, target.line, evidence, raiser if target is not raiser else None, None,
                 [s for s in passed if s is not target])


def _drive(sites: Sequence[Site], k: int, evidence: list[str], passed: list[Site], adjacent: Adjacent,
           raiser: Site) -> Blame:
    """A check on the object's state: climb the same object's calls to the caller whose loop or branch, or
    whose other object, drove it there."""
    while k + 1 < len(sites) and adjacent(sites[k + 1], sites[k]) and sites[k + 1].readable:
        callee, caller = sites[k], sites[k + 1]
        call = _argument(caller, callee)
        receiver = call[0] if call else ""
        assert caller.source is not None and caller.method is not None and caller.line is not None
        around = branch(caller.source, caller.method, caller.line)
        same_object = receiver in ("", "this", "self", "super")
        if same_object and not around and k + 2 < len(sites) and adjacent(sites[k + 2], caller):
            passed.append(caller)
            k += 1
            continue
        how = f" inside `{_short(around, 50)}`" if around else (f" on {_short(receiver, 40)}" if receiver else "")
        line = producer(caller, receiver) if receiver and not same_object else None
        made = f" ({_short(receiver, 40)} assigned at {caller.path}:{line})" if line else ""
        evidence.append(f"{_caller(caller)} drove it there at {caller.where}{how}{made}")
        return Blame(caller, caller.line, evidence, raiser, (caller.path, line) if line else None, passed)
    return Blame(sites[k], sites[k].line, evidence, raiser if sites[k] is not raiser else None, None, passed)


def _caller(site: Site) -> str:
    """A caller as the evidence names it: `caller main()`, or the module's top-level code."""
    return site.who if site.top_level else f"caller {site.who}"


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
