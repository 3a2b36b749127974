"""`python -m bench.topology`: several `logagent run` processes in one group on the embedded broker.

Unkeyed input over 12 partitions (round-robin, as a log shipper without a key sends), heuristic
analysis (no LLM). Three scenarios, in one run:

1. **3 replicas**: rounds of bursts interleaved across servers (each round produced once the previous
   one is published). Analyses published must equal the distinct bursts, each counting all its events.
2. **The same with one replica SIGKILLed and one added mid-stream**: nothing lost; an id published twice
   only as a replay (same id, same count).
3. **A backlog**: every round produced before any replica starts (after an outage), read by 1, 2 and 3
   replicas, with the broker timestamps of a live stream (rounds 100 s apart) or of a bulk import (all
   now). Each replica reads its partitions at its own pace, far apart in event time; the bursts must
   still come out whole, once.
4. **Throughput** with 1, 2 and 3 replicas, with the repartition topic and without it (input keyed by
   server, `input.keyed_by_server=true`): events/s from the replicas' assignment to the last analysis
   published (the final quiet period included, the same for every contender).

Ground truth comes from the stream itself: (server, failure, round) is one burst of `size` events.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from analysis.code.burst import analysis_id
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from demo.broker import EmbeddedBroker, create_topics

_ROOT = Path(__file__).resolve().parents[1]
_PARTITIONS = 12
_FAILURES = (("KeyError", "total"), ("ValueError", "parse_qty"), ("ZeroDivisionError", "split"))
_T0 = 1_770_000_000.0
_OWNED = re.compile(r'"owned":\s*(\d+)')


def burst_events(servers: int, rounds: int, size: int, gap_s: float = 0.01) -> list[list[bytes]]:
    """Per round, every (server, failure) failing `size` times, the servers interleaved in event time."""
    out = []
    for r in range(rounds):
        events = sorted((_T0 + r * 100 + i * gap_s + s * 1e-6 + f * 1e-7, s, f, i)
                        for i in range(size) for s in range(servers) for f in range(len(_FAILURES)))
        out.append([_event(f"svc-{s:02d}", f, ts, i) for ts, s, f, i in events])
    return out


def _event(server: str, failure: int, ts: float, n: int) -> bytes:
    exc_type, function = _FAILURES[failure]
    frames = [{"filename": "app/handler.py", "module": "app.handler", "function": "handle", "lineno": 10,
               "in_app": True},
              {"filename": "app/shop.py", "module": "app.shop", "function": function, "lineno": 3 + failure,
               "in_app": True}]
    return orjson.dumps({"server_id": server, "timestamp": ts, "level": "error", "commit": "a1b2c3d",
                         "message": f"{exc_type}: order {n} failed",
                         "exception": {"type": exc_type, "value": f"order {n}", "stacktrace": frames}})


def expected_ids(rounds: Sequence[Sequence[bytes]], bursts_per_round: int) -> set[str]:
    """The analysis id of every burst, from its first event (real decoder and fingerprint)."""
    ids = set()
    for stream in rounds:
        for raw in stream[:bursts_per_round]:
            (event,) = decode_message(raw, DecodeConfig())
            ids.add(analysis_id(event.server_id, event.tenant, fingerprint_event(event).fingerprint, event.timestamp))
    return ids


@dataclass
class Replica:
    """One `logagent run` process; `owned` follows its partitions-assigned/revoked log lines."""

    env: dict[str, str]
    owned: int = 0
    process: asyncio.subprocess.Process | None = None
    reader: asyncio.Task[None] | None = None
    lines: list[str] = field(default_factory=list)

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "consumer.cli", "run", cwd=_ROOT, env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            if '"partitions-' in line and (owned := _OWNED.search(line)):
                self.owned = int(owned.group(1))

    async def stop(self, signum: int = signal.SIGTERM) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signum)
        try:
            code = await asyncio.wait_for(self.process.wait(), 40)
        except TimeoutError:  # past the shutdown grace: reported, then killed
            print(f"# a replica ignored signal {signum} for 40 s; killed", flush=True)
            self.process.kill()
            code = await self.process.wait()
        if self.reader is not None:
            await asyncio.wait_for(self.reader, 10)
        self.owned = 0
        return code


class Run:
    """Fresh topics and group on `broker`; replicas started with `env(...)`; the output read back."""

    def __init__(self, broker: EmbeddedBroker, workdir: Path, name: str, *, keyed: bool, quiet_s: float) -> None:
        self.bootstrap = broker.bootstrap_servers
        self.input, self.output, self.dlq = f"{name}-errors", f"{name}-analyses", f"{name}-dlq"
        self.group, self.keyed, self.quiet_s = f"{name}-group", keyed, quiet_s
        self.workdir = workdir / name
        self.replicas: list[Replica] = []

    async def setup(self) -> None:
        await create_topics(self.bootstrap, [self.input, self.output, self.dlq], {self.input: _PARTITIONS})

    def _env(self, index: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
        env.update({
            "LOGAGENT_DATA_DIR": str(self.workdir / f"replica-{index}"), "LOGAGENT_LOG_LEVEL": "INFO",
            "LOGAGENT_HTTP__HOST": "127.0.0.1", "LOGAGENT_HTTP__PORT": "0",
            "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": self.bootstrap, "LOGAGENT_KAFKA__INPUT_TOPIC": self.input,
            "LOGAGENT_KAFKA__OUTPUT_TOPIC": self.output, "LOGAGENT_KAFKA__DLQ_TOPIC": self.dlq,
            "LOGAGENT_KAFKA__GROUP_ID": self.group, "LOGAGENT_KAFKA__CLIENT_ID": f"replica-{index}",
            "LOGAGENT_KAFKA__SESSION_TIMEOUT_MS": "3000", "LOGAGENT_KAFKA__HEARTBEAT_INTERVAL_MS": "500",
            "LOGAGENT_KAFKA__REBALANCE_TIMEOUT_MS": "3000", "LOGAGENT_KAFKA__COMMIT_INTERVAL_S": "0.5",
            "LOGAGENT_WINDOW__QUIET_S": str(self.quiet_s), "LOGAGENT_WINDOW__MAX_LENGTH_S": "120",
            "LOGAGENT_PIPELINE__MAX_INFLIGHT": "4", "LOGAGENT_PIPELINE__QUEUE_SIZE": "512",
            "LOGAGENT_PIPELINE__POLL_TIMEOUT_MS": "100",
            "LOGAGENT_INPUT__KEYED_BY_SERVER": str(self.keyed).lower(),
        })
        return env

    async def add_replica(self) -> Replica:
        replica = Replica(self._env(len(self.replicas)))
        self.replicas.append(replica)
        await replica.start()
        return replica

    async def wait_assigned(self) -> None:
        """Until the running replicas own every partition (input, plus repartition unless keyed)."""
        total = _PARTITIONS * (1 if self.keyed else 2)
        running = [r for r in self.replicas if r.process is not None and r.process.returncode is None]
        try:
            await _until(lambda: sum(r.owned for r in running) == total and all(r.owned for r in running),
                         120, "assignment")
        except RuntimeError as error:
            tails = [" | ".join(line.strip()[:300] for line in r.lines[-3:]) for r in running]
            raise RuntimeError(f"{error}; owned {[r.owned for r in running]}; last lines: {tails}") from None

    async def produce(self, stream: Sequence[bytes], timestamp_ms: int | None = None) -> None:
        """Round-robin over the partitions (unkeyed), or keyed by server when the input is keyed; stamped
        `timestamp_ms` (else now)."""
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            sends = []
            for i, raw in enumerate(stream):
                if self.keyed:
                    key = orjson.loads(raw)["server_id"].encode()
                    sends.append(await producer.send(self.input, raw, key=key, timestamp_ms=timestamp_ms))
                else:
                    sends.append(await producer.send(self.input, raw, partition=i % _PARTITIONS,
                                                     timestamp_ms=timestamp_ms))
            await asyncio.gather(*sends)
        finally:
            await producer.stop()

    async def published(self) -> list[dict[str, Any]]:
        """Every analysis on the output topic so far (`data` of each CloudEvent)."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(self.output, p) for p in sorted(consumer.partitions_for_topic(self.output)
                                                                   or await _partitions(consumer, self.output))]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            out: list[dict[str, Any]] = []
            while True:
                batch = await consumer.getmany(timeout_ms=300)
                out += [orjson.loads(m.value or b"{}")["data"] for ms in batch.values() for m in ms]
                if not batch:
                    return out
        finally:
            await consumer.stop()

    async def wait_published(self, at_least: int, timeout_s: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            out = await self.published()
            if len({d["analysis_id"] for d in out}) >= at_least or time.monotonic() > deadline:
                return out
            await asyncio.sleep(0.2)

    async def close(self) -> None:
        for replica in self.replicas:
            if replica.process is not None and replica.process.returncode is None:
                await replica.stop()


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    for _ in range(50):
        await consumer.topics()
        if found := consumer.partitions_for_topic(topic):
            return set(found)
        await asyncio.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no partitions")


async def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not reached in {timeout_s:.0f}s")
        await asyncio.sleep(0.05)


def verdict(out: Sequence[dict[str, Any]], expected: set[str], size: int) -> str:
    """Published vs distinct bursts, split or lost bursts, and copies whose count is not the burst's."""
    ids = Counter(str(d["analysis_id"]) for d in out)
    wrong_count = sum(1 for d in out if d["cluster"]["count"] != size)
    return (f"{len(out)} analyses for {len(expected)} bursts ({len(set(ids) & expected)} distinct ids found, "
            f"{len(expected - set(ids))} lost, {len(set(ids) - expected)} split off, "
            f"{sum(n - 1 for n in ids.values())} replays under the same id, {wrong_count} copies with a count "
            f"other than {size})")


async def correctness(broker: EmbeddedBroker, workdir: Path, *, kill: bool, servers: int, rounds: int,
                      size: int) -> str:
    """Rounds of bursts through 3 replicas (and, with `kill`, replica 0 SIGKILLed and one added after the
    second round)."""
    run = Run(broker, workdir, "kill" if kill else "steady", keyed=False, quiet_s=1.0)
    await run.setup()
    stream = burst_events(servers, rounds, size)
    per_round = servers * len(_FAILURES)
    expected = expected_ids(stream, per_round)
    try:
        for _ in range(3):
            await run.add_replica()
        await run.wait_assigned()
        for r, events in enumerate(stream):
            await run.produce(events)
            if kill and r == 1:
                await asyncio.sleep(0.3)  # mid-round: forwards and analyses in flight
                await run.replicas[0].stop(signal.SIGKILL)
                await run.add_replica()
            await run.wait_published((r + 1) * per_round, 120)
        out = await run.wait_published(len(expected), 60)
    finally:
        await run.close()
    return verdict(out, expected, size)


async def backlog(broker: EmbeddedBroker, workdir: Path, *, replicas: int, live: bool, servers: int, rounds: int,
                  size: int) -> str:
    """Every round in the input before `replicas` processes start; stamped as produced live, or all now."""
    run = Run(broker, workdir, f"backlog-{replicas}-{'live' if live else 'bulk'}", keyed=False, quiet_s=1.0)
    await run.setup()
    stream = burst_events(servers, rounds, size)
    expected = expected_ids(stream, servers * len(_FAILURES))
    for r, events in enumerate(stream):
        await run.produce(events, int((_T0 + r * 100) * 1000) if live else None)
    try:
        for _ in range(replicas):
            await run.add_replica()
        await run.wait_assigned()
        out = await run.wait_published(len(expected), 120)
        await asyncio.sleep(3.0)  # anything split off would come after the expected count
        out = await run.published()
    finally:
        await run.close()
    return verdict(out, expected, size)


async def throughput(broker: EmbeddedBroker, workdir: Path, replicas: int, keyed: bool, servers: int,
                     size: int) -> tuple[float, str]:
    """Events/s of `replicas` processes over one round of large bursts, produced before they start."""
    run = Run(broker, workdir, f"rate-{replicas}-{'keyed' if keyed else 'repartition'}", keyed=keyed,
              quiet_s=2.0)
    await run.setup()
    (events,) = burst_events(servers, 1, size, gap_s=0.001)
    expected = expected_ids([events], servers * len(_FAILURES))
    await run.produce(events)
    try:
        for _ in range(replicas):
            await run.add_replica()
        await run.wait_assigned()
        started = time.monotonic()
        out = await run.wait_published(len(expected), 300)
        elapsed = time.monotonic() - started
    finally:
        await run.close()
    return len(events) / elapsed, verdict(out, expected, size)


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-topology-") as tmp, EmbeddedBroker() as broker:
        workdir = Path(tmp)
        print(f"# bench/topology: {os.cpu_count()} cores, {_PARTITIONS} input partitions, unkeyed", flush=True)
        for kill in (False, True):
            line = await correctness(broker, workdir, kill=kill, servers=args.servers, rounds=args.rounds,
                                     size=args.size)
            print(f"{'kill+add' if kill else '3 replicas'}: {line}", flush=True)
        for replicas, live in ((1, True), (2, True), (3, True), (2, False)):
            line = await backlog(broker, workdir, replicas=replicas, live=live, servers=args.servers,
                                 rounds=args.rounds, size=args.size)
            print(f"backlog, {replicas} replica(s), {'live' if live else 'bulk'} timestamps: {line}", flush=True)
        rates: dict[tuple[int, bool], float] = {}
        for replicas in (1, 2, 3):
            for keyed in (False, True):
                rate, line = await throughput(broker, workdir, replicas, keyed, args.servers, args.burst_size)
                rates[(replicas, keyed)] = rate
                print(f"throughput {replicas} replica(s), {'keyed input' if keyed else 'repartition'}: "
                      f"{rate:,.0f} events/s; {line}", flush=True)
        for replicas in (1, 2, 3):
            rate = rates[(replicas, False)]
            hop, scale = rate / rates[(replicas, True)], rate / rates[(1, False)]
            print(f"repartition at {replicas} replica(s): {hop:.2f}x the keyed rate; {scale:.2f}x one replica",
                  flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.topology", description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=20, help="servers (3 failures each) per round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of bursts in the correctness runs")
    parser.add_argument("--size", type=int, default=5, help="events per burst in the correctness runs")
    parser.add_argument("--burst-size", type=int, default=200, help="events per burst in the throughput runs")
    args = parser.parse_args(argv)
    os.environ.setdefault("LANCE_LOG", "error")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
