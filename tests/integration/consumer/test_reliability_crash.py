"""Crash safety: `logagent run` SIGKILLed at random points while bursts stream in, restarted each time.

The service runs as a real subprocess on the real tansu broker, reading the real sample repositories.
Whatever the kill interrupted, once the stream is drained every burst has exactly one analysis id on the
output topic (replays may repeat it, never invent a second one), and every input offset either fed a
published burst or went to the DLQ.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from analysis.code.burst import analysis_id
from analysis.code.repo import RepoSync
from analysis.errors import BadInput
from analysis.intake.decode import DecodeConfig, decode_message
from analysis.intake.signature import fingerprint_event
from consumer.explainer import HeuristicAnalyzer
from consumer.metrics import Metrics
from consumer.pipeline import Service
from demo.broker import EmbeddedBroker
from demo.services import SampleService, build_sample_repos
from demo.traces import SampleException, SampleTrace
from tests.conftest import KafkaIO, SettingsFactory, ShopRepos, make_settings, run_until, service_env, shop_error
from tests.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

PROJECT_ROOT = PROJECT_ROOT
T0 = 1_720_000_000.0
ROUND_S = 100.0
"""Event time between rounds: far past the quiet period, so a new round closes the previous one."""
EVENT_GAP_S = 0.25
"""Event time between two events of one burst: well under the quiet period."""
QUIET_S = 1.0
TENANT = "acme"
BAD_MESSAGES = (b"{not json", b'{"server_id": "orders-service", "message": "caf\xe9"}', b"[1, 2]")
_TOKEN = re.compile(r"@@([A-Z0-9_]+)@@")


# --- the stream --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlannedBurst:
    """One burst the generator emits: a bug of a service at the commit deployed in that round."""

    server_id: str
    bug: str
    round: int
    commit: str


@dataclass(frozen=True)
class Stream:
    """Chunks of messages (each holds whole rounds), their keys, and the bursts they form."""

    chunks: list[list[tuple[bytes | None, bytes]]]
    bursts: list[PlannedBurst]


def _fill_tokens(rng: random.Random, *texts: str) -> dict[str, str]:
    return {name: f"{name.lower()}{rng.randrange(10_000, 99_999)}" for text in texts for name in
            _TOKEN.findall(text)}


def _native_exception(exc: SampleException) -> dict[str, Any]:
    frames = [{"function": f.function, "filename": f.filename, "lineno": f.lineno, "module": f.module,
               **({"in_app": f.in_app} if f.in_app is not None else {})} for f in reversed(exc.frames)]
    return {"type": exc.type, "value": exc.value, "stacktrace": frames}


def _encode(service: SampleService, bug: str, trace: SampleTrace, ts: float, rng: random.Random,
            shape: str) -> bytes:
    """One error event as the service would ship it: native (structured chain) or ECS (raw text trace)."""
    sample_bug = service.bug(bug)
    values = _fill_tokens(rng, trace.text, sample_bug.log_message, *(e.value for e in trace.chain))
    trace = trace.render(values)
    message = _TOKEN.sub(lambda m: values.get(m.group(1), m.group(0)), sample_bug.log_message)
    if shape == "native":
        outer, *causes = trace.chain
        return orjson.dumps({
            "server_id": service.server_id, "timestamp": ts, "level": "error", "logger": sample_bug.logger,
            "message": message, "commit": trace.commit, "tenant": TENANT,
            "exception": {**_native_exception(outer), "chained": [_native_exception(c) for c in causes]},
        })
    root = trace.root
    return orjson.dumps({
        "@timestamp": datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds"),
        "service.name": service.server_id, "log.level": "ERROR", "log.logger": sample_bug.logger,
        "message": message, "error.type": root.type, "error.message": root.value,
        "error.stack_trace": trace.text, "service.version": trace.commit, "labels.tenant": TENANT,
    })


def build_crash_stream(services: Mapping[str, SampleService], rounds: int, per_burst: int,
                       rounds_per_chunk: int, rng: random.Random) -> Stream:
    """`rounds` rounds of bursts; in each, every bug of the commit deployed then fails `per_burst` times.

    Bursts of one server overlap in event time (and so interleave in the partition), as real ones do.
    A few malformed messages are mixed into every chunk.
    """
    bursts: list[PlannedBurst] = []
    chunks: list[list[tuple[bytes | None, bytes]]] = []
    timed: list[tuple[float, bytes | None, bytes]] = []
    for r in range(rounds):
        for server_id, service in sorted(services.items()):
            commit = service.deployed[r % len(service.deployed)]
            for index, sample_bug in enumerate(service.bugs):
                trace = service.trace(sample_bug.key, commit)
                if trace is None:
                    continue
                bursts.append(PlannedBurst(server_id, sample_bug.key, r, commit))
                start = T0 + r * ROUND_S + rng.uniform(0.0, 2.0)
                shape = ("native", "ecs")[(r + index) % 2]
                for k in range(per_burst):
                    ts = round(start + k * EVENT_GAP_S, 3)
                    timed.append((ts, server_id.encode(), _encode(service, sample_bug.key, trace, ts, rng, shape)))
        if (r + 1) % rounds_per_chunk == 0 or r == rounds - 1:
            timed.sort(key=lambda item: item[0])
            chunk: list[tuple[bytes | None, bytes]] = [(key, value) for _, key, value in timed]
            for bad in BAD_MESSAGES:
                chunk.insert(rng.randrange(len(chunk) + 1), (None, bad))
            chunks.append(chunk)
            timed = []
    return Stream(chunks, bursts)


def expected_ids(stream: Stream) -> dict[str, int]:
    """analysis id -> event count of every planned burst, through the real decoder and fingerprint."""
    config = DecodeConfig()
    first: dict[tuple[str, str, int], float] = {}
    counts: Counter[tuple[str, str, int]] = Counter()
    for chunk in stream.chunks:
        for _, value in chunk:
            with contextlib.suppress(BadInput):
                for event in decode_message(value, config):
                    key = (event.server_id, fingerprint_event(event).fingerprint,
                           int((event.timestamp - T0) // ROUND_S))
                    first[key] = min(first.get(key, event.timestamp), event.timestamp)
                    counts[key] += 1
    # One fingerprint per planned burst, or the plan (not the service) is wrong.
    assert len(first) == len(stream.bursts), "two planned bursts share a fingerprint"
    return {analysis_id(server, TENANT, fp, first[(server, fp, r)]): counts[(server, fp, r)] for server, fp, r in first}


# --- the service as a subprocess ---------------------------------------------------------------------

class ServiceProcess:
    """One `python -m consumer.cli <command>` process (`run` by default); its stdout (JSON log lines) is
    collected as it comes, and `on_line` counts what a test waits for."""

    command = "run"

    def __init__(self, env: Mapping[str, str], log: list[str]) -> None:
        self._env = dict(env)
        self.log = log
        self.reset()
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    def reset(self) -> None:
        """Forget the counts of the previous process."""
        self.analysed, self.assigned = 0, False

    def on_line(self, line: str) -> None:
        """Count published analyses and note the first assignment."""
        if '"burst analysed"' in line:
            self.analysed += 1
        elif "newly assigned partitions" in line:
            self.assigned = True

    async def start(self) -> None:
        """Spawn the service."""
        self.reset()
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "consumer.cli", self.command, cwd=PROJECT_ROOT, env=self._env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        async for raw in self._process.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.log.append(line)
            self.on_line(line)

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.returncode is None

    def kill_if_running(self) -> None:
        """SIGKILL the process if it still runs (cleanup after a failure)."""
        if self._process is not None and self._process.returncode is None:
            self._process.kill()

    async def signal(self, signum: int, timeout_s: float = 30.0) -> int:
        """Send `signum`, wait for the exit, return the exit code."""
        assert self._process is not None
        self._process.send_signal(signum)
        code = await asyncio.wait_for(self._process.wait(), timeout_s)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, timeout_s)
        return code


# --- the test ---------------------------------------------------------------------------------------

@dataclass
class CrashRun:
    """What the crash scenario did and left behind."""

    seed: int
    kills: int
    analysed_before_kill: list[int]
    expected: dict[str, int]
    outputs: list[dict[str, Any]]
    dlq: list[tuple[int, int]]
    bad_positions: list[tuple[int, int]]
    committed: dict[int, int | None]
    ends: dict[int, int]
    final_exit: int
    log: list[str]


def _analysed_at_least(service: ServiceProcess, target: int) -> bool:
    return not service.running or service.analysed >= target


async def _poll(condition: Callable[[], bool], timeout_s: float) -> None:
    """Wait until `condition()` holds or `timeout_s` passed (the caller decides what a timeout means)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.02)


async def _wait_for(condition: Any, timeout_s: float, what: str, found: Callable[[], str] = str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout_s}s: {found()}")
        await asyncio.sleep(0.5)


def run_crash_scenario(tansu: EmbeddedBroker, tmp: Path, kills: int, seed: int) -> CrashRun:
    """Stream chunks of bursts while the service is SIGKILLed `kills` times, then drain and stop it."""
    rng = random.Random(seed)
    services = build_sample_repos(tmp / "samples")
    repos_file = tmp / "repos.json"
    repos_file.write_bytes(orjson.dumps({s: {"url": svc.repo.resolve().as_uri()} for s, svc in services.items()}))
    settings = make_settings(tansu.bootstrap_servers, tmp / "data", partitions=2,
                             window={"quiet_s": QUIET_S, "max_length_s": 600.0},
                             pipeline={"max_inflight": 2, "shutdown_grace_s": 5.0})
    stream = build_crash_stream(services, rounds=12, per_burst=8, rounds_per_chunk=2, rng=rng)
    expected = expected_ids(stream)
    io = KafkaIO(tansu.bootstrap_servers)
    kafka = settings.kafka
    log: list[str] = []
    analysed_before_kill: list[int] = []

    async def produce_chunks() -> None:
        for chunk in stream.chunks:
            await io.produce(kafka.input_topic, [v for _, v in chunk], keys=[k for k, _ in chunk])
            await asyncio.sleep(rng.uniform(0.5, 1.5))

    async def scenario() -> int:
        service = ServiceProcess(service_env(settings, repos_file), log)
        try:
            return await kill_and_drain(service)
        finally:
            service.kill_if_running()  # a failed scenario must not leave a service behind

    async def kill_and_drain(service: ServiceProcess) -> int:
        producer = asyncio.create_task(produce_chunks())
        for kill in range(kills):
            await service.start()
            # Kill at a random point of the work: once the group gave it partitions, after a random number
            # of published analyses plus a random delay (or blindly when no more analyses come). The first
            # two kills wait for an analysis however loaded the machine is, so at least two land mid-work.
            await _poll(lambda: not service.running or service.assigned, 10.0)
            if kill < 2:
                await _poll(partial(_analysed_at_least, service, 1), 60.0)
            await _poll(partial(_analysed_at_least, service, rng.randint(0, 4)), rng.uniform(1.0, 3.0))
            await asyncio.sleep(rng.uniform(0.0, 0.4))
            analysed_before_kill.append(service.analysed)
            assert service.running, f"the service exited by itself: {log[-5:]}"
            await service.signal(signal.SIGKILL)
        await producer
        await service.start()

        seen: list[str] = []  # what the last look found, for the failure message

        async def drained() -> bool:
            ids = {orjson.loads(r.value)["data"]["analysis_id"] for r in await io.read_all(kafka.output_topic)}
            dlq = await io.read_all(kafka.dlq_topic)
            dead = len({(r.headers["source_partition"], r.headers["source_offset"]) for r in dlq})
            seen[:] = [f"{len(expected.keys() - ids)} ids missing, {dead} DLQ positions"]
            if not ids >= expected.keys() or dead < len(BAD_MESSAGES) * len(stream.chunks):
                return False
            # Reading the group's offsets does not join the group: the running service is not disturbed.
            ends = await io.end_offsets(kafka.input_topic)
            committed = await io.committed(kafka.group_id, kafka.input_topic)
            seen[:] = [f"committed {committed}, ends {ends}, partitions assigned: {service.assigned}"]
            # The killed services may have done all the work: the last one is stopped once it runs, so that
            # the stop tested is its clean shutdown, not a SIGTERM that lands while it still imports.
            return committed == ends and service.assigned

        await _wait_for(drained, 60.0, "drain after the last restart (all ids out, offsets at the end)",
                        lambda: f"seed {seed}; {seen[-1] if seen else 'nothing read'}; log {log[-5:]}")
        return await service.signal(signal.SIGTERM)

    final_exit = asyncio.run(scenario())
    inputs = asyncio.run(io.read_all(kafka.input_topic))
    bad_positions = sorted((r.partition, r.offset) for r in inputs if r.value in BAD_MESSAGES)
    dlq = asyncio.run(io.read_all(kafka.dlq_topic))
    return CrashRun(
        seed=seed, kills=kills, analysed_before_kill=analysed_before_kill, expected=expected,
        outputs=[orjson.loads(r.value) for r in asyncio.run(io.read_all(kafka.output_topic))],
        dlq=sorted({(int(r.headers["source_partition"]), int(r.headers["source_offset"])) for r in dlq}),
        bad_positions=bad_positions,
        committed=asyncio.run(io.committed(kafka.group_id, kafka.input_topic)),
        ends=asyncio.run(io.end_offsets(kafka.input_topic)), final_exit=final_exit, log=log,
    )


@pytest.fixture(scope="module")
def crash_run(tansu: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> CrashRun:
    """Six SIGKILLs of the running service over a 12-round stream (about 70 bursts), then a clean drain. A
    failure names its seed; `CRASH_SEED=N` replays it."""
    seed = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1 << 30))
    return run_crash_scenario(tansu, tmp_path_factory.mktemp("crash"), kills=6, seed=seed)


class TestCrashRecovery:
    def test_every_burst_has_exactly_one_analysis_id(self, crash_run: CrashRun) -> None:
        """The set of published analysis ids is exactly the set of bursts: none lost, none invented."""
        published = Counter(event["data"]["analysis_id"] for event in crash_run.outputs)
        lost = crash_run.expected.keys() - published.keys()
        invented = published.keys() - crash_run.expected.keys()
        assert not lost and not invented, (
            f"seed {crash_run.seed}: {len(lost)} lost, {len(invented)} invented of {len(crash_run.expected)}")
        assert crash_run.kills >= 5

    def test_replays_repeat_the_whole_burst_under_the_same_id(self, crash_run: CrashRun) -> None:
        """Every published copy of a burst's analysis counts all of its events: nothing was split off."""
        counts: defaultdict[str, set[int]] = defaultdict(set)
        for event in crash_run.outputs:
            counts[event["data"]["analysis_id"]].add(event["data"]["cluster"]["count"])
        wrong = {i: c for i, c in counts.items() if c != {crash_run.expected.get(i)}}
        assert not wrong, f"seed {crash_run.seed}: counts differ from the bursts' events: {wrong}"
        assert {event["id"] for event in crash_run.outputs} == crash_run.expected.keys()

    def test_every_bad_message_reached_the_dlq_and_offsets_are_committed_to_the_end(
            self, crash_run: CrashRun) -> None:
        """Each malformed input offset is in the DLQ, and the group committed every partition to its end."""
        assert crash_run.dlq == crash_run.bad_positions
        assert crash_run.committed == {p: end or None for p, end in crash_run.ends.items()}
        assert crash_run.final_exit == 0

    def test_kills_landed_while_work_was_in_progress(self, crash_run: CrashRun) -> None:
        """The kills were not all before the first analysis: some interrupted a service mid-stream."""
        assert sum(1 for n in crash_run.analysed_before_kill if n > 0) >= 2, crash_run.analysed_before_kill
        assert any('"burst analysed"' in line for line in crash_run.log)



class TestReplayOfInterleavedBursts:
    def test_a_restart_does_not_split_off_a_published_burst_that_interleaves_an_open_one(
            self, settings_factory: SettingsFactory, kafka_io: KafkaIO,
            shop_repos: Callable[..., ShopRepos]) -> None:
        """Burst A (offsets 0, 2, 4) is published while burst B (1, 3, 5, ...) is still open, so the commit
        point cannot pass B's first offset; after a restart the replay must not turn A's tail into a second
        burst with a new id: every published copy of A counts its 3 events.
        """
        repos = shop_repos("orders")
        commit = repos.commits["orders"]
        first = settings_factory(partitions=1, window={"quiet_s": 0.5})
        head: list[bytes] = []
        for i in range(3):  # A and B interleave for their first events
            head.append(shop_error("orders", "total", T0 + i * 0.1, commit, n=i))
            head.append(shop_error("orders", "split", T0 + 0.05 + i * 0.1, commit, n=i))
        service = Service(first, HeuristicAnalyzer(RepoSync(repos.config)), Metrics())
        b_events = 3

        async def first_run() -> None:
            nonlocal b_events
            await kafka_io.produce(first.kafka.input_topic, head)
            stop = asyncio.Event()
            running = asyncio.create_task(run_until(service, lambda: service.stats.published >= 1,
                                                    timeout_s=20, stop=stop))
            # B keeps failing (in event and wall time) until A, gone quiet, is published.
            while not running.done():
                await kafka_io.produce(first.kafka.input_topic, [
                    shop_error("orders", "split", T0 + 0.05 + b_events * 0.1, commit, n=b_events)])
                b_events += 1
                await asyncio.sleep(0.1)
            await running

        asyncio.run(first_run())
        restarted = Service(settings_factory(like=first, partitions=1),
                            HeuristicAnalyzer(RepoSync(repos.config)), Metrics())
        asyncio.run(run_until(restarted, restarted.idle))
        events = [orjson.loads(r.value)["data"] for r in asyncio.run(kafka_io.read_all(first.kafka.output_topic))]
        published = {(e["cluster"]["exception_type"], e["analysis_id"], e["cluster"]["count"]) for e in events}
        assert published == {("KeyError", _shop_id(head[0]), 3), ("ZeroDivisionError", _shop_id(head[1]), b_events)}


def _shop_id(raw: bytes) -> str:
    """The analysis id of the burst that starts with this message."""
    (event,) = decode_message(raw, DecodeConfig())
    return analysis_id(event.server_id, event.tenant, fingerprint_event(event).fingerprint, event.timestamp)
