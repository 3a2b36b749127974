"""Starting a Kafka client gives way to a stop, also in the middle of the start."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from aiokafka import AIOKafkaConsumer

from consumer.kafka import start_with_retry
from consumer.retry import Backoff

pytestmark = pytest.mark.integration


class TestStartWithRetry:
    def test_a_stop_during_a_start_that_never_ends_returns_promptly(self) -> None:
        """A broker that accepts connections and never answers holds `client.start()` for its request
        timeout (40 s); a replica told to stop meanwhile (a roll, Ctrl-C) must not wait for it."""
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]

        async def scenario() -> tuple[bool, float]:
            consumer = AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id="g",
                                        request_timeout_ms=40_000)
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(0.5, stop.set)
            started = time.monotonic()
            result = await start_with_retry(consumer, stop, Backoff(0.1, 1.0, 5), "test consumer")
            return result, time.monotonic() - started

        try:
            result, took = asyncio.run(scenario())
        finally:
            silent.close()
        assert result is False
        assert took < 5.0, f"the stop waited {took:.1f}s for the start"
