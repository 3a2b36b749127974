"""`python -m demo.produce FILE [--topic T] [--bootstrap-servers HOST:PORT]`: each line of FILE as one message.

To feed `logagent run` by hand, as the README's embedded-broker recipe does: the demo's kept
`events.jsonl` (one message per line, as the demo produced them) into the input topic. Lines go as they
are, without their line break and unchecked (a bad one is the service's to send to the DLQ), spread over
the topic's partitions (order holds within each); blank lines are skipped. The file is read whole before
anything is sent, and a line longer than a message may be stops it there. Exit 0 once the broker has every
message; 1 when it cannot have them (how many it acknowledged is said); 2 when FILE cannot be read or has a
line too long, or for a malformed address; 130 on Ctrl-C: one line on stderr says why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from demo.broker import bootstrap_servers

__all__ = ["MAX_LINE_BYTES", "main", "produce_lines", "read_lines"]

_WAIT_MS = 10_000  # for the broker
_MAX_REQUEST_BYTES = 2_000_000
MAX_LINE_BYTES = _MAX_REQUEST_BYTES - 4_096
"""The longest line sent: one message, with its record and request headers, within one client request. A
broker may take less (Kafka's `message.max.bytes` is about 1 MiB by default; tansu takes this much): it
refuses such a line, and the tool stops there, saying how many were acknowledged."""


class BadFile(Exception):
    """FILE cannot be read, or has a line longer than a message may be."""


@dataclass
class Delivered:
    """How many messages were handed to the producer, and how many the broker acknowledged so far."""

    handed: int = 0
    count: int = 0


def read_lines(path: Path) -> tuple[list[bytes], int]:
    """The non-blank lines of `path`, without their line breaks (LF or CRLF), and how many blank ones were
    skipped. Raises `BadFile` for a file it cannot read or a line over `MAX_LINE_BYTES` (never reading
    more of it than that: /dev/zero ends at once)."""
    lines, blank = [], 0
    try:
        with path.open("rb") as file:
            for number, line in enumerate(iter(lambda: file.readline(MAX_LINE_BYTES + 3), b""), start=1):
                line = line.removesuffix(b"\n").removesuffix(b"\r")
                if len(line) > MAX_LINE_BYTES:
                    raise BadFile(f"line {number} of {path} is over {MAX_LINE_BYTES:,} bytes, the most one message "
                                  "may be here")
                if line.strip():
                    lines.append(line)
                else:
                    blank += 1
    except OSError as error:
        raise BadFile(f"cannot read {path}: {error.strerror or type(error).__name__}") from None
    return lines, blank


async def produce_lines(bootstrap_servers: str, topic: str, lines: Sequence[bytes], delivered: Delivered) -> None:
    """Send `lines` to `topic`, each as one message without a key; returns once all are acknowledged
    (`delivered` counts them as they are)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=20,
                                request_timeout_ms=_WAIT_MS, max_request_size=_MAX_REQUEST_BYTES)

    def acknowledged(delivery: asyncio.Future[object]) -> None:
        if not delivery.cancelled() and delivery.exception() is None:
            delivered.count += 1

    try:
        await producer.start()
        # Every topic's metadata, asked without naming it: a broker that creates topics on demand (tansu)
        # would make a mistyped one rather than say it is missing.
        if topic not in (await producer.client.fetch_all_metadata()).topics():
            raise LookupError(f"no topic {topic!r} there (create it first)")
        deliveries = []
        for line in lines:
            delivery = await producer.send(topic, value=line)
            delivered.handed += 1
            delivery.add_done_callback(acknowledged)
            deliveries.append(delivery)
        await asyncio.gather(*deliveries)
    finally:
        await producer.stop()  # waits for what was handed over: it may still be delivered


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module doc); returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m demo.produce",
                                     description="Each line of FILE as one message to a Kafka topic.")
    parser.add_argument("file", type=Path, help="one message per line (JSON Lines), such as demo-run/events.jsonl")
    parser.add_argument("--topic", default="errors", help="the topic to send to (default: errors)")
    parser.add_argument("--bootstrap-servers", type=bootstrap_servers, default="127.0.0.1:9092",
                        help="HOST:PORT[,HOST:PORT...] (default: 127.0.0.1:9092)")
    args = parser.parse_args(argv)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # its connection errors: the one line below says it
    delivered = Delivered()
    try:
        lines, blank = read_lines(args.file)
        asyncio.run(produce_lines(args.bootstrap_servers, args.topic, lines, delivered))
    except BadFile as error:
        print(f"demo.produce: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # what was handed over may still arrive: resend nothing on this count alone
        unknown = delivered.handed - delivered.count
        print(f"demo.produce: interrupted; {delivered.count} messages acknowledged"
              + (f", {unknown} more handed to the broker may have arrived" if unknown else ""), file=sys.stderr)
        return 130
    except (KafkaError, LookupError, OSError, OverflowError, TimeoutError, ValueError) as error:
        reason = (str(error) or type(error).__name__).splitlines()[0]
        print(f"demo.produce: {args.bootstrap_servers} did not take every message ({delivered.count} of {len(lines)} "
              f"acknowledged): {reason}", file=sys.stderr)
        return 1
    skipped = f" ({blank} blank lines skipped)" if blank else ""
    messages = f"{len(lines)} message" + ("" if len(lines) == 1 else "s")
    print(f"{messages} sent to {args.topic} on {args.bootstrap_servers}{skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
