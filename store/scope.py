"""Scoping: safe SQL literals for LanceDB `where` filters, table names, and the Python post-filter.

Tenant, scope and fingerprint values come from untrusted logs, so they are never interpolated raw: each
becomes a quoted SQL literal (quotes doubled, control characters refused). Whatever the query returns is
checked again in Python before it can reach a prompt.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from store.errors import RefusedCase

TABLE_PREFIX = "memory_"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def table_name(server: str) -> str:
    """`memory_<server>`; a server id that needed sanitising gets a hash suffix so ids never collide."""
    if not server:
        raise RefusedCase("empty server id")
    safe = _SAFE_NAME.sub("_", server)[:_MAX_NAME]
    if safe == server:
        return TABLE_PREFIX + safe
    digest = hashlib.sha256(server.encode()).hexdigest()[:10]
    return f"{TABLE_PREFIX}{safe}_{digest}"


def sql_string(value: str) -> str:
    """A single-quoted SQL string literal; refuses control characters rather than guessing an escape."""
    if _CONTROL.search(value):
        raise RefusedCase("control character in a filter value")
    return "'" + value.replace("'", "''") + "'"


def case_filter(case_id: str, tenant: str | None = None) -> str:
    """The filter of one case by id, and of that tenant's only when `tenant` is given."""
    where = f"id = {sql_string(case_id)}"
    return where if tenant is None else f"{where} AND tenant = {sql_string(tenant)}"


def sql_float(value: float) -> str:
    """A SQL float literal; refuses NaN and infinities."""
    if not math.isfinite(value):
        raise RefusedCase("non-finite number in a filter value")
    return repr(float(value))


def scope_filter(*, server: str | None, tenant: str, scope: str | None, now: float | None) -> str:
    """The pre-filter of every recall: this tenant (and scope), not expired unless `now` is None, and this
    server when given (a store query may leave it out: each server has its own table, and `post_filter`
    checks it; so does expiry)."""
    clauses = [f"server = {sql_string(server)}"] if server is not None else []
    clauses.append(f"tenant = {sql_string(tenant)}")
    if scope is not None:
        clauses.append(f"scope = {sql_string(scope)}")
    if now is not None:
        clauses.append(f"expires_at > {sql_float(now)}")
    return " AND ".join(clauses)


def alive(row: Mapping[str, Any], now: float) -> bool:
    """True when the row's `expires_at` is a number after `now`."""
    expires_at = row.get("expires_at")
    return isinstance(expires_at, float | int) and float(expires_at) > now


def admissible(row: Mapping[str, Any], *, server: str, tenant: str, scope: str | None, now: float) -> bool:
    """True when a returned row really belongs to this server, tenant (and scope) and is not expired."""
    return (
        row.get("server") == server
        and row.get("tenant") == tenant
        and (scope is None or row.get("scope") == scope)
        and alive(row, now)
    )


def post_filter(rows: Iterable[Mapping[str, Any]], *, server: str, tenant: str, scope: str | None,
                now: float) -> list[Mapping[str, Any]]:
    """Rows that pass `admissible`; defence in depth behind the query's own filter."""
    return [row for row in rows if admissible(row, server=server, tenant=tenant, scope=scope, now=now)]
