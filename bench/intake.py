"""The service's per-message path without Kafka, for the benchmarks that measure what it holds and costs.

`Intake.add` does what `consumer.pipeline.Service._ingest` does with a message's bytes: decode, redact,
fingerprint, window (bad input is only counted here; the service sends it to the DLQ). When the service
is restructured, this is the one place the memory and scale benchmarks follow it.
"""

from __future__ import annotations

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.redact import Redactor, redact_event
from analysis.intake.signature import fingerprint_event
from consumer.settings import Settings
from consumer.window import BurstWindow

_TP = ("errors", 0)


class Intake:
    """Messages in, bursts open in a `BurstWindow` built from the service's settings (defaults unless given)."""

    def __init__(self, settings: Settings | None = None, *, max_open: int | None = None,
                 count_signatures: bool = False) -> None:
        """`max_open` lifts both open-burst caps (count and bytes), for benches that hold that many open."""
        settings = settings or Settings()
        w = settings.window
        self.max_samples = w.max_samples
        self.window = BurstWindow(w.quiet_s, w.max_length_s, max_open or w.max_open, w.max_samples,
                                  max_open_bytes=1 << 40 if max_open else w.max_open_bytes)
        self._decode = DecodeConfig(max_message_bytes=settings.input.max_message_bytes,
                                    max_depth=settings.input.max_depth, commit_field=settings.input.commit_field,
                                    in_app_prefixes=tuple(settings.input.in_app_prefixes))
        self._prefixes = tuple(settings.input.in_app_prefixes)
        self._redactor = Redactor(settings.redaction)
        self.offset = 0
        self.closed = 0
        self.rejected = 0
        self.signatures: set[tuple[str, str]] | None = set() if count_signatures else None

    def add(self, raw: bytes) -> None:
        """One message, at the next offset of one partition."""
        self.offset += 1
        try:
            events = [redact_event(event, self._redactor) for event in decode_message(raw, self._decode)]
        except BadInput:
            self.rejected += 1
            return
        for event in events:
            signature = fingerprint_event(event, self._prefixes)
            if self.signatures is not None:
                self.signatures.add((event.server_id, signature.fingerprint))
            self.closed += len(self.window.add(event, signature, (_TP, self.offset)))
