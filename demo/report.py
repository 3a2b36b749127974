"""What the demo prints: one line per stage as it happens (a live count while consuming), then the bursts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from analysis.report import Analysis
from demo.services import SampleService
from demo.stream import SampleStream

if TYPE_CHECKING:
    from rich.status import Status

    from demo.run import DemoResult

__all__ = [
    "ConsoleProgress", "Progress", "analyses_line", "broker_line", "bursts", "consumed_line", "dlq_line",
    "kept_lines", "produced_line", "repos_line", "summarize", "timed_out_line",
]  # fmt: skip


class Progress(Protocol):
    """Where the demo reports its stages as they happen."""

    def stage(self, line: str) -> None:
        """One stage is done: `line` says what it did."""
        ...

    def consuming(self, read: int, total: int, published: int) -> None:
        """The live count while the service consumes (called a few times a second)."""
        ...


class QuietProgress:
    """Reports nothing (tests, and callers that print the summary only)."""

    def stage(self, line: str) -> None:
        """Nothing."""

    def consuming(self, read: int, total: int, published: int) -> None:
        """Nothing."""


class ConsoleProgress:
    """Stage lines on `out`; on a terminal a live count while consuming (rich), elsewhere none."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console  # rich loads only when the demo prints

        self._console = Console(file=out, force_terminal=out.isatty(), highlight=False, markup=False,
                                emoji=False, soft_wrap=True)
        self._status: Status | None = None

    def stage(self, line: str) -> None:
        """Print `line`, ending the live count if one is showing."""
        self.close()
        self._console.print(line)

    def consuming(self, read: int, total: int, published: int) -> None:
        """Update the live count (terminal only)."""
        if not self._console.is_terminal:
            return
        text = f"consuming  {read}/{total} messages read, {published} analyses published"
        if self._status is None:
            self._status = self._console.status(text)
            self._status.start()
        else:
            self._status.update(text)

    def close(self) -> None:
        """Remove the live count."""
        if self._status is not None:
            self._status.stop()
            self._status = None


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _total(values: Sequence[str]) -> str:
    """`3: a 2, b 1`, or `0` alone."""
    counts = ", ".join(f"{value} {n}" for value, n in sorted(Counter(values).items()))
    return f"{len(values)}: {counts}" if values else "0"


def broker_line(bootstrap_servers: str) -> str:
    """The broker stage."""
    return f"  broker     tansu up on {bootstrap_servers} (embedded, in memory; stopped when the demo ends)"


def repos_line(services: Mapping[str, SampleService], where: Path | None = None) -> str:
    """The repositories stage."""
    listed = ", ".join(f"{s.server_id} ({s.language}, {_plural(len(s.commits), 'commit')})"
                       for s in services.values())
    return f"  repos      {listed}" + (f" in {where}" if where else "")


def produced_line(stream: SampleStream) -> str:
    """The producing stage."""
    return (f"  produced   {stream.event_count} events in {len(stream.messages)} messages "
            f"({stream.malformed_count} malformed), forming {len(stream.bursts)} bursts")


def consumed_line(read: int, elapsed_s: float, drained: bool) -> str:
    """The consuming stage, once over."""
    return (f"  consumed   {read} messages in {elapsed_s:.1f}s"
            + ("" if drained else "  (TIMED OUT before the stream was drained)"))


def timed_out_line(read: int, messages: int, published: int, timeout_s: float) -> str:
    """Why the demo exits 1 (said on stderr): the timeout passed before the stream was drained."""
    return (f"demo timed out after {timeout_s:g}s, before the stream was drained ({read} of {messages} messages "
            f"read, {published} analyses published); give it longer with --timeout")


_STATUS_MEANS = {
    "analyzed": "the model read the code at the deployed commit",
    "heuristic": "the deterministic localiser alone, without a model (LOGAGENT_OLLAMA_URL names one)",
    "recurrence": "a failure analysed before at this commit, answered from the error memory",
    "failed": "no analysis: the reason is in the event's failure_reason",
}


def analyses_line(analyses: Sequence[Analysis]) -> str:
    """The analyses, by status, then a line saying what each status shown means."""
    statuses = [a.status for a in analyses]
    return f"  analyses   {_total(statuses)}" + "".join(
        f"\n             {status}: {_STATUS_MEANS[status]}" for status in sorted(set(statuses)))


def dlq_line(reasons: Sequence[str]) -> str:
    """The dead-letter queue, by reason."""
    return f"  DLQ        {_total(reasons)}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def bursts(analyses: Sequence[Analysis]) -> list[str]:
    """Each burst's analysis in a few lines: server, type, count, status, culprit and root cause."""
    lines: list[str] = []
    for analysis in sorted(analyses, key=lambda a: (a.cluster.server, a.cluster.first_seen)):
        cluster = analysis.cluster
        culprit = analysis.culprit
        where = (f"{culprit.path}:{culprit.line or '?'} {culprit.function}".rstrip() if culprit
                 else "none")
        distinct = len(cluster.exception_messages)
        messages = f", {distinct} distinct messages" if distinct > 1 else ""
        lines.append(f"* {cluster.server}  {cluster.exception_type or '(a log message, no exception)'}  "
                     f"x{cluster.count}{messages}  [{analysis.status}] at {(analysis.commit or '?')[:8]}")
        lines.append(f"    culprit     {where}")
        # The heuristic localiser appends its code excerpt to the root cause; the culprit line says where.
        cause = analysis.root_cause.split("\n\nCode at ", 1)[0] or analysis.failure_reason or ""
        if cause:
            lines.append(f"    root cause  {_one_line(cause, 160)}")
    return lines


def kept_lines(keep: Path, events: Mapping[str, Path]) -> list[str]:
    """Where the kept files are (those there: a demo that timed out may have made no memory yet), and the
    commands that read them next."""
    kept = [text for name, text in _KEPT if (keep / name).exists()]
    if not kept:
        return []
    listed = ", ".join(kept[:-1]) + (", and " if len(kept) > 1 else "") + kept[-1]
    commands = []
    first = next(iter(sorted(events.items())), None)
    if first is not None and (keep / "samples").is_dir():
        server = first[0].split("--", 1)[0]
        commands.append(f"  logagent analyze --repo {keep / 'samples' / server} --event {first[1]}")
    if (keep / "memory").exists():
        commands += [f"  LOGAGENT_DATA_DIR={keep} logagent memory servers",
                     f"  LOGAGENT_DATA_DIR={keep} logagent memory list"]
    return ["", f"Kept in {keep}: {listed}." + (" Next:" if commands else ""), *commands]


_KEPT = (("samples", "the sample repositories (samples/)"), ("cache", "their checkouts (cache/)"),
         ("events", "one event per failure (events/)"),
         ("events.jsonl", "every well-formed message produced, one per line (events.jsonl)"),
         ("memory", "the memory (memory/)"))


def summarize(result: DemoResult) -> str:
    """The whole report of one run, as `logagent demo` prints it (stage lines, then the bursts)."""
    lines = [
        "Log Agent demo",
        broker_line(result.bootstrap_servers),
        repos_line(result.services),
        produced_line(result.stream),
        consumed_line(result.stats.events_in, result.elapsed_s, result.drained),
        analyses_line(result.analyses),
        dlq_line(result.dlq_reasons),
        "",
        *bursts(result.analyses),
    ]
    return "\n".join(lines)
