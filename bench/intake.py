"""The service's per-message path without Kafka, for the benchmarks that measure what it holds and costs.

`Intake.add` does what `consumer.pipeline.Service._ingest` does with a message's bytes: decode, redact,
fingerprint, window (bad input is only counted here; the service sends it to the DLQ); with `expire_every`
it also closes the quiet bursts as the service's periodic expiry does, the events' times standing in for
broker times. When the service is restructured, this is the one place the memory and scale benchmarks
follow it.
"""

from __future__ import annotations

import time

from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig
from analysis.intake.redact import Redactor
from consumer.keying import KeyReader
from consumer.settings import Settings
from consumer.window import BurstWindow
from consumer.window_stage import sample_builder

_TP = ("errors", 0)


class Intake:
    """Messages in, bursts open in a `BurstWindow` built from the service's settings (defaults unless given)."""

    def __init__(self, settings: Settings | None = None, *, max_open: int | None = None,
                 count_signatures: bool = False, expire_every: int = 0) -> None:
        """`max_open` lifts both open-burst caps (count and bytes), for benches that hold that many open;
        `expire_every` N messages, the bursts that no event can join any more close (0: never)."""
        settings = settings or Settings()
        w = settings.window
        self.max_samples = w.max_samples
        decode = DecodeConfig(max_message_bytes=settings.input.max_message_bytes,
                              max_depth=settings.input.max_depth, commit_field=settings.input.commit_field,
                              in_app_prefixes=tuple(settings.input.in_app_prefixes))
        redactor = Redactor(settings.redaction)
        self._reader = KeyReader(decode, redactor)
        self.window = BurstWindow(w.quiet_s, w.max_length_s, max_open or w.max_open, w.max_samples,
                                  sample_builder(decode, redactor),
                                  max_open_bytes=1 << 40 if max_open else w.max_open_bytes)
        self.expire_every = expire_every
        self.latest = 0.0
        self.offset = 0
        self.closed = 0
        self.rejected = 0
        self.signatures: set[tuple[str, str]] | None = set() if count_signatures else None

    def add(self, raw: bytes) -> None:
        """One message, at the next offset of one partition."""
        self.offset += 1
        try:
            sightings = self._reader.read_sightings(raw, received_at=0.0)
        except BadInput:
            self.rejected += 1
            return
        for index, sighting in enumerate(sightings):
            if self.signatures is not None:
                self.signatures.add((sighting.server, sighting.fingerprint))
            sample = (raw, index, sighting.timestamp)
            self.closed += len(self.window.add(sighting, sample, (_TP, self.offset), sighting.timestamp))
            self.latest = max(self.latest, sighting.timestamp)
        if self.expire_every and self.offset % self.expire_every == 0:
            self.closed += len(self.window.expire(time.monotonic(), lambda _: (self.latest, None)))
