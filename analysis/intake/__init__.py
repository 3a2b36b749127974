"""Bytes → `ErrorEvent` → signature: the four input shapes, text traces of four languages, redaction and
the fingerprint that groups a burst. Pure functions over plain data, on the service's hot path.

Submodules are listed rather than imported, so importing one of them loads only what it needs.
"""

__all__ = [
    "decode", "field", "frame_key", "otlp", "redact", "signature", "stacktrace", "structured", "tally",
    "template",
    "trace_dialect", "trace_go", "trace_java", "trace_node", "trace_python",
]  # fmt: skip
