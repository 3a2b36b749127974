"""Every cache of the product is bounded in bytes, found programmatically so a new one cannot be forgotten.

The source of `consumer/`, `analysis/` and `store/` may not use `functools.lru_cache` (bounded by count
only); a module-level table that functions fill at run time must be a `BoundedCache` or be listed below
with what bounds it. Hostile messages then go through the intake path and every cache stays within its
budget. RSS on gigabytes of such input is measured by `bench/bounded.py` (docs/reliability.md).
"""

from __future__ import annotations

import ast
import gc
import importlib
import tracemalloc
from pathlib import Path

import orjson

from analysis.cache import cache_bytes
from analysis.intake.decode import _PLANS, DecodeConfig
from analysis.intake.quick_key import KeyCache
from analysis.intake.redact import Redactor
from bench.bounded import SHAPES, hostile_message
from consumer.keying import KeyReader
from consumer.window import BurstWindow
from consumer.window_stage import sample_builder

_ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("consumer", "analysis", "store")
# Module-level tables filled at run time that are not BoundedCaches, and what bounds them.
_BOUNDED_BY_CONSTRUCTION = {
    "analysis/intake/field.py:_SECONDS": "4,096 keys of 19 characters (an ISO second), then cleared",
    "analysis/intake/field.py:_PLAIN_SECONDS": "cleared with _SECONDS",
    "analysis/intake/redact.py:_prefilter": "one compiled rule set per set of kinds configured: eight at most",
    "analysis/intake/redact.py:_warn_unkeyed": "no arguments: one entry",
    "analysis/intake/redact_rules.py:_card_sizes": "4,096 tuples of at most five ints",
    "analysis/intake/redact_rules.py:_valid_card": "4,096 numbers of 13 to 19 digits",
}
_TOTAL_BUDGET = 400 << 20  # docs/reliability.md: what the intake caches may hold, all together
_UNBOUNDED = frozenset({"lru_cache", "cache"})  # functools' memo decorators
_MUTATORS = frozenset({"append", "add", "setdefault", "update", "pop", "popitem", "clear", "insert", "extend"})


def _sources() -> list[Path]:
    return sorted(path for package in _PACKAGES for path in (_ROOT / package).rglob("*.py"))


def _module_tables(tree: ast.Module) -> set[str]:
    """Names bound at module level to an empty (or literal) dict, list, set or OrderedDict."""
    tables = set()
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        if target is None or value is None:
            continue
        call = isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute)
        name = (value.func.id if isinstance(value.func, ast.Name) else value.func.attr) if call else ""  # type: ignore[union-attr]
        if isinstance(value, ast.Dict | ast.List | ast.Set) or name in ("dict", "list", "set", "OrderedDict"):
            tables.add(target)
    return tables


def _filled_at_run_time(tree: ast.Module, tables: set[str]) -> set[str]:
    """Which of `tables` a function writes to: `T[k] = v`, `T.append(...)` and the like."""
    filled = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
                base = node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in _MUTATORS):
                base = node.func.value
            else:
                continue
            if isinstance(base, ast.Name) and base.id in tables:
                filled.add(base.id)
    return filled


class TestNoUnboundedCache:
    def test_no_lru_cache_in_the_product(self) -> None:
        """`functools.lru_cache` bounds entries only; `analysis.cache.memoize` bounds bytes as well."""
        found = []
        for path in _sources():
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                    where = f"{path.relative_to(_ROOT).as_posix()}:{node.name}"
                    if name in _UNBOUNDED and where not in _BOUNDED_BY_CONSTRUCTION:
                        found.append(where)
        assert not found, f"use analysis.cache.memoize instead: {found}"

    def test_every_table_filled_at_run_time_is_bounded(self) -> None:
        """A module-level dict, list or set that functions fill is a cache: it must say what bounds it."""
        unexplained = []
        for path in _sources():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name in _filled_at_run_time(tree, _module_tables(tree)):
                key = f"{path.relative_to(_ROOT).as_posix()}:{name}"
                if key not in _BOUNDED_BY_CONSTRUCTION:
                    unexplained.append(key)
        assert not unexplained, f"make these BoundedCaches or list what bounds them: {unexplained}"

    def test_the_scan_sees_a_table_filled_at_run_time(self) -> None:
        """The check above can fail: a module-level dict written by a function is found."""
        tree = ast.parse("SEEN = {}\nCONST = {'a': 1}\ndef f(k):\n    SEEN[k] = 1\n    return CONST[k]\n")
        assert _filled_at_run_time(tree, _module_tables(tree)) == {"SEEN"}

    def test_the_caches_budgets_add_up_to_the_documented_total(self) -> None:
        """Every cache of the intake path, the redactor's included, is registered with a byte budget."""
        for package in ("analysis.intake.decode", "analysis.intake.signature", "analysis.intake.stacktrace",
                        "analysis.intake.template", "analysis.intake.structured"):
            importlib.import_module(package)
        redactor = Redactor()
        keys = KeyCache(DecodeConfig(), redactor)  # the key stage's, one per service
        # Caches of a class are summed over its live instances, and tests keep several key caches alive.
        budgets = {name: budget for name, (_, budget) in cache_bytes().items()
                   if not name.startswith(("test.", "quick_key."))}
        budgets |= {cache.name: cache.max_bytes for cache in (keys._entries, keys._layouts, keys._messages)}
        assert {"structured.frames", "decode.plans", "signature.by_frame", "signature.frame_facts",
                "stacktrace.skeletons", "template.spans", "trace_java.frame", "redact.texts", "redact.lines",
                "redact.frames"} <= set(budgets)
        shared = sum(budget for name, budget in budgets.items() if not name.startswith("redact."))
        # One redactor's own caches.
        per_redactor = redactor._texts.max_bytes + redactor._lines.max_bytes + redactor._frames.max_bytes
        # The service has two redactors: the pipeline's, and the explainer's for prompts and reports.
        assert shared + 2 * per_redactor <= _TOTAL_BUDGET


class TestHostileInputStaysInBudget:
    def test_distinct_large_messages_of_every_shape_keep_each_cache_in_its_budget(self) -> None:
        """Three rounds of every hostile shape (256 kB each) through decode, redact, fingerprint, window."""
        redactor, decode = Redactor(), DecodeConfig()
        reader = KeyReader(decode, redactor)
        window = BurstWindow(30.0, 300.0, 10_000, 20, sample_builder(decode, redactor), max_open_bytes=2 << 20)
        for offset in range(3 * len(SHAPES)):
            raw = hostile_message(offset, 256 * 1024)
            for index, sighting in enumerate(reader.read_sightings(raw, received_at=0.0)):
                window.add(sighting, (raw, index, sighting.timestamp), (("errors", 0), offset), sighting.timestamp)
            assert window.open_bytes <= window.max_open_bytes or window.open_count == 1  # one burst may be over
            for name, (used, budget) in cache_bytes().items():
                assert used <= budget, f"{name}: {used} bytes charged, budget {budget}"
        assert window.open_count < 3 * len(SHAPES)  # the byte budget closed some bursts early

    def test_what_the_key_cache_keeps_alive_is_charged(self) -> None:
        """Events of one failure, each with its own set of long scalar fields (the skeleton is a tuple of
        the layout and the values): once the other caches dropped the layouts, what the key cache's entries
        keep alive is within what they are charged (the layout was not charged: 408 MiB real for 2.6 MB
        charged on 2,000 such events)."""
        cache = KeyCache(DecodeConfig(), Redactor())
        events = []
        for i in range(600):
            doc: dict[str, object] = {"server_id": "s", "timestamp": 1.0, "message": "boom", "exception": {
                "type": "E", "value": "v",
                "stacktrace": [{"filename": "app.py", "function": "f", "lineno": 1, "in_app": True}]}}
            doc.update({f"k{i}_{j}_" + "x" * 1000: 1 for j in range(10)})
            events.append(orjson.dumps(doc))
        gc.collect()
        tracemalloc.start()
        try:
            for raw in events:
                cache.read(raw, 1.0)
            del raw
            _PLANS.clear()  # white box: the caches that also hold layouts let go of them
            cache._layouts.clear()
            gc.collect()
            alive, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        charged = cache._entries.nbytes
        assert alive <= 1.5 * charged + (1 << 20), f"{alive} bytes kept alive by the entries, {charged} charged"
