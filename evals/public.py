"""Grouping on public data nobody here wrote: Sentry's grouping fixtures, loghub, Defects4J traces in mixed
field shapes. Each corpus is read from a checkout (the `--corpora` folder of `python -m evals`, default
`../shared/corpora` beside the project, or one path per corpus) and skipped, saying so, when it is not there.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evals import loghub, sentry, shapes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per corpus, beside `python -m evals --corpora` (the folder holding them all)."""
    parser.add_argument("--sentry", type=Path, help="Sentry grouping fixtures (default: CORPORA/sentry)")
    parser.add_argument("--loghub", type=Path, help="loghub 2k samples (default: CORPORA/loghub)")
    parser.add_argument("--defects4j", type=Path, help="Defects4J traces (default: CORPORA/defects4j)")


def run(args: argparse.Namespace) -> None:
    """Print the three tables (or why one was skipped)."""
    for name, report in (("sentry", print_sentry), ("loghub", print_loghub), ("defects4j", print_shapes)):
        folder = getattr(args, name) or args.corpora / name
        print()
        if not folder.is_dir():
            print(f"{name}: skipped, no corpus at {folder} (give --{name} PATH or --corpora PATH)")
            continue
        report(folder)


def _pct(value: float) -> str:
    return f"{100 * value:5.1f}%"


def print_sentry(folder: Path) -> None:
    """Frame agreement per platform, pairwise scores, and every disagreement with its reason."""
    report = sentry.evaluate(folder)
    print("Sentry grouping fixtures (converted to the native shape)")
    platforms = sorted({v.platform for v in report.verdicts}, key=lambda p: (p in sentry.APART, p))
    print(f"  {'platform':11} {'fixtures':>8} {'frames agree':>12}")
    for platform in platforms:
        verdicts = [v for v in report.verdicts if v.platform == platform]
        apart = " (reported apart)" if platform in sentry.APART else ""
        print(f"  {platform:11} {len(verdicts):>8} {sum(v.agrees for v in verdicts):>12}{apart}")
    scope = report.in_scope()
    agreed = sum(v.agrees for v in scope)
    print(f"  frame agreement on the platforms Log Agent parses: {agreed}/{len(scope)} = {_pct(agreed / len(scope))}")
    for label, score in (("all counted fixtures", report.pairs),
                         ("fixtures the native shape can tell apart", report.pairs_expressible)):
        print(f"  pairwise, {label}: precision {_pct(score.precision)} recall {_pct(score.recall)} "
              f"({score.true_pos} pairs together, {score.false_pos} wrongly, {score.false_neg} missed)")
    for verdict in report.verdicts:
        if not verdict.agrees:
            print(f"  frames differ: {verdict.case} [{verdict.platform}]: {verdict.reason}")
    for kind, first, second, why in report.disagreeing_pairs:
        print(f"  pair {kind}: {first} + {second}: {why}")
    for note in report.left_out:
        print(f"  left out: {note}")


def print_loghub(folder: Path) -> None:
    """Grouping accuracy per system, Log Agent beside Drain3."""
    scores = loghub.evaluate(folder)
    print("loghub 2k samples: grouping accuracy (Log Agent's message templates vs Drain3, same run)")
    print(f"  {'system':12} {'lines':>5} {'templates':>9} {'Log Agent':>9} {'Drain3':>7} {'groups':>6} {'drain3':>6}")
    for s in scores:
        drain3 = "n/a" if s.drain3 is None else f"{s.drain3:.3f}"
        print(f"  {s.system:12} {s.lines:>5} {s.templates:>9} {s.logagent:>9.3f} {drain3:>7} {s.logagent_groups:>6} "
              f"{s.drain3_groups:>6}")
    if scores:
        ours = sum(s.logagent for s in scores) / len(scores)
        theirs = [s.drain3 for s in scores if s.drain3 is not None]
        drain3_mean = f"{sum(theirs) / len(theirs):.3f}" if theirs else "n/a (install the bench extra)"
        print(f"  mean: Log Agent {ours:.3f}, Drain3 {drain3_mean}; lowest: Log Agent "
              f"{min(s.logagent for s in scores):.3f} ({min(scores, key=lambda s: s.logagent).system})")


def print_shapes(folder: Path) -> None:
    """Per layout: bugs whose fingerprint and analysis match the canonical layout's."""
    scores = shapes.evaluate(folder)
    print("Mixed-field shapes: Defects4J traces through `logagent fingerprint` and `logagent analyze --offline`")
    print(f"  {'layout':32} {'bugs':>4} {'same fingerprint':>16} {'analysed':>8} {'same culprit':>12} "
          f"{'culprit in fix':>14}")
    for s in scores:
        print(f"  {s.layout:32} {s.bugs:>4} {s.same_fingerprint:>16} {s.analysed:>8} {s.same_culprit:>12} "
              f"{s.culprit_in_fix:>14}")
