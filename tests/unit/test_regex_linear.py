"""Every regular expression of the product runs in linear time on hostile 1 MB inputs.

The patterns are found programmatically, so a new one cannot be forgotten: every compiled pattern
reachable from the modules of `consumer/`, `analysis/` and `store/` (module constants, tuples of rules,
closures, bound `.search` methods), and every literal pattern passed to a `re`/`regex` call in their
source. A call whose pattern is built at run time must be listed in `_DYNAMIC` with what bounds it.

Inputs are built from each pattern's own pieces: runs of every literal and of characters each class
accepts, its openers repeated, each opener followed by a long run of each class, separators. Time is
CPU time of this thread. Every input is tried at 256 B, 2 kB and 16 kB, and fails as soon as its time
grows faster than four times linear from one size to the next once over 0.1 s (`tests.linear`: a
quadratic rule fails in milliseconds, not hours; a slower machine does not); the three slowest inputs
of each pattern then run at 16 kB, 128 kB and the full 1 MB, where they have a budget of 2.5 s on the
budgets' machine (the slowest took 0.81 s there).
"""

from __future__ import annotations

import ast
import importlib
import itertools
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

import pytest
import regex

from analysis.code.blame import _OPERAND, _RECEIVER
from analysis.code.clue import definition_regex
from analysis.code.expression import IDENT
from analysis.intake.redact_rules import _SPACE, _listed_number
from tests.linear import cpu_seconds, least_cpu_seconds, over_budget, superlinear

_ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("consumer", "analysis", "store")
_SIZE = 1 << 20
_BUDGET_S = 2.5
_SCREEN_STEPS = (256, 2048, 16384)
_FULL_STEPS = (16384, 131072, _SIZE)
_FULL_INPUTS = 3
_COMBINED = 6
_SEPARATORS = " \t\n\r:=/.,;-_@\"'()[]{}<>\\|#$%&*+?!~`^0aA\u00e9\u2028\x00"

# Call sites whose pattern is built at run time, and why each is bounded. Keys: "module:function".
_DYNAMIC = {
    "analysis.intake.frame_key:": "module constants compiled from rule tables; the compiled rules are tested",
    "analysis.intake.redact_rules:": "module constants compiled from rule tables; the compiled rules are tested",
    "analysis.intake.redact_rules:_rule": "compiles the rule table's literals; the compiled rules are tested",
    "analysis.intake.redact_rules:_named_taxpayer": "a listed number after one of two gaps; tested via _SAMPLES",
    "analysis.intake.sql_parameters:": "module constants joined from literal pieces; the compiled patterns are tested",
    "analysis.intake.redact:": "a module constant compiled from literal pieces; the compiled pattern is tested",
    "analysis.intake.redact:Redactor.__init__": "operator patterns, run on `regex` with a timeout",
    "analysis.intake.redact:RedactionConfig._compiling_patterns": "operator patterns, compiled to check them",
    "analysis.intake.tally:": "a module constant joined from literals; the compiled pattern is tested",
    "analysis.intake.template:": "module constants compiled from rule tables; the compiled rules are tested",
    "analysis.code.tools:FileTools.grep_files": "the model's pattern, run on `regex` with a timeout",
    "analysis.code.suspects:null_callee": "identifiers from the message, escaped; tested via _SAMPLES",
    "analysis.code.suspects:receiver_type": "an escaped callee and an escaped identifier; tested via _SAMPLES",
    "analysis.code.blame:_operation": "an escaped operator or attribute between operands with a lookbehind; tested via _SAMPLES",  # noqa: E501
    "analysis.code.clue:ClueFinder._member": "definition_regex of an escaped name, anchored; tested via _SAMPLES",
    "analysis.code.clue:ClueFinder.definitions": "definition_regex of an escaped name, anchored; tested via _SAMPLES",
    "analysis.code.expression:": "module constants joined from IDENT; the compiled patterns are tested",
    "analysis.code.expression:calls_in": "an escaped callee after a receiver of at most 6 links; tested via _SAMPLES",
    "analysis.code.expression:param_name": "IDENT and an anchored Kotlin parameter; tested via _SAMPLES",
    "analysis.code.expression:receivers_in": "IDENT with a lookbehind; tested via _SAMPLES",
    "analysis.code.site:_expectation": "an escaped callee name or owner; tested via _SAMPLES",
    "analysis.code.site:_explicit_raise": "an escaped exception type after a lookbehind; tested via _SAMPLES",
    "analysis.code.site:code_name": "IDENT, fullmatch on a frame's function name; tested via _SAMPLES",
    "analysis.code.site:is_throwable_class": "an escaped class name after `class`; tested via _SAMPLES",
    "analysis.code.source:": "module constants joined from IDENT; the compiled patterns are tested",
    "analysis.code.source:Source._head": "IDENT with a lookbehind; tested via _SAMPLES",
    "analysis.code.source:Source.assignment": "an escaped name, repeats bounded; tested via _SAMPLES",
    "analysis.code.source:_self_derived": "an escaped name after a lookbehind; tested via _SAMPLES",
    "analysis.code.value:": "module constants joined from IDENT; the compiled patterns are tested",
    "analysis.code.value:from_params": "an escaped name after a lookbehind; tested via _SAMPLES",
}
# Representative patterns of dynamic sites that run on the `re` engine without a timeout.
_NAME = re.escape("name")
_SAMPLES = {
    "analysis.intake.redact_rules:_named_taxpayer": (_listed_number(_SPACE), _listed_number("")),
    "analysis.code.suspects:null_callee": (
        r"(?<![\w.])([\w.]+)\s*\([^()]*\)\s*\??\." + re.escape("name") + r"\b",
        r"(?<!\w)([A-Za-z_]\w*)\??(?:\[[^\][]*\])?\." + re.escape("name") + r"\b",
        r"\b" + re.escape("user") + r"\s*(?:,\s*\w+\s*)*(?::=|=(?!=))\s*(?:await\s+)?(?:new\s+)?([\w.]+)\s*\(",
    ),
    "analysis.code.suspects:receiver_type": (
        r"(?<![\w.])(?:this\.|self\.)?([A-Za-z_]\w*)\s*\.\s*" + _NAME + r"\s*\(",
        rf"\b([A-Z]\w*)(?:<[^<>\n]*>)?\s+{_NAME}\s*[;=,)]|\b{_NAME}\s*[?!]?\s*:\s*(?:Optional\[)?([A-Z]\w*)"
        rf"|\b{_NAME}\s*=\s*(?:new\s+)?([A-Z]\w*)\s*\(",
    ),
    "analysis.code.blame:_operation": (
        _OPERAND + r"\s*+" + re.escape("+") + r"=?\s*+" + _OPERAND, _RECEIVER + r"\??\." + _NAME + r"\b"),
    "analysis.code.expression:calls_in": (
        r"(?:(?<![\w$])((?:[\w$]++(?:\([^()]*+\))?(?:\[[^\][]*+\])?\??\.){0,6})|new\s++)(?<![\w$])" + _NAME
        + r"\s*+(?:<[^<>()]*+>)?\s*+\(",),
    "analysis.code.clue:ClueFinder.definitions": (definition_regex("name"),),
    "analysis.code.expression:param_name": (r"^(?:va[lr]\s+)?(" + IDENT + r")\s*:", IDENT),
    "analysis.code.expression:receivers_in": (
        r"(?<![\w$.])((?:this\.|self\.)?" + IDENT + r"(?:\([^()]*\))?)\s*\??(?:\.|\[)",),
    "analysis.code.site:_expectation": (
        r"\bnew\s+[\w.]*" + _NAME + r"\b|\b(?:this|super)\s*\(|\b" + _NAME + r"\b", r"(?<![\w$])" + _NAME + r"\b"),
    "analysis.code.site:_explicit_raise": (r"(?<![\w$.])(?:throw|raise)\s+(?:new\s+)?(?:[\w$]+\.)*" + _NAME + r"\b",),
    "analysis.code.site:is_throwable_class": (
        r"\bclass\s+" + _NAME + r"\b[^{]*?(?:extends|:|\()\s*[\w.]*(?:Exception|Error)\b",),
    "analysis.code.source:Source._head": (r"(?<![\w$.])(" + IDENT + r")\s*\(",),
    "analysis.code.source:Source.assignment": (
        r"(?:^|[\s,(])" + _NAME + r"\s*+(?::[^=]{1,200}+)?=(?!=)|\bfor\s++(?:[\w,\s]{0,60}\b)?" + _NAME
        + r"\b[\w,\s]{0,60}\bin\b|\bas\s++" + _NAME + r"\b|\b" + _NAME + r"\s*+,[\w\s,]{0,200}+=(?!=)",
        r"\b" + _NAME + r"\b(?:\s*,\s*\w+)*\s*:?=(?!=)|\bvar\s+" + _NAME + r"\b|\bfor\s+(?:\w+\s*,\s*)?" + _NAME
        + r"\b.*:=",
        r"(?<![\w$.])" + _NAME + r"\s*(?:[+\-*/|&]?=)(?!=)|(?:[\w$]>?|\])\s+" + _NAME + r"\s*[;:=,]|\bcatch\s*\([^)]*\b"
        + _NAME + r"\s*\)"),
    "analysis.code.source:_self_derived": (r"(?<![\w$.])" + _NAME + r"\s*([+\-*/|&]?)=(?!=)(.*)",),
    "analysis.code.value:from_params": (r"(?<![\w$.])" + _NAME + r"\s*=(?!=)(.*)",),
}
# Slow rules whose owners are replacing them, each expected to fail until its entry goes: none today.
_OWNED_ELSEWHERE: dict[str, str] = {}
_RE_FUNCTIONS = frozenset({"compile", "match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer"})


@dataclass(frozen=True)
class _Found:
    where: str
    pattern: str
    flags: int
    engine: str = "re"


def _modules() -> Iterator[ModuleType]:
    for package in _PACKAGES:
        root = importlib.import_module(package)
        yield root
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not info.name.endswith(".__main__"):  # running it is what importing it does
                yield importlib.import_module(info.name)


def _compiled_in(value: Any, seen: set[int], depth: int = 0) -> Iterator[re.Pattern[str] | Any]:
    """Compiled patterns reachable from a module-level value."""
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern | regex.Pattern):
        yield value
    elif isinstance(value, tuple | list | frozenset | set):
        for item in value:
            yield from _compiled_in(item, seen, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _compiled_in(item, seen, depth + 1)
    elif isinstance(value, MethodType) or type(value).__name__ == "builtin_function_or_method":
        yield from _compiled_in(getattr(value, "__self__", None), seen, depth + 1)
    elif isinstance(value, FunctionType):
        for cell in value.__closure__ or ():
            yield from _compiled_in(cell.cell_contents, seen, depth + 1)
    elif hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        for name in value.__dataclass_fields__:
            yield from _compiled_in(getattr(value, name, None), seen, depth + 1)


def _runtime_patterns() -> list[_Found]:
    found: list[_Found] = []
    for module in _modules():
        seen: set[int] = set()
        for name, value in vars(module).items():
            for compiled in _compiled_in(value, seen):
                engine = "regex" if isinstance(compiled, regex.Pattern) else "re"
                found.append(_Found(f"{module.__name__}.{name}", compiled.pattern, compiled.flags, engine))
    return found


class _Sites(ast.NodeVisitor):
    """`re.X(...)` and `regex.X(...)` calls: their literal patterns, and the ones built at run time."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.literal: list[_Found] = []
        self.dynamic: set[str] = set()

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in ("re", "regex") and func.attr in _RE_FUNCTIONS and node.args):
            where = f"{self.module}:{'.'.join(self.scope)}"
            try:
                pattern = ast.literal_eval(node.args[0])
            except ValueError:
                self.dynamic.add(where)
            else:
                self.literal.append(_Found(where, pattern, _literal_flags(node)))
        self.generic_visit(node)


def _literal_flags(node: ast.Call) -> int:
    flags = 0
    for arg in [*node.args[1:], *(k.value for k in node.keywords if k.arg == "flags")]:
        for part in ast.walk(arg):
            if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.value.id == "re":
                value = getattr(re, part.attr, 0)
                flags |= value if isinstance(value, int) else 0
    return flags


def _source_sites() -> tuple[list[_Found], set[str]]:
    literal: list[_Found] = []
    dynamic: set[str] = set()
    for package in _PACKAGES:
        for path in sorted((_ROOT / package).rglob("*.py")):
            if path.name == "__main__.py":
                continue
            module = ".".join(path.relative_to(_ROOT).with_suffix("").parts).removesuffix(".__init__")
            sites = _Sites(module)
            sites.visit(ast.parse(path.read_text(encoding="utf-8")))
            literal += sites.literal
            dynamic |= sites.dynamic
    return literal, dynamic


def _all_patterns() -> list[_Found]:
    literal, _ = _source_sites()
    samples = [_Found(where, pattern, 0) for where, patterns in _SAMPLES.items() for pattern in patterns]
    unique: dict[tuple[str, int], _Found] = {}
    for found in [*_runtime_patterns(), *literal, *samples]:
        unique.setdefault((found.pattern, _compile(found).flags), found)
    return sorted(unique.values(), key=lambda f: f.where)


# ---------------------------------------------------------------- hostile inputs


def _class_chars(items: list[tuple[Any, Any]]) -> str:
    """A few characters a character class accepts (or, negated, does not exclude)."""
    from re import _constants as c

    negate = any(op is c.NEGATE for op, _ in items)
    members: list[str] = []
    for op, value in items:
        if op is c.LITERAL:
            members.append(chr(value))
        elif op is c.RANGE:
            low, high = value
            members += [chr(low), chr((low + high) // 2), chr(high)]
        elif op is c.CATEGORY:
            members += {
                c.CATEGORY_DIGIT: "09", c.CATEGORY_SPACE: " \n\t", c.CATEGORY_WORD: "a_Z9\u00e9",
                c.CATEGORY_NOT_DIGIT: "a ", c.CATEGORY_NOT_SPACE: "a-", c.CATEGORY_NOT_WORD: " -.",
            }.get(value, "a")
    if not negate:
        return "".join(dict.fromkeys(members))
    excluded = set(members)
    return "".join(ch for ch in "a -.[]/\"'0\n:(" if ch not in excluded)[:6]


def _pieces(tree: Any) -> tuple[list[str], list[str]]:
    """(openers, class characters): runs of literals and characters classes accept, in pattern order."""
    from re import _constants as c

    openers: list[str] = []
    chars: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            openers.append("".join(run))
            run.clear()

    def walk(items: Any) -> None:
        for op, value in items:
            if op is c.LITERAL:
                run.append(chr(value))
                continue
            flush()
            if op is c.IN:
                chars.extend(_class_chars(value))
            elif op is c.ANY:
                chars.extend("a \x00")
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                walk(value[2])
            elif op is c.SUBPATTERN:
                walk(value[-1])
            elif op is c.BRANCH:
                for branch in value[1]:
                    walk(branch)
                    flush()
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(value[1])
            elif op is c.ATOMIC_GROUP:
                walk(value)
        flush()

    walk(tree)
    return list(dict.fromkeys(openers)), list(dict.fromkeys(chars))


def _inputs(pattern: str, flags: int) -> dict[str, tuple[str, str]]:
    """Named hostile inputs, each as (head, unit): the text is head + unit repeated to the size."""
    from re import _parser

    openers, chars = _pieces(_parser.parse(pattern, flags & ~re.VERBOSE))
    inputs: dict[str, tuple[str, str]] = {}
    for ch in dict.fromkeys([*chars, *_SEPARATORS]):
        inputs[f"run of {ch!r}"] = ("", ch)
    # Openers times classes grows fast for long alternations: the first few of each are representative.
    for opener in openers[:_COMBINED]:
        inputs[f"repeated opener {opener!r}"] = ("", opener)
        inputs[f"opener {opener!r} and space"] = ("", opener + " ")
        for ch in chars[:_COMBINED]:
            inputs[f"opener {opener!r} then run of {ch!r}"] = (opener, ch)
            inputs[f"repeated opener {opener!r} with {ch!r}"] = ("", opener + ch)
    for first, second in itertools.pairwise(chars):
        inputs[f"alternating {first!r}{second!r}"] = ("", first + second)
    return inputs


def _text(head: str, unit: str, size: int) -> str:
    return (head + unit * ((size - len(head)) // len(unit) + 1))[:size]


def _scan(compiled: Any, text: str) -> None:
    for _ in compiled.finditer(text):
        pass


def _fails(before_size: int, before_s: float, size: int, elapsed: float) -> bool:
    grown = bool(before_size) and superlinear(before_s, elapsed, size / before_size)
    return grown or (size == _SIZE and over_budget(elapsed, _BUDGET_S))


def _grown(compiled: Any, head: str, unit: str, steps: tuple[int, ...]) -> tuple[str, float]:
    """Where the input's CPU time grew faster than four times linear from one size to the next, or went over
    its budget at 1 MB (empty when neither), and its time at the last size."""
    before_size, before_s = 0, 0.0
    for size in steps:
        fails = partial(_fails, before_size, before_s, size)
        elapsed = least_cpu_seconds(partial(cpu_seconds, partial(_scan, compiled, _text(head, unit, size))), fails)
        if fails(elapsed):
            return (f"{elapsed:.3f}s at {size:,} chars against {before_s:.3f}s at {before_size:,} (budget at 1 MB:"
                    f" {_BUDGET_S} s)", elapsed)
        before_size, before_s = size, elapsed
    return "", before_s


def _superlinear_input(found: _Found) -> str:
    """The first input whose CPU time grows faster than four times linear from one size to the next, or is
    over budget at 1 MB, described; empty when there is none.

    Every input runs at 256 B, 2 kB and 16 kB (a quadratic rule's time has grown 64-fold by then, once
    over the noise floor); the slowest few then run at 16 kB, 128 kB and 1 MB.
    """
    compiled = _compile(found)
    at_largest: dict[str, float] = {}
    inputs = _inputs(found.pattern, found.flags)
    for steps, names in ((_SCREEN_STEPS, list(inputs)), (_FULL_STEPS, None)):
        if names is None:
            names = sorted(at_largest, key=at_largest.__getitem__)[-_FULL_INPUTS:]
        for name in names:
            grown, at_largest[name] = _grown(compiled, *inputs[name], steps)
            if grown:
                return f"{name}: {grown}"
    return ""


def _compile(found: _Found) -> Any:
    return re.compile(found.pattern, found.flags)


_PATTERNS = _all_patterns()


def _params() -> list[Any]:
    params = []
    for found in _PATTERNS:
        owner = _OWNED_ELSEWHERE.get(found.pattern)
        marks = [pytest.mark.xfail(reason=owner, strict=True)] if owner else []
        params.append(pytest.param(found, marks=marks, id=f"{found.where}:{found.pattern[:40]}"))
    return params


class TestEveryRegexIsLinear:
    def test_patterns_are_found(self) -> None:
        """The discovery sees the rules this suite exists for (a broken walk would pass vacuously)."""
        where = {found.where.partition(":")[0].rsplit(".", 1)[0] for found in _PATTERNS}
        assert {"analysis.intake.redact_rules", "analysis.intake.template", "analysis.intake.frame_key",
                "analysis.agent.prompt", "store.hygiene"} <= where
        assert len(_PATTERNS) > 100

    def test_every_dynamic_call_site_is_accounted_for(self) -> None:
        """A regex built at run time is listed with what bounds it, so a new one cannot slip past."""
        _, dynamic = _source_sites()
        unexplained = sorted(dynamic - _DYNAMIC.keys())
        assert not unexplained, f"add these call sites to _DYNAMIC (and _SAMPLES when on `re`): {unexplained}"
        assert not (_DYNAMIC.keys() - dynamic), "_DYNAMIC lists call sites that no longer exist"

    @pytest.mark.parametrize("found", _params())
    def test_a_hostile_megabyte_costs_linear_time(self, found: _Found) -> None:
        """The slowest hostile inputs, up to 1 MB, in CPU time on one core."""
        grown = _superlinear_input(found)
        assert not grown, f"{found.where} {found.pattern!r}: {grown}"
