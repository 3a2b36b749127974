"""`python -m evals [--small] [--live] [--corpora PATH] [--peers]`: grouping, localisation and redaction
quality, printed as tables.

`--corpora` names the folder of public corpora (default `../shared/corpora` beside the project, skipped
when absent): without `--small`, grouping reads Sentry's fixtures, loghub and Defects4J from it (see
`evals.public`), localisation runs on its `defects4j` corpus, redaction on the others. `--peers` scores
detect-secrets and Kingfisher on the redaction corpus when they are installed (`make bench-deps`).

`--live` re-records the agent's cassettes against the real Ollama at LOGAGENT_OLLAMA__URL, with the
model of LOGAGENT_AGENT__MODEL.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from consumer.settings import Settings
from evals import defects4j, grouping, localisation, public, redaction

_CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"


def _pct(value: float) -> str:
    return f"{100 * value:5.1f}%"


def print_grouping(report: grouping.GroupingReport) -> None:
    """The grouping table: pairwise precision and recall overall and per language."""
    print(f"Grouping ({report.occurrences} events, {report.overall.groups} true groups)")
    print(f"  {'language':10} {'precision':>9} {'recall':>8} {'groups':>6} {'found':>6}")
    for name, score in [*report.by_language.items(), ("ALL", report.overall)]:
        print(f"  {name:10} {_pct(score.precision):>9} {_pct(score.recall):>8} {score.groups:>6} "
              f"{score.predicted:>6}")
    print(f"  split: {', '.join(report.split) or 'none'}")
    print(f"  merged: {', '.join(f'{a}+{b}' for a, b in report.merged) or 'none'}")


def print_localisation(report: localisation.LocalisationReport) -> None:
    """The localisation table: per case, then per analyzer."""
    print("Localisation (real traces from real runs of buggy code)")
    print(f"  {'case':28} {'kind':14} {'analyzer':9} {'top1':>4} {'top3':>4} {'dist':>4}  {'status':10} predicted")
    for v in report.verdicts:
        if v.analyzer == "naive":
            continue
        distance = "-" if v.line_distance is None else str(v.line_distance)
        print(f"  {v.case:28} {v.kind:14} {v.analyzer:9} {'yes' if v.top1 else 'no':>4} "
              f"{'yes' if v.top3 else 'no':>4} {distance:>4}  {v.status:10} {v.predicted}")
    for elsewhere, label in ((False, "fix in the trace"), (True, "fix not in the trace")):
        for analyzer in ("heuristic", "no-history", "naive", "agent"):
            s = localisation.summarise(analyzer, report.verdicts, elsewhere)
            if s.cases:
                median = "-" if s.median_line_distance is None else f"{s.median_line_distance:g}"
                print(f"  {label:20} {analyzer:10} cases {s.cases:2}  top-1 {_pct(s.top1)}  top-3 {_pct(s.top3)}  "
                      f"median line distance {median}  exact line {s.exact_lines}/{s.cases}")
    for note in report.skipped:
        print(f"  skipped: {note}")
    for path in report.recorded:
        print(f"  recorded: {path.name}")


def print_defects4j(report: defects4j.Defects4jReport) -> None:
    """The Defects4J table: per tier and event shape, the localiser and the naive rule side by side."""
    print("Localisation on Defects4J (real Java bugs, traces recorded by running the failing tests)")
    print(f"  {'tier':14} {'shape':8} {'bugs':>4}  {'analyzer':9} {'top-1':>6} {'top-3':>6} {'exact line':>10} "
          f"{'median dist':>11}")
    for tier in defects4j.TIERS:
        for shape in defects4j.SHAPES:
            for analyzer in ("localiser", "naive"):
                s = report.summary(tier, shape, analyzer)
                if s.cases:
                    median = "-" if s.median_distance is None else f"{s.median_distance:g}"
                    print(f"  {tier:14} {shape:8} {s.cases:4}  {analyzer:9} {_pct(s.top1):>6} {_pct(s.top3):>6} "
                          f"{f'{s.exact}/{s.right_file}':>10} {median:>11}")
    print(f"  {report.seconds:.0f} s for {len(report.scores) // 2} analyses; exact line and median distance are "
          "over the bugs whose first file is right")
    for tier, (exact, bugs, best) in report.bound.items():
        shown = "-" if best is None else f"{best:g}"
        print(f"  {tier}: the best line the trace names in a fixed file is a patched line in {exact} of {bugs} "
              f"bugs (median distance {shown})")
    for note in report.skipped:
        print(f"  skipped: {note}")


def print_redaction(report: redaction.RedactionReport) -> None:
    """The redaction tables: the corpus per kind, negatives, real data, peers."""
    product = report.product
    print(f"Redaction ({product.positives} labelled spellings, {product.negatives} negatives)")
    for score in (product, *report.peers):
        print(f"  {score.name:15} recall {_pct(score.recall)} ({score.caught}/{score.positives})  negatives touched "
              f"{len(score.touched)}/{score.negatives}  {score.micros_per_text:8.1f} us/text")
    print(f"  {'kind':22} {'cases':>5} {'caught':>6}")
    for kind, (total, caught) in product.by_kind.items():
        print(f"  {kind:22} {total:5} {caught:6}")
    for case in product.missed:
        print(f"  missed: {case.kind}: {case.text[:100]!r}")
    for negative, out in product.touched:
        print(f"  touched: {negative.group}: {negative.text[:60]!r} -> {out[:60]!r}")
    print(f"  prefilter differs from every rule in turn on {len(report.prefilter_mismatches)} texts")
    for real in report.real:
        kinds = ", ".join(f"{kind} {count}" for kind, count in real.kinds.most_common()) or "none"
        print(f"  {real.source:10} {real.changed}/{real.texts} texts changed; placeholders: {kinds}; "
              f"credential placeholders {real.credential_placeholders}; host names still spelling a public "
              f"address {len(real.addresses_left)}")
        for text in real.addresses_left[:3]:
            print(f"    left: {text[:120]!r}")
    for note in report.skipped:
        print(f"  skipped: {note}")


def main(argv: list[str] | None = None) -> int:
    """Run both evaluations and print their tables."""
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__)
    parser.add_argument("--small", action="store_true", help="the fast subset `make test` runs")
    parser.add_argument("--live", action="store_true", help="re-record cassettes against a real Ollama")
    parser.add_argument("--corpora", type=Path, default=_CORPORA, help="public corpora folder (loghub, sentry, ...)")
    parser.add_argument("--peers", action="store_true", help="also score detect-secrets and Kingfisher")
    public.add_arguments(parser)
    args = parser.parse_args(argv)
    live_url = None
    model = "qwen2.5-coder:7b"
    if args.live:
        settings = Settings()
        if not settings.ollama.url:
            parser.error("--live needs LOGAGENT_OLLAMA__URL")
        live_url, model = settings.ollama.url, settings.agent.model
    print_grouping(grouping.evaluate(small=args.small))
    if not args.small:
        public.run(args)
    print()
    print_localisation(localisation.evaluate(small=args.small, live_url=live_url, model=model))
    print()
    corpus = args.defects4j or args.corpora / "defects4j"
    if not args.small and corpus.is_dir():
        print_defects4j(defects4j.evaluate(corpus))
        print()
    elif not args.small:
        print(f"Localisation on Defects4J skipped: no corpus at {corpus}\n")
    print_redaction(redaction.evaluate(args.corpora if args.corpora.is_dir() else None, peers=args.peers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
