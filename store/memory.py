"""MemoryStore: past analyses per server in LanceDB, recalled per tenant and scope, fresh and correctable.

Synchronous by design: LanceDB's Python API is blocking, so the pipeline calls it via asyncio.to_thread.
Recall reads through LanceDB's async API instead, on LanceDB's own event loop: its queries then run in one
hop (`store.candidates`), without the schema reads the blocking wrapper makes around every query.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import lancedb
from lancedb.background_loop import LOOP

from store.browse import browse_filter, case_detail, server_summaries
from store.candidates import CandidateSearch, candidate_rows
from store.config import MemoryConfig
from store.embedding import Embedder
from store.errors import RefusedCase, StoreError
from store.freshness import Freshness, IsChanged, assess
from store.indexing import maintain_table
from store.recalled import candidate_of, past_case_of
from store.record import (
    STORABLE_STATUSES,
    CaseDetail,
    CaseSummary,
    Judged,
    MaintenanceReport,
    NewCase,
    PastCase,
    RecallQuery,
    RecallResult,
    RememberResult,
    ServerSummary,
    Verdict,
)
from store.relevance import Ranked, RankQuery, cosine, rank, select
from store.scope import TABLE_PREFIX, alive, case_filter, post_filter, scope_filter, sql_string, table_name
from store.table import (
    NEW_TABLE_OPTIONS,
    SUMMARY_COLUMNS,
    arrow_rows,
    case_row,
    case_summary,
    check_compatible,
    cited_ranges,
    ensure_primary_key,
    fetch_rows,
    memory_schema,
    row_analysis,
    with_retries,
)
from store.verdicts import forget_verdicts, judge, latest_verdicts, read_verdicts

T = TypeVar("T")
_VISIBLE_POLL_S = 0.01
_NOTE_CHARS = 500
_ID_PREFIX = re.compile(r"[0-9a-f-]{8,36}")


class MemoryStore:
    """The error memory. One LanceDB table per server (`memory_<server>`), nothing else in its database."""

    def __init__(self, config: MemoryConfig, embedder: Embedder) -> None:
        self._config = config
        self._embedder = embedder
        self._lock = threading.Lock()
        self._db: Any = None
        self._tables: dict[str, Any] = {}
        self._async_db: Any = None
        self._readers: dict[str, Any] = {}
        self._written: set[str] = set()  # tables this store wrote since their reader last caught up
        self._keyed: set[str] = set()

    # -- connection and tables -------------------------------------------------------------------

    def _connection(self) -> Any:
        with self._lock:
            if self._db is None:
                # Tables stay open per server; each read re-checks the latest version once this
                # interval has passed (0: on every read), so replicas see each other's commits.
                self._db = lancedb.connect(self._config.uri, read_consistency_interval=self._consistency(),
                                           storage_options=self._config.storage.to_storage_options())
            return self._db

    def _consistency(self) -> timedelta:
        return timedelta(seconds=self._config.read_consistency_s)

    def _reader(self, name: str) -> Any:
        """The async handle of table `name` that recall reads through (same consistency as the writes'),
        caught up with this store's own writes whatever the interval: an analysis just remembered is
        recalled at once by the replica that made it."""
        with self._lock:
            reader = self._readers.get(name)
            written = name in self._written
            self._written.discard(name)
        if reader is not None:
            if written:
                _on_lance_loop(reader.checkout_latest())
            return reader
        with self._lock:
            if self._async_db is None:
                self._async_db = _on_lance_loop(lancedb.connect_async(
                    self._config.uri, read_consistency_interval=self._consistency(),
                    storage_options=self._config.storage.to_storage_options()))
            db = self._async_db
        reader = _on_lance_loop(db.open_table(name))
        with self._lock:
            self._readers[name] = reader
        return reader

    def _table(self, server: str, *, create: bool) -> Any | None:
        name = table_name(server)
        with self._lock:
            cached = self._tables.get(name)
        if cached is not None:
            return cached
        db = self._connection()
        try:
            table = db.open_table(name)
        except ValueError:  # LanceDB's "was not found"
            if not create:
                return None
            schema = memory_schema(self._embedder.dim, self._embedder.name)
            try:
                table = db.create_table(name, schema=schema, exist_ok=True, storage_options=NEW_TABLE_OPTIONS)
            except (ValueError, OSError):  # another writer created it between our open and create
                table = db.open_table(name)
        check_compatible(table.schema, self._embedder.dim, self._embedder.name, name)
        with self._lock:
            self._tables[name] = table
        return table

    def _wrote(self, name: str) -> None:
        """Table `name` has a commit of this store's: its reader catches up before the next recall."""
        with self._lock:
            self._written.add(name)

    def _writable_table(self, server: str) -> Any:
        table = self._table(server, create=True)
        if table is None:  # create=True always yields a table; this keeps the types honest
            raise StoreError(f"could not open or create the memory table of {server!r}")
        if table.name not in self._keyed:
            ensure_primary_key(table)
            self._keyed.add(table.name)
        return table

    def open(self) -> None:
        """Connect now and list the tables, so a service can say it is ready; raises a retriable StoreError."""
        try:
            self._connection().list_tables()
        except Exception as error:  # lancedb raises plain OSError/RuntimeError for an unreachable store
            raise StoreError(f"memory store unreachable: {type(error).__name__}", retriable=True) from error

    def _all_tables(self) -> Iterator[Any]:
        db = self._connection()
        token = None
        while True:
            page = db.list_tables(page_token=token)
            for name in page.tables:
                if name.startswith(TABLE_PREFIX):
                    with self._lock:
                        cached = self._tables.get(name)
                    yield cached if cached is not None else db.open_table(name)
            token = page.page_token
            if not token:
                return

    def _retry(self, operation: Any) -> Any:
        cfg = self._config
        return with_retries(operation, attempts=cfg.commit_retries, base_s=cfg.retry_base_s,
                            max_s=cfg.retry_max_s)

    def _embed_one(self, text: str) -> list[float]:
        (vector,) = self._embedder.embed([text])
        if len(vector) != self._embedder.dim:
            raise StoreError(f"embedder {self._embedder.name} returned {len(vector)}-d, not "
                             f"{self._embedder.dim}-d")
        return vector

    # -- writing -----------------------------------------------------------------------------------

    def remember(self, case: NewCase) -> RememberResult:
        """Store a validated analysis (idempotent on its id) and return how long until it was recallable."""
        if case.status not in STORABLE_STATUSES:
            raise RefusedCase(f"only analyzed or heuristic cases are remembered, not {case.status!r}")
        for field_name in ("id", "server", "tenant", "scope", "fingerprint"):
            if not getattr(case, field_name):
                raise RefusedCase(f"case has an empty {field_name}")
        if not math.isfinite(case.created_at):
            raise RefusedCase("case has a non-finite created_at")
        started = time.perf_counter()
        vector = self._embed_one(case.error_text)
        table = self._writable_table(case.server)
        trust = case.trust if case.trust is not None else self._config.trust.for_analyzer(case.analyzer)
        row = case_row(case, trust=trust, vector=vector,
                       expires_at=case.created_at + self._config.ttl_for(case.scope))
        # Insert-only: a replay must not reset feedback or trust a person already gave the case.
        result = self._retry(lambda: table.merge_insert("id").when_not_matched_insert_all().execute(
            arrow_rows([row], table.schema)))
        self._wrote(table.name)
        self._wait_visible(table, case.id)
        return RememberResult(case.id, result.num_inserted_rows > 0, time.perf_counter() - started)

    def _wait_visible(self, table: Any, memory_id: str) -> None:
        # A committed row is recallable at once: vector search also scans rows not yet indexed. So
        # visibility is a (B-tree backed, once maintained) id count rather than a vector search.
        deadline = time.monotonic() + self._config.visible_timeout_s
        where = case_filter(memory_id)
        while not table.count_rows(where):
            if time.monotonic() > deadline:
                raise StoreError(f"case {memory_id} not recallable after "
                                 f"{self._config.visible_timeout_s}s", retriable=True)
            time.sleep(_VISIBLE_POLL_S)

    def feedback(self, server: str | None, analysis_id: str, verdict: Verdict, note: str = "",
                 verdict_id: str = "", tenant: str | None = None) -> Judged:
        """Apply a human verdict: `correct` raises trust to human-confirmed and feedback +1; `wrong`
        lowers trust and feedback -1, or forgets the case (`forget_on_wrong`). Without `server` every
        memory table is searched (the CLI only knows the id). UNKNOWN (false) when no case has that id
        (of `tenant`, when given: a verdict sent for one tenant never touches another's case).

        The verdict goes to the case's verdict log, and the row is set to what the log adds up to
        (`store.verdicts.judge`), so replicas judging one case at once lose no verdict. A verdict with
        a `verdict_id` counts once however often it is delivered (DUPLICATE after the first)."""
        if verdict not in ("correct", "wrong"):
            raise RefusedCase(f"verdict must be 'correct' or 'wrong', not {verdict!r}")
        if verdict == "wrong" and self._config.forget_on_wrong:
            return Judged.APPLIED if self.forget(analysis_id, server=server, tenant=tenant) else Judged.UNKNOWN
        clean_note = "".join(ch if ch.isprintable() else " " for ch in note)[:_NOTE_CHARS]
        found = Judged.UNKNOWN
        for table in self._tables_for(server):
            judged = judge(self._connection(), table, analysis_id, verdict, clean_note, self._config.trust,
                           retry=self._retry, rounds=self._config.commit_retries + 2, verdict_id=verdict_id,
                           tenant=tenant)
            if judged:
                self._wrote(table.name)
            found = max(found, judged)
        return found

    def forget(self, analysis_id: str, *, server: str | None = None, tenant: str | None = None) -> int:
        """Delete a case by id (in `server`'s table, or in every memory table; only `tenant`'s, when
        given); returns rows deleted."""
        where = case_filter(analysis_id, tenant)
        deleted = 0
        for table in self._tables_for(server):
            if table.count_rows(where):
                deleted += self._retry(lambda t=table: t.delete(where)).num_deleted_rows
                self._wrote(table.name)
                self._retry(lambda t=table: forget_verdicts(self._connection(), t.name, analysis_id))
        return deleted

    def _tables_for(self, server: str | None) -> list[Any]:
        """The tables a verdict or forget looks in, at their latest version: another replica may have
        stored the case since this store's handle last looked, whatever `read_consistency_s` allows."""
        if server is None:
            tables = list(self._all_tables())
        else:
            table = self._table(server, create=False)
            tables = [table] if table is not None else []
        for table in tables:
            table.checkout_latest()
        return tables

    # -- reading -----------------------------------------------------------------------------------

    def recall(self, query: RecallQuery, *, is_changed: IsChanged | None = None) -> RecallResult:
        """The most useful past cases of this server, tenant and scope, best first.

        The pool is the `candidate_pool` nearest cases plus every exact-fingerprint match, both
        pre-filtered in the query (tenant, scope) and post-filtered here (also expiry); ranked by
        `store.relevance`; each case is checked for freshness against `query.commit` with `is_changed`,
        and for contamination.
        """
        table = self._table(query.server, create=False)
        if table is None:
            return RecallResult()
        vector = self._embed_one(query.text)
        # The table is the server's own, so a server clause would only cost an index lookup per query;
        # the post-filter still checks the server of every row. Expiry too is left to the post-filter:
        # `maintain` deletes expired rows, so they are rare, and an `expires_at` range in the pre-filter
        # costs a third of the query (it matches nearly every row). Only when expired rows did take
        # places in the pool does it run again with expiry in the filter.
        reader = self._reader(table.name)
        where = scope_filter(server=None, tenant=query.tenant, scope=query.scope, now=None)
        rows = self._candidate_rows(reader, vector, where, query.fingerprint)
        if any(not alive(row, query.now) for row in rows):
            where = scope_filter(server=None, tenant=query.tenant, scope=query.scope, now=query.now)
            rows = self._candidate_rows(reader, vector, where, query.fingerprint)
        admitted = post_filter(rows, server=query.server, tenant=query.tenant, scope=query.scope,
                               now=query.now)
        by_id = {str(row["id"]): row for row in admitted}
        analyses = {memory_id: row_analysis(row) for memory_id, row in by_id.items()}
        candidates = [candidate_of(row, analyses[memory_id]) for memory_id, row in by_id.items()]
        wanted = RankQuery(query.fingerprint, query.exception_type, query.identifiers, vector, query.now)
        ranked = rank(wanted, candidates, self._config.ranking)
        return self._finish(query, ranked, by_id, analyses, is_changed)

    def _candidate_rows(self, reader: Any, vector: list[float], where: str, fingerprint: str) -> list[dict[str, Any]]:
        """The `candidate_pool` nearest rows passing `where`, plus up to `top_k` exact-fingerprint matches."""
        ranking = self._config.ranking
        search = CandidateSearch(vector, where, fingerprint, ranking.candidate_pool, ranking.top_k,
                                 self._config.nprobes)
        return _on_lance_loop(candidate_rows(reader, search))

    def _finish(self, query: RecallQuery, ranked: list[Ranked], by_id: Mapping[str, Mapping[str, Any]],
                analyses: Mapping[str, dict[str, Any]], is_changed: IsChanged | None) -> RecallResult:
        ranking = self._config.ranking
        fresh: list[Ranked] = []
        verdicts: dict[str, Freshness] = {}
        dropped: list[Freshness] = []
        # Assess a few more than top_k so budget skips and dropped stale cases can be replaced.
        for item in ranked:
            if len(fresh) >= 2 * ranking.top_k:
                break
            row = by_id[item.candidate.memory_id]
            verdict = assess(cited_ranges(row), case_commit=row.get("commit"), current_commit=query.commit,
                             is_changed=is_changed, age_s=query.now - float(row["created_at"]),
                             max_age_s=self._config.max_age_for(str(row["scope"])))
            if verdict.stale and self._config.drop_stale:
                dropped.append(verdict)
                continue
            verdicts[item.candidate.memory_id] = verdict
            fresh.append(item)
        chosen = select(fresh, ranking.top_k, ranking.budget_chars)
        cases = [past_case_of(item, by_id[item.candidate.memory_id], analyses[item.candidate.memory_id],
                            verdicts[item.candidate.memory_id], query.tenant) for item in chosen]
        counted = [verdicts[c.memory_id] for c in cases] + dropped
        return RecallResult(cases, len(by_id), sum(v.checked for v in counted),
                            sum(v.stale_citations for v in counted), len(dropped))

    def find_recurrence(self, server: str, tenant: str, fingerprint: str, commit: str, now: float, *,
                        scope: str | None = None, own_id: str | None = None) -> PastCase | None:
        """A validated case with this fingerprint at this very commit, still within its TTL and not
        marked wrong: the burst can be answered from memory. The case stored under `own_id` (the burst
        itself, replayed) wins, then analyzed cases over heuristic ones."""
        table = self._table(server, create=False)
        if table is None or not fingerprint or not commit:
            return None
        where = (f"{scope_filter(server=server, tenant=tenant, scope=scope, now=now)}"
                 f" AND fingerprint = {sql_string(fingerprint)} AND commit = {sql_string(commit)}"
                 " AND status IN ('analyzed', 'heuristic') AND feedback >= 0.0")
        rows = [row for row in post_filter(fetch_rows(table.search().where(where), 50), server=server,
                                           tenant=tenant, scope=scope, now=now)
                if row["fingerprint"] == fingerprint and row.get("commit") == commit
                and row.get("status") in STORABLE_STATUSES and float(row.get("feedback") or 0.0) >= 0.0]
        if not rows:
            return None
        # The id breaks ties, so every replica answers one failure from the same case.
        best = max(rows, key=lambda r: (r["id"] == own_id, r["status"] == "analyzed", float(r["trust"]),
                                        float(r["created_at"]), str(r["id"])))
        analysis = row_analysis(best)
        ranked = Ranked(candidate_of(best, analysis), 1.0, True, 1.0, 1.0)
        return past_case_of(ranked, best, analysis, Freshness(False), tenant)

    def list_cases(self, server: str | None, tenant: str | None = None, limit: int = 50) -> list[CaseSummary]:
        """Stored cases of a server (every server without one; optionally one tenant), newest first."""
        rows: list[tuple[str, dict[str, Any]]] = []
        for table in self._tables_for(server):
            where = browse_filter(server, tenant)
            query = table.search().select(SUMMARY_COLUMNS).limit(max(1, table.count_rows()))
            rows += [(table.name, row) for row in (query.where(where) if where else query).to_list()]
        rows.sort(key=lambda r: -float(r[1]["created_at"]))
        return self._judged([(name, case_summary(row)) for name, row in rows[:limit]])

    def search(self, server: str | None, tenant: str | None, text: str, k: int = 10) -> list[CaseSummary]:
        """Cases of a server (every server without one; optionally one tenant) most similar to `text`,
        best first; `score` is the cosine."""
        tables = self._tables_for(server)
        if not tables:
            return []
        vector = self._embed_one(text)
        where = browse_filter(server, tenant)
        found: list[tuple[str, CaseSummary]] = []
        for table in tables:
            query = table.search(vector).distance_type("cosine")
            rows = fetch_rows(query.where(where, prefilter=True) if where else query, k)
            found += [(table.name, case_summary(row, cosine(vector, row["vector"]))) for row in rows]
        return self._judged(sorted(found, key=lambda pair: -(pair[1].score or 0.0))[:k])

    def _judged(self, cases: list[tuple[str, CaseSummary]]) -> list[CaseSummary]:
        """The cases of their tables (name, case), each with its latest verdict, as `show` lists them last."""
        latest: dict[str, Verdict] = {}
        for name in {name for name, _ in cases}:
            latest |= latest_verdicts(self._connection(), name, [c.memory_id for n, c in cases if n == name])
        return [replace(case, verdict=latest.get(case.memory_id)) for _, case in cases]

    def servers(self, now: float) -> list[ServerSummary]:
        """What the memory holds per server and tenant: cases, the newest, how many expired."""
        return [summary for table in self._all_tables() for summary in server_summaries(table, now)]

    def ids_starting(self, prefix: str, *, server: str | None = None, tenant: str | None = None) -> set[str]:
        """Ids of the cases (`server`'s, or every server's; only `tenant`'s, when given) that start with
        `prefix`, lowercase hex digits and dashes only (the first characters of an id, as Slack shows them);
        two at most per table."""
        if not _ID_PREFIX.fullmatch(prefix):
            raise RefusedCase(f"not the start of an analysis id: {prefix!r}")
        where = f"id LIKE {sql_string(prefix + '%')}"
        if tenant is not None:
            where += f" AND tenant = {sql_string(tenant)}"
        return {str(row["id"]) for table in self._tables_for(server)
                for row in fetch_rows(table.search().where(where).select(["id"]), 2)}

    def show(self, memory_id: str, now: float, *, server: str | None = None, commit: str | None = None,
             is_changed: IsChanged | None = None) -> CaseDetail | None:
        """One case in full (`server`'s table, or every one), with its verdicts; None when no case has
        that id. With `commit` and `is_changed`, staleness also compares its cited lines with `commit`."""
        where = case_filter(memory_id)
        for table in self._tables_for(server):
            rows = fetch_rows(table.search().where(where), 1)
            if rows:
                verdicts = read_verdicts(self._connection(), table.name, memory_id, self._config.trust)
                return case_detail(rows[0], verdicts, self._config, now, commit=commit, is_changed=is_changed)
        return None

    # -- lifecycle ---------------------------------------------------------------------------------

    def maintain(self, now: float) -> MaintenanceReport:
        """Delete expired rows, compact every memory table (which also folds new rows into its indexes),
        build the scalar indexes past `scalar_index_min_rows` and the vector index past `index_min_rows`
        (rebuilt as the table grows). `indexed` names the tables whose vector index was built by this call."""
        expired = 0
        names: list[str] = []
        indexed: list[str] = []
        for table in self._all_tables():
            names.append(table.name)
            deleted, built = maintain_table(table, self._config, now, self._retry)
            self._wrote(table.name)
            expired += deleted
            if built:
                indexed.append(table.name)
        return MaintenanceReport(expired, tuple(names), tuple(indexed))


def _on_lance_loop(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` on LanceDB's event loop, where its async API runs, and wait for the result."""
    result: T = LOOP.run(work)  # type: ignore[no-untyped-call]  # lancedb's loop is untyped
    return result
