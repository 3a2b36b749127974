"""`python -m demo.read TOPIC [--bootstrap-servers HOST:PORT]`: every record of a topic, one JSON line each.

To see what `logagent run` published, as the README's embedded-broker recipe does: the analyses on
`analyses`, the bad input on `errors.dlq` (with its `reason` and `error` headers). Every partition is read
from its start to its end as of the call, without a consumer group (nothing is committed), and each record
printed as `{"partition", "offset", "key", "headers", "value"}`, partition by partition in offset order:
`headers` as [name, value] pairs in their order (a name may repeat), `value` the value as parsed JSON, or
`text` in its place for a value that is not one UTF-8 JSON value with each key once. Bytes that are not
UTF-8 show as `\\xNN` escapes. Exit 0 at the end; 1 when the broker or the topic is not there, or the end
is not reached in 30 s (what was read is printed first); 2 for a malformed address; 130 on Ctrl-C: one line
on stderr says why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from demo.broker import bootstrap_servers

__all__ = ["main", "read_topic"]

_WAIT_S = 30.0  # to reach the end of every partition


async def read_topic(bootstrap_servers: str, topic: str, emit: Callable[[str], object]) -> int:
    """Pass every record of `topic` to `emit` as its JSON line, partition by partition in offset order;
    returns how many. The end is the high watermark of the fetches themselves (tansu's ListOffsets answers
    the last batch's base offset, not the log end). Past `_WAIT_S`, what was read is emitted and
    `TimeoutError` raised."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                                fetch_max_wait_ms=10, request_timeout_ms=10_000)
    records: dict[int, list[str]] = {}
    try:
        await consumer.start()
        # Every topic's metadata, asked without naming it: no broker creates a topic for this.
        if topic not in await consumer.topics():
            raise LookupError(f"no topic {topic!r} there")
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            raise LookupError(f"no partitions of {topic!r} in the broker's metadata")
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        records = {tp.partition: [] for tp in partitions}
        deadline = asyncio.get_running_loop().time() + _WAIT_S
        while [tp for tp in partitions if await _behind(consumer, tp)]:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"the end of {topic!r} was not reached in {_WAIT_S:.0f} s")
            for tp, batch in (await consumer.getmany(timeout_ms=50)).items():
                records[tp.partition] += [_line(message) for message in batch]
    finally:
        await consumer.stop()
        for partition in sorted(records):
            for record in records[partition]:
                emit(record)
    return sum(map(len, records.values()))


async def _behind(consumer: AIOKafkaConsumer, tp: TopicPartition) -> bool:
    highwater = consumer.highwater(tp)
    return highwater is None or bool(await consumer.position(tp) < highwater)


def _line(message: Any) -> str:
    """One record as its JSON line (module doc)."""
    record = {"partition": message.partition, "offset": message.offset, "key": _text(message.key),
              "headers": [[name, _text(value)] for name, value in message.headers]}
    try:
        # UTF-8 only (json.loads would read bytes as UTF-16 or 32 too), one value per key, printable as
        # UTF-8 (not NaN, no lone surrogate, not nested too deep): else the value is shown as text.
        record["value"] = None if message.value is None else json.loads(message.value.decode("utf-8"),
                                                                          object_pairs_hook=_no_repeated_keys)
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        line.encode("utf-8")
    except (ValueError, RecursionError):
        record.pop("value", None)  # set unless the value did not parse
        record["text"] = _text(message.value)
        line = json.dumps(record, ensure_ascii=False)  # its strings are decoded with escapes: always printable
    return line


def _no_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({key for key, _ in pairs}) < len(pairs):
        raise ValueError("a key repeated in one object: parsing would keep only the last")
    return dict(pairs)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (module doc); returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m demo.read",
                                     description="Every record of a Kafka topic, one JSON line each.")
    parser.add_argument("topic", help="the topic to read, such as analyses or errors.dlq")
    parser.add_argument("--bootstrap-servers", type=bootstrap_servers, default="127.0.0.1:9092",
                        help="HOST:PORT[,HOST:PORT...] (default: 127.0.0.1:9092)")
    args = parser.parse_args(argv)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # its connection errors: the one line below says it

    try:
        asyncio.run(read_topic(args.bootstrap_servers, args.topic, lambda line: sys.stdout.write(line + "\n")))
    except BrokenPipeError:  # `| head`: the reader had enough, as with any command that prints
        sys.stdout = None  # nothing more to flush at exit
        return 0
    except KeyboardInterrupt:
        print("demo.read: interrupted", file=sys.stderr)
        return 130
    except (KafkaError, LookupError, OSError, OverflowError, TimeoutError, ValueError) as error:
        reason = (str(error) or type(error).__name__).splitlines()[0]
        print(f"demo.read: {args.bootstrap_servers}: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
