"""Injection hygiene for recalled cases: spot contaminated text and build the short text to inject.

Recalled cases are data from past untrusted logs and past model output. Anything that reads like an
instruction to the model, like a tool call, or names another tenant is reported so the pipeline can
flag the analysis for human review.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|all|your|the)\b"
    r"[^.\n]{0,20}\b(?:instructions?|prompts?|rules?|context)\b"
    r"|\byou are now\b|\bnew instructions?\b|\bsystem prompt\b|<\|im_start\|>|\[INST\]|###\s*instruction",
    re.IGNORECASE,
)
_TOOL_CALL = re.compile(
    r"\"?tool_calls?\"?\s*:|\"?function_call\"?\s*:|<tool_call>|\"name\"\s*:\s*\"[^\"]+\"\s*,\s*\"arguments\"",
    re.IGNORECASE,
)
_TENANT_MARKER = re.compile(r"\btenant(?:_id|Id)?\b[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9_.\-]+)", re.IGNORECASE)
_SUMMARY_FIELD_CHARS = 600


def contamination_reasons(text: str, tenant: str) -> tuple[str, ...]:
    """Reasons `text` should not be trusted blindly: instruction-like or tool-call-like text, or a
    marker naming a tenant other than `tenant`. Empty when clean."""
    reasons: list[str] = []
    if _INSTRUCTION.search(text):
        reasons.append("instruction-like text in recalled case")
    if _TOOL_CALL.search(text):
        reasons.append("tool-call-like text in recalled case")
    if any(m.group(1) != tenant for m in _TENANT_MARKER.finditer(text)):
        reasons.append("another tenant's marker in recalled case")
    return tuple(reasons)


def _text(value: Any) -> str:
    return value.strip()[:_SUMMARY_FIELD_CHARS] if isinstance(value, str) else ""


def summarise(analysis: Mapping[str, Any]) -> str:
    """The few lines of a past analysis worth showing the model: root cause, culprit, fix explanation."""
    lines = []
    root_cause = _text(analysis.get("root_cause"))
    if root_cause:
        lines.append(f"root cause: {root_cause}")
    culprit = analysis.get("culprit")
    if isinstance(culprit, Mapping) and _text(culprit.get("path")):
        path, line = _text(culprit.get("path")), culprit.get("line")
        where = f"{path}:{line}" if isinstance(line, int) else path
        function = _text(culprit.get("function"))
        lines.append(f"culprit: {where}" + (f" ({function})" if function else ""))
    fix = analysis.get("fix")
    if isinstance(fix, Mapping) and _text(fix.get("explanation")):
        lines.append(f"fix: {_text(fix.get('explanation'))}")
    return "\n".join(lines)
