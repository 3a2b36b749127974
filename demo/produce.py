"""`python -m demo.produce FILE [--topic T] [--bootstrap-servers HOST:PORT]`: each line of FILE as one message.

To feed `logagent run` by hand, as the README's embedded-broker recipe does: the demo's kept
`events.jsonl` (one message per line, as the demo produced them) into the input topic. Lines go as they
are, without their line break and unchecked (a bad one is the service's to send to the DLQ); blank lines
are skipped. Exit 0 once the broker has every message, 1 when it cannot have them, 2 when FILE cannot be
read: one line on stderr says why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

__all__ = ["main", "produce_lines"]

_WAIT_MS = 10_000  # for the broker


async def produce_lines(bootstrap_servers: str, topic: str, lines: Sequence[bytes]) -> None:
    """Send `lines` to `topic` in order, each as one message without a key; returns once all are acknowledged."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=20,
                                request_timeout_ms=_WAIT_MS, max_request_size=2_000_000)
    try:
        await producer.start()
        # Every topic's metadata, asked without naming it: a broker that creates topics on demand (tansu)
        # would make a mistyped one rather than say it is missing.
        if topic not in (await producer.client.fetch_all_metadata()).topics():
            raise LookupError(f"no topic {topic!r} there (create it first)")
        deliveries = [await producer.send(topic, value=line) for line in lines]
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module doc); returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m demo.produce",
                                     description="Each line of FILE as one message to a Kafka topic.")
    parser.add_argument("file", type=Path, help="one message per line (JSON Lines), such as demo-run/events.jsonl")
    parser.add_argument("--topic", default="errors", help="the topic to send to (default: errors)")
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092", help="default: 127.0.0.1:9092")
    args = parser.parse_args(argv)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # its connection errors: the one line below says it
    try:
        lines = [line.removesuffix(b"\r") for line in args.file.read_bytes().split(b"\n") if line.strip()]
    except OSError as error:
        print(f"demo.produce: cannot read {args.file}: {error.strerror or type(error).__name__}", file=sys.stderr)
        return 2
    try:
        asyncio.run(produce_lines(args.bootstrap_servers, args.topic, lines))
    except (KafkaError, LookupError, OSError, TimeoutError) as error:
        reason = (str(error) or type(error).__name__).splitlines()[0]
        print(f"demo.produce: {args.bootstrap_servers} did not take the messages: {reason}", file=sys.stderr)
        return 1
    print(f"{len(lines)} messages sent to {args.topic} on {args.bootstrap_servers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
