"""`python -m bench --quick|--full [names...]`: run the benchmarks, one result line per benchmark.

`--profile` prints where Log Agent's grouping time goes (cProfile, own time) instead of benchmarking.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from datetime import UTC, datetime

from bench.timing import load_average

BENCHMARKS = ("grouping", "floor", "startup", "e2e", "redaction", "llm_calls", "memory", "footprint", "scale",
              "bounded")


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks (all by default); exit 1 when any failed."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes, under a minute in all (default)")
    size.add_argument("--full", action="store_true", help="full sizes (100k+ events, 100k rows)")
    parser.add_argument("--profile", action="store_true", help="profile the grouping hot path and exit")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run: {', '.join(BENCHMARKS)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    # LanceDB's Rust core logs a deprecation warning per query at WARN; it would bury the results.
    os.environ.setdefault("LANCE_LOG", "error")
    if args.profile:
        from bench.grouping import profile

        print(profile())
        return 0
    quick = not args.full
    print(f"# {'quick' if quick else 'full'} run, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} cores, load average {load_average()}, Python {platform.python_version()}",
          flush=True)
    failed = 0
    for name in args.names or BENCHMARKS:
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"bench.{name}")
            line = module.bench(quick)
        except Exception as error:  # one broken benchmark must not hide the others' results
            failed += 1
            line = f"{name}: FAILED {type(error).__name__}: {error}"
        print(f"{line}  [{time.perf_counter() - started:.1f}s]", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
