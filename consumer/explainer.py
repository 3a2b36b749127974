"""The per-burst flow: recall, recurrence, the repo at the deployed commit, localiser, LLM, memory write.

`analysis` and `store` never see each other; this module hands recalled cases to the agent and the finished
report to the store, and turns what each step did into metrics.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from analysis.code.burst import burst_id, cluster_info
from analysis.code.localiser import localise, localise_trace
from analysis.code.repo import Checkout, RepoError, RepoSync
from analysis.code.tools import FileTools, ToolLimits
from analysis.code.validate import citation_changed
from analysis.event import Cluster
from analysis.intake.redact import Redactor, redact_analysis, redact_id
from analysis.report import Analysis, PastCaseRef
from consumer.breaker import CircuitBreaker
from consumer.embedder import build_embedder
from consumer.metrics import Metrics
from consumer.notify.routing import RateLimiter
from consumer.retry import Backoff
from consumer.settings import Settings
from store import (
    CitedRange,
    MemoryStore,
    NewCase,
    PastCase,
    RecallQuery,
    StoreError,
)

if TYPE_CHECKING:  # langchain loads only where an agent is built: a heuristic service starts without it
    from analysis.agent.loop import Agent, AgentStats

__all__ = ["Explainer", "HeuristicAnalyzer", "build_explainer"]

log = logging.getLogger("logagent.explainer")

_INSTRUCTION_REVIEW = "recalled context looks contaminated"
_STALE_REVIEW = "answer rests on stale past cases"
_BRANCH_HEAD_REVIEW = "source read is not the deployed commit"
_WARNED_SERVERS_CAP = 1024


class _KeyedLocks:
    """One lock per key, kept while a thread holds or waits for it and dropped when the last lets go."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, tuple[threading.Lock, int]] = {}

    @contextmanager
    def held(self, key: Hashable) -> Iterator[None]:
        """Hold the lock of `key` for the duration of the block."""
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


class Explainer:
    """Turns one closed burst into one analysis; the pipeline's `Analyzer`.

    Blocking work (git, LanceDB, the LLM) runs in a worker thread. Without `agent` (no Ollama configured)
    every analysis is heuristic; with it, a circuit breaker switches to heuristic while Ollama is down.
    Without `memory` there is no recall, no recurrence and nothing is remembered.
    """

    def __init__(
        self,
        repo_sync: RepoSync,
        metrics: Metrics,
        *,
        redactor: Redactor,
        tool_limits: ToolLimits | None = None,
        in_app_prefixes: Sequence[str] = (),
        agent: Agent | None = None,
        memory: MemoryStore | None = None,
        breaker: CircuitBreaker | None = None,
        scope: str = "default",
        llm_backoff: Backoff | None = None,
        analyses_per_hour: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._repo_sync = repo_sync
        self._metrics = metrics
        self._redactor = redactor
        self._tool_limits = tool_limits or ToolLimits()
        self._in_app_prefixes = tuple(in_app_prefixes)
        self._agent = agent
        self._memory = memory
        self._breaker = breaker or CircuitBreaker()
        self._breaker_lock = threading.Lock()
        self._scope = scope
        self._llm_backoff = llm_backoff or Backoff(0.5, 8.0, attempts=2)
        self._analyses_per_hour = analyses_per_hour
        self._budgets: dict[str, RateLimiter] = {}  # per server with a repository (a bounded set); breaker lock
        self._clock = clock
        self._stop = threading.Event()
        self._warned_no_repo: set[str] = set()
        self._same_failure = _KeyedLocks()
        self._answered = False  # Ollama answered a call or a probe since the start
        self._probed_down = False  # the last probe got no answer, and no call has since
        if agent is not None:
            metrics.ollama_up.set(1)

    @property
    def llm_enabled(self) -> bool:
        """Whether an LLM is configured at all (else the service runs in heuristic mode)."""
        return self._agent is not None

    @property
    def memory(self) -> MemoryStore | None:
        """The error memory this explainer recalls from and writes to (shared with the feedback listener)."""
        return self._memory

    @property
    def llm_reachable(self) -> bool:
        """False while the circuit breaker keeps the LLM out, or Ollama did not answer a probe (`probe_llm`)."""
        with self._breaker_lock:
            return self._breaker.closed and not self._probed_down

    def probe_llm(self) -> None:
        """Until Ollama has answered once, ask for its version: an Ollama never reached reads as down (gauge,
        readiness) before a burst needs it, not after three bursts failed (a trial's wrong URL showed `up` with
        little traffic). The service's housekeeping calls it every so often; a thread may block 3 s."""
        if self._agent is None or self._answered:
            return
        answered = self._agent.answers()
        with self._breaker_lock:
            if self._answered:  # a call answered meanwhile
                return
            self._answered, self._probed_down = answered, not answered
            self._metrics.ollama_up.set(1 if answered and self._breaker.closed else 0)

    def close(self) -> None:
        """Cut retry waits short: the service is stopping."""
        self._stop.set()

    async def analyze(self, cluster: Cluster) -> Analysis:
        """The analysis of one burst; without readable source a trace-only one. Store faults that may heal
        propagate as retriable."""
        return await asyncio.to_thread(self._analyze, cluster)

    def _analyze(self, cluster: Cluster) -> Analysis:
        started = time.monotonic()
        # Two bursts of one failure at one commit analysed side by side would both ask the LLM: the later
        # waits for the earlier and is then answered from memory as its recurrence.
        with self._same_failure.held((cluster.server_id, cluster.tenant, cluster.fingerprint, cluster.commit)):
            return self._analyze_alone(cluster, started)

    def _analyze_alone(self, cluster: Cluster, started: float) -> Analysis:
        now = self._clock()
        recurrence = self._recurrence(cluster, cluster.commit, now)
        if recurrence is not None:
            return recurrence
        try:
            checkout = self._repo_sync.checkout(cluster.server_id, cluster.commit)
        except RepoError as error:
            return self._without_repo(cluster, error)
        # A log that names no commit is read at the branch head: while that has not moved, a repeat is too.
        if cluster.commit is None and (recurrence := self._recurrence(cluster, checkout.commit, now)) is not None:
            return recurrence
        for reason in checkout.sync_errors:
            self._metrics.repo_sync_errors.labels(reason).inc()
        if checkout.became_local_after_s is not None:
            self._metrics.index_lag.labels("repo").observe(checkout.became_local_after_s)
        return self.explain(cluster, checkout, now=now, started=started)

    def explain(
        self, cluster: Cluster, checkout: Checkout, *, now: float | None = None, started: float | None = None
    ) -> Analysis:
        """Analyse `cluster` in an already prepared `checkout` (blocking): localiser, recall, LLM, review,
        memory write. `logagent analyze` calls this with its local repository; the service via `analyze`."""
        started = time.monotonic() if started is None else started
        now = self._clock() if now is None else now
        tools = FileTools(checkout.root, self._tool_limits, repo_dir=checkout.repo_dir, commit=checkout.commit,
                          tracked=checkout.tracked)
        heuristic = localise(cluster, checkout, tools, self._in_app_prefixes)
        recalled = self._recall(cluster, checkout, now)
        heuristic = heuristic.model_copy(update={"past_cases": [_ref(case) for case in recalled]})
        analysis = self._investigate(cluster, checkout, tools, heuristic, recalled)
        analysis = _with_review(analysis, recalled, checkout.stand_in)
        self._metrics.count_citations("analysis", len(analysis.citations), 0)
        analysis = analysis.model_copy(
            update={"timings": {**analysis.timings, "total_s": round(time.monotonic() - started, 6)}}
        )
        # Nothing leaves unredacted: code the localiser quoted, the model's answer, notes (issue 13).
        analysis = redact_analysis(analysis, self._redactor)
        self._remember(cluster, analysis, now)
        return analysis

    def _without_repo(self, cluster: Cluster, error: RepoError) -> Analysis:
        """No readable source: count why, say so once per server, and answer from the trace alone. The
        answer is not remembered, so it never stands in for a real analysis once the repository is back."""
        self._metrics.repo_sync_errors.labels(error.reason).inc()
        server = cluster.server_id
        if server not in self._warned_no_repo and len(self._warned_no_repo) < _WARNED_SERVERS_CAP:
            self._warned_no_repo.add(server)
            log.warning("server has no readable repository; its bursts get trace-only analyses",
                        extra={"fields": {"server": server, "reason": error.reason, "error": str(error)[:300]}})
        return localise_trace(cluster, str(error)[:300], self._in_app_prefixes)

    # -- memory -------------------------------------------------------------------------------------

    def _recurrence(self, cluster: Cluster, commit: str | None, now: float) -> Analysis | None:
        """A burst that repeats a validated analysis at the same commit is answered without the LLM."""
        if self._memory is None or commit is None:
            return None
        analysis_id = burst_id(cluster)
        try:
            case = self._memory.find_recurrence(
                cluster.server_id, cluster.tenant, cluster.fingerprint, commit, now, scope=self._scope,
                own_id=analysis_id,
            )
        except StoreError as error:
            log.warning("recurrence lookup failed", extra={"fields": {"error": str(error)}})
            return None
        if case is None:
            return None
        if case.memory_id == analysis_id:
            # This very burst, replayed (a rebalance or a restart before its offsets were committed): the
            # analysis goes out again as it was, not as a recurrence of itself, and costs no LLM call.
            self._metrics.llm_calls_avoided.inc()
            replayed = Analysis.model_validate(case.analysis)
            return redact_analysis(replayed.model_copy(update={"cluster": cluster_info(cluster)}), self._redactor)
        if case.status != "analyzed" and self._agent is not None and self.llm_reachable:
            # A heuristic answer (stored while Ollama was down, say) must not keep the LLM away for good.
            return None
        self._metrics.llm_calls_avoided.inc()
        original = Analysis.model_validate(case.analysis)
        reasons = [f"{_INSTRUCTION_REVIEW}: {', '.join(case.contaminated)}"] if case.contaminated else []
        return redact_analysis(original.model_copy(update={
            "analysis_id": analysis_id,
            "status": "recurrence",
            "analyzer": "memory",
            "cluster": cluster_info(cluster),
            "recurrence_of": case.memory_id,
            "past_cases": [_ref(case)],
            "needs_review": bool(reasons),
            "review_reasons": reasons,
            "tokens": {},
            "timings": {},
            "notes": [f"recurrence of analysis {case.memory_id} at the same commit; no LLM call"],
        }), self._redactor)

    def _recall(self, cluster: Cluster, checkout: Checkout, now: float) -> list[PastCase]:
        if self._memory is None:
            return []
        query = RecallQuery(
            server=cluster.server_id, tenant=cluster.tenant, scope=self._scope,
            fingerprint=cluster.fingerprint, exception_type=cluster.exception_type,
            text=self._redactor.redact(_error_text(cluster)), now=now, identifiers=_identifiers(cluster),
            commit=checkout.commit,
        )
        self._metrics.memory_queries.inc()
        try:
            result = self._memory.recall(query, is_changed=partial(citation_changed, checkout.repo_dir))
        except StoreError as error:
            log.warning("memory recall failed", extra={"fields": {"error": str(error)}})
            return []
        if result.cases:
            self._metrics.memory_hits.inc()
        self._metrics.count_citations("memory", result.citations_checked, result.stale_citations)
        # Defence in depth: the store filters by tenant and server already; a foreign case must never pass.
        return [c for c in result.cases if c.analysis.get("cluster", {}).get("tenant", cluster.tenant)
                == cluster.tenant]

    def _remember(self, cluster: Cluster, analysis: Analysis, now: float) -> None:
        if self._memory is None or analysis.status not in ("analyzed", "heuristic"):
            return
        case = NewCase(
            id=analysis.analysis_id, server=cluster.server_id, tenant=cluster.tenant, scope=self._scope,
            fingerprint=cluster.fingerprint, exception_type=cluster.exception_type,
            error_text=self._redactor.redact(_error_text(cluster)), analysis_json=analysis.model_dump_json(),
            analyzer=analysis.analyzer, commit=analysis.commit, created_at=now, status=analysis.status,
            cited_files=tuple(
                CitedRange(c.path, c.start_line, c.end_line, c.blob_sha) for c in analysis.citations
            ),
        )
        try:
            result = self._memory.remember(case)
        except StoreError as error:
            # The analysis is still published; only future recall of it is lost, and the log says so.
            log.warning("memory write failed", extra={"fields": {"error": str(error), "id": case.id}})
            return
        if result.inserted:
            self._metrics.index_lag.labels("memory").observe(result.index_lag_s)

    # -- the LLM ------------------------------------------------------------------------------------

    def _investigate(
        self, cluster: Cluster, checkout: Checkout, tools: FileTools, heuristic: Analysis,
        recalled: Sequence[PastCase],
    ) -> Analysis:
        if self._agent is None:
            return heuristic
        from analysis.agent.loop import LlmUnavailable  # loaded already: the agent was built from it

        budget = self._budget(cluster.server_id)
        with self._breaker_lock:
            if budget is not None and budget.wait_s() > 0:
                return _note(heuristic, f"model budget of this server spent ({self._analyses_per_hour} analyses "
                                        "an hour on this replica); heuristic analysis")
            allowed = self._breaker.allow()
            if not allowed and budget is not None:
                budget.give_back()  # an open circuit spends no budget
        if not allowed:
            return _note(heuristic, "LLM circuit open (Ollama unreachable); heuristic analysis")
        past = [_prompt_case(c, self._redactor) for c in recalled]
        for attempt in range(1, max(1, self._llm_backoff.attempts) + 1):
            try:
                outcome = self._agent.analyze(cluster, checkout, tools, heuristic, past)
                break
            except LlmUnavailable as error:
                last_error = error
            except BaseException:
                with self._breaker_lock:
                    self._breaker.abandon()
                raise
            # A shutdown cuts the wait short and the burst goes out heuristic.
            if attempt >= self._llm_backoff.attempts or self._stop.wait(self._llm_backoff.delay(attempt)):
                with self._breaker_lock:
                    self._breaker.record_failure()
                    self._metrics.ollama_up.set(1 if self._breaker.closed else 0)
                return _note(heuristic, f"LLM unavailable ({_first_line(last_error)}); heuristic analysis")
        with self._breaker_lock:
            self._breaker.record_success()
            self._answered, self._probed_down = True, False
        self._metrics.ollama_up.set(1)
        self._record_agent(outcome.stats)
        return outcome.analysis

    def _budget(self, server: str) -> RateLimiter | None:
        """The model budget of `server` on this replica (None: no limit)."""
        if not self._analyses_per_hour:
            return None
        with self._breaker_lock:
            if server not in self._budgets:
                self._budgets[server] = RateLimiter(self._analyses_per_hour / 60, self._analyses_per_hour, self._clock)
            return self._budgets[server]

    def _record_agent(self, stats: AgentStats) -> None:
        for seconds in stats.llm_seconds:
            self._metrics.llm_seconds.observe(seconds)
        self._metrics.llm_tokens.labels("prompt").inc(stats.prompt_tokens)
        self._metrics.llm_tokens.labels("completion").inc(stats.completion_tokens)
        for (tool, outcome), count in stats.tool_calls.items():
            self._metrics.tool_calls.labels(tool, outcome).inc(count)


class HeuristicAnalyzer(Explainer):
    """The explainer without LLM and memory: the heuristic localiser at the deployed commit."""

    def __init__(
        self, repo_sync: RepoSync, tool_limits: ToolLimits | None = None, in_app_prefixes: Sequence[str] = ()
    ) -> None:
        super().__init__(repo_sync, Metrics(), redactor=Redactor(), tool_limits=tool_limits,
                         in_app_prefixes=in_app_prefixes)


def build_explainer(
    settings: Settings, metrics: Metrics, repo_sync: RepoSync | None = None, *, with_memory: bool = True
) -> Explainer:
    """The explainer the settings describe: LLM when Ollama is configured, memory under the data dir
    (`with_memory=False`: no recall, no recurrence, nothing remembered, as `logagent analyze` wants)."""
    redactor = Redactor(settings.redaction)
    if repo_sync is None:
        servers = settings.repo_servers()
        # Events carry redacted server ids (`redact_id`): a server named by an IP finds its repository too.
        servers = {redact_id(server, redactor): spec for server, spec in servers.items()} | servers
        repo_sync = RepoSync(settings.repo.model_copy(update={"servers": servers}))
    agent = None
    if settings.ollama.url:
        from analysis.agent.loop import Agent

        agent = Agent(settings.agent, redactor, settings.ollama.url)
    return Explainer(
        repo_sync, metrics, redactor=redactor, tool_limits=settings.tools,
        in_app_prefixes=settings.input.in_app_prefixes, agent=agent,
        memory=MemoryStore(settings.memory, build_embedder(settings)) if with_memory else None,
        breaker=CircuitBreaker(settings.ollama.failure_threshold, settings.ollama.reset_after_s),
        scope=settings.scope,
        llm_backoff=Backoff(settings.pipeline.retry_initial_s, settings.pipeline.retry_max_s, settings.ollama.attempts),
        analyses_per_hour=settings.ollama.analyses_per_hour,
    )


def _error_text(cluster: Cluster) -> str:
    """The text memory embeds: type, message and the root cause's frames (the caller redacts it again)."""
    event = cluster.representative
    root = event.root_cause
    message = root.value if root else event.message
    lines = [f"{cluster.exception_type}: {message}" if cluster.exception_type else message]
    if root:
        lines += [f"at {f.module or f.filename}.{f.function}" for f in root.frames[:20]]
    return "\n".join(lines)


def _identifiers(cluster: Cluster) -> tuple[str, ...]:
    """Class, module and function names of the root cause, for exact-term matching in recall."""
    root = cluster.representative.root_cause
    names: list[str] = [cluster.exception_type.rsplit(".", 1)[-1]] if cluster.exception_type else []
    for frame in root.frames[:20] if root else ():
        names.append(frame.function.rsplit(".", 1)[-1])
        owner = frame.module or frame.filename
        if owner:
            names.append(owner.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[-1])
    return tuple(dict.fromkeys(n for n in names if n))


def _ref(case: PastCase) -> PastCaseRef:
    return PastCaseRef(memory_id=case.memory_id, score=round(case.score, 6), stale=case.stale,
                       stale_reasons=list(case.stale_reasons), verdict=case.verdict,
                       trust=round(min(max(case.trust, 0.0), 1.0), 6), note=case.note)


def _prompt_case(case: PastCase, redactor: Redactor) -> Mapping[str, Any]:
    """What the agent sees of a past case: redacted again (the prompt quotes it as data)."""
    analysis = case.analysis
    culprit = analysis.get("culprit") or {}
    fix = analysis.get("fix") or {}
    return {
        "memory_id": case.memory_id,
        "score": round(case.score, 3),
        "stale": case.stale,
        "root_cause": redactor.redact(str(analysis.get("root_cause", ""))),
        "culprit": redactor.redact(orjson.dumps(culprit).decode()),
        "fix": redactor.redact(str(fix.get("explanation", ""))),
        "verdict": case.verdict,
        "note": redactor.redact(case.note),
        "trust": round(case.trust, 2),
    }


def _with_review(analysis: Analysis, recalled: Sequence[PastCase], stand_in: str) -> Analysis:
    """`analysis` marked for review when its citations may not be the deployed code (`stand_in`: why the
    branch head was read instead), or its past cases are contaminated, or all stale."""
    reasons = list(analysis.review_reasons)
    if stand_in:
        reasons.append(f"{_BRANCH_HEAD_REVIEW}: {stand_in}")
    contaminated = sorted({reason for case in recalled for reason in case.contaminated})
    if contaminated:
        reasons.append(f"{_INSTRUCTION_REVIEW}: {', '.join(contaminated)}")
    if analysis.status == "analyzed" and recalled and all(case.stale for case in recalled):
        reasons.append(_STALE_REVIEW)
    if not reasons:
        return analysis
    return analysis.model_copy(update={"needs_review": True, "review_reasons": reasons})


def _note(analysis: Analysis, note: str) -> Analysis:
    return analysis.model_copy(update={"notes": [*analysis.notes, note]})


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__
