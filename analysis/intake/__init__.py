"""Bytes → `ErrorEvent` → signature: the four input shapes, text traces of four languages, redaction and
the fingerprint that groups a burst. Pure functions over plain data, on the service's hot path.

Submodules are listed rather than imported, so importing one of them loads only what it needs.
"""

__all__ = [
    "decode", "field", "otlp", "redact", "signature", "stacktrace", "tally",
    "trace_dialect", "trace_go", "trace_java", "trace_node", "trace_python",
]  # fmt: skip
