"""LanceDB plumbing of the memory: the row schema, row conversion and retries around commits."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson
import pyarrow as pa
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from store.errors import IncompatibleEmbedding, StoreError
from store.record import CaseSummary, CitedRange, NewCase, Verdict

META_DIM = b"logagent.embedding_dim"
META_EMBEDDER = b"logagent.embedder"
META_SCHEMA = b"logagent.schema_version"
SCHEMA_VERSION = b"1"
_PRIMARY_KEY = "lance-schema:unenforced-primary-key"
_KEY_ATTEMPTS = 5

_CITED = pa.struct([
    pa.field("path", pa.string()),
    pa.field("start_line", pa.int32()),
    pa.field("end_line", pa.int32()),
    pa.field("blob_sha", pa.string()),
])

SUMMARY_COLUMNS = ["id", "server", "tenant", "scope", "fingerprint", "exception_type", "status", "analyzer",
                   "trust", "feedback", "created_at", "expires_at", "commit", "analysis_json", "feedback_note"]

# Everything recall ranks, filters and returns (the feedback note travels with the verdict).
RECALL_COLUMNS = ["id", "server", "tenant", "scope", "fingerprint", "exception_type", "error_text",
                  "analysis_json", "analyzer", "status", "trust", "commit", "cited_files", "created_at",
                  "expires_at", "feedback", "feedback_note", "vector"]

T = TypeVar("T")

NEW_TABLE_OPTIONS = {"new_table_data_storage_version": "2.1"}
"""How a memory table is created. Lance file format 2.1 reads scattered rows faster than the 2.0 default,
nested columns (`cited_files`) most: recall reads 18 columns of 50 rows spread over the table, and took
about a quarter less time on it (100k rows, alternating runs). Tables made before keep their format."""


def memory_schema(dim: int, embedder: str) -> pa.Schema:
    """The schema of a `memory_<server>` table; its metadata pins the embedding dimension and model."""
    # No field sets a `lance-encoding:*` layout. Lance 2.1 already writes error_text, analysis_json and vector
    # full-zip (a page whose longest value has 256 bytes or more) and the rest miniblock, and recall's take
    # costs about one read per row of every column whose values vary, whatever the layout: full-zip on every
    # column cost recall 25% more CPU; miniblock on every column, or 1 kB miniblock chunks, none less (100k
    # rows, A/B in one process).
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False, metadata={_PRIMARY_KEY: "true"}),
            pa.field("server", pa.string(), nullable=False),
            pa.field("tenant", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("fingerprint", pa.string(), nullable=False),
            pa.field("exception_type", pa.string()),
            pa.field("error_text", pa.string()),
            pa.field("analysis_json", pa.string()),
            pa.field("analyzer", pa.string()),
            pa.field("status", pa.string()),
            pa.field("trust", pa.float64()),
            pa.field("commit", pa.string()),
            pa.field("cited_files", pa.list_(_CITED)),
            pa.field("created_at", pa.float64()),
            pa.field("expires_at", pa.float64()),
            pa.field("feedback", pa.float64()),
            pa.field("feedback_note", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ],
        metadata={META_DIM: str(dim).encode(), META_EMBEDDER: embedder.encode(), META_SCHEMA: SCHEMA_VERSION},
    )


def ensure_primary_key(table: Any) -> None:
    """Declare `id` the table's primary key, if a table made before it was declared lacks it.

    Two replicas storing the same analysis at once (a replay) each find no row with its id and insert
    it; only with `id` declared the key does LanceDB see the two inserts conflict, retry the later one
    and find the row there. (Tables made by `memory_schema` have it from the start.)
    """
    for _ in range(_KEY_ATTEMPTS):
        if _keyed(table.schema):
            return
        try:
            table.set_unenforced_primary_key("id")
        except (ValueError, RuntimeError):  # another replica declared it first, or committed meanwhile
            table.checkout_latest()
    if not _keyed(table.schema):
        raise StoreError(f"could not declare the key of {table.name}", retriable=True)


def _keyed(schema: pa.Schema) -> bool:
    metadata = schema.field("id").metadata or {}
    return any(key.startswith(_PRIMARY_KEY.encode()) for key in metadata)


def check_compatible(schema: pa.Schema, dim: int, embedder: str, table: str) -> None:
    """Refuse an embedder whose dimension or model differs from the table's: mixed vectors rank garbage."""
    metadata = schema.metadata or {}
    stored_dim = metadata.get(META_DIM, b"").decode()
    stored_name = metadata.get(META_EMBEDDER, b"").decode()
    if stored_dim != str(dim):
        raise IncompatibleEmbedding(f"{table} holds {stored_dim or '?'}-d vectors; embedder gives {dim}-d")
    if stored_name != embedder:
        raise IncompatibleEmbedding(f"{table} was built with {stored_name or '?'}; embedder is {embedder}")


def case_row(case: NewCase, *, trust: float, expires_at: float, vector: list[float]) -> dict[str, Any]:
    """The stored row of a new case."""
    return {
        "id": case.id,
        "server": case.server,
        "tenant": case.tenant,
        "scope": case.scope,
        "fingerprint": case.fingerprint,
        "exception_type": case.exception_type,
        "error_text": case.error_text,
        "analysis_json": case.analysis_json,
        "analyzer": case.analyzer,
        "status": case.status,
        "trust": trust,
        "commit": case.commit,
        "cited_files": [
            {"path": c.path, "start_line": c.start_line, "end_line": c.end_line, "blob_sha": c.blob_sha}
            for c in case.cited_files
        ],
        "created_at": case.created_at,
        "expires_at": expires_at,
        "feedback": 0.0,
        "feedback_note": "",
        "vector": vector,
    }


def cited_ranges(row: Mapping[str, Any]) -> tuple[CitedRange, ...]:
    """The cited ranges of a stored row."""
    return tuple(
        CitedRange(str(c["path"]), int(c["start_line"]), int(c["end_line"]), str(c.get("blob_sha") or ""))
        for c in row.get("cited_files") or ()
    )


def row_analysis(row: Mapping[str, Any]) -> dict[str, Any]:
    """The stored analysis of a row as a dict; empty when it is missing or unreadable."""
    try:
        value = orjson.loads(row.get("analysis_json") or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def culprit_text(analysis: Mapping[str, Any]) -> str:
    """`path:line function` of an analysis's culprit; empty when it has none."""
    culprit = analysis.get("culprit")
    if not isinstance(culprit, Mapping) or not culprit.get("path"):
        return ""
    line = culprit.get("line")
    where = f"{culprit['path']}:{line}" if isinstance(line, int) else str(culprit["path"])
    return f"{where} {culprit.get('function') or ''}".strip()


def case_summary(row: Mapping[str, Any], score: float | None = None, verdict: Verdict | None = None) -> CaseSummary:
    """The operator view of a stored row, with the first line of its root cause and its culprit, and the
    latest verdict on it (from its log: the row keeps the net)."""
    analysis = row_analysis(row)
    root_cause = str(analysis.get("root_cause") or "").strip()
    feedback = float(row.get("feedback") or 0.0)
    return CaseSummary(
        memory_id=str(row["id"]), server=str(row["server"]), tenant=str(row["tenant"]),
        scope=str(row["scope"]), fingerprint=str(row["fingerprint"]),
        exception_type=str(row.get("exception_type") or ""), status=str(row.get("status") or ""),
        analyzer=str(row.get("analyzer") or ""), trust=float(row.get("trust") or 0.0),
        feedback=feedback, created_at=float(row["created_at"]),
        expires_at=float(row["expires_at"]), commit=row.get("commit"), score=score,
        root_cause=root_cause.splitlines()[0] if root_cause else "", culprit=culprit_text(analysis),
        verdict=verdict, note=str(row.get("feedback_note") or ""),
    )


def arrow_to_rows(result: Any) -> list[dict[str, Any]]:
    """Rows of a query's Arrow result as dicts, with each vector a row of one float32 matrix instead of a
    Python list."""
    if "vector" not in result.column_names:
        rows: list[dict[str, Any]] = result.to_pylist()
        return rows
    column = result.column("vector").combine_chunks()
    matrix = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), column.type.list_size)
    rows = result.drop_columns(["vector"]).to_pylist()
    for row, vector in zip(rows, matrix, strict=True):
        row["vector"] = vector
    return rows


def fetch_rows(query: Any, limit: int) -> list[dict[str, Any]]:
    """The first `limit` rows of a query as dicts."""
    rows: list[dict[str, Any]] = query.limit(limit).to_list()
    return rows


def arrow_rows(rows: Sequence[Mapping[str, Any]], schema: Any) -> Any:
    """Rows as an Arrow table of `schema`, for a merge or an insert."""
    return pa.Table.from_pylist(list(rows), schema=schema)


def _is_commit_conflict(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "conflict" in text or "retryable commit" in text


def with_retries(operation: Callable[[], T], *, attempts: int, base_s: float, max_s: float,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Run a write; retry lost commit races with capped exponential backoff and full jitter.

    LanceDB commits optimistically, so two writers on one table can race; it rebases most of them
    itself, and what still surfaces as a conflict is retried here, with tenacity's
    `wait_random_exponential`: the service's one retry policy (`consumer.retry`). I/O faults become
    retriable `StoreError`s; anything else propagates unchanged.
    """
    retrying = Retrying(stop=stop_after_attempt(attempts + 1), sleep=sleep, reraise=True,
                        wait=wait_random_exponential(multiplier=base_s, max=max_s),
                        retry=retry_if_exception(_is_commit_conflict))
    try:
        return retrying(operation)
    except OSError as exc:
        if not _is_commit_conflict(exc):
            raise StoreError(f"memory store I/O failed: {exc}", retriable=True) from exc
        raise StoreError(f"memory write kept losing commit races: {exc}", retriable=True) from exc
    except (RuntimeError, ValueError) as exc:
        if not _is_commit_conflict(exc):
            raise
        raise StoreError(f"memory write kept losing commit races: {exc}", retriable=True) from exc
