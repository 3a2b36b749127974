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
# A literal every match of each pattern above contains (lower-cased). In ASCII text a case-insensitive
# match is a match of the lower-cased text, so a pattern none of whose literals occur cannot match and is
# not run: the three searches cost about 0.55 ms per recalled case of 1.5 kB, the literal checks 10 us.
# (Other text is searched in full: Unicode case folding matches more than `str.lower` does, e.g. the long s
# matches 's'.)
_INSTRUCTION_WORDS = ("ignore", "disregard", "forget", "override", "you are now", "new instruction",
                      "system prompt", "<|im_start|>", "[inst]", "###")
_TOOL_CALL_WORDS = ("tool_call", "function_call", '"name"')
_TENANT_WORDS = ("tenant",)


def contamination_reasons(text: str, tenant: str) -> tuple[str, ...]:
    """Reasons `text` should not be trusted blindly: instruction-like or tool-call-like text, or a
    marker naming a tenant other than `tenant`. Empty when clean."""
    lowered = text.lower() if text.isascii() else None

    def may_match(words: tuple[str, ...]) -> bool:
        return lowered is None or any(word in lowered for word in words)

    reasons: list[str] = []
    if may_match(_INSTRUCTION_WORDS) and _INSTRUCTION.search(text):
        reasons.append("instruction-like text in recalled case")
    if may_match(_TOOL_CALL_WORDS) and _TOOL_CALL.search(text):
        reasons.append("tool-call-like text in recalled case")
    if may_match(_TENANT_WORDS) and any(m.group(1) != tenant for m in _TENANT_MARKER.finditer(text)):
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
