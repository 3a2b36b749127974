"""Crash safety of `logagent notify`: the real process SIGKILLed at random points while analyses stream in
and the sinks answer slowly and sometimes fail, restarted each time.

Once the stream is drained: GitHub and GitLab hold exactly one issue per (server, fingerprint), and every
analysis id appears exactly once across its issue's body and comments (no duplicate, none lost); Slack and
the webhook received every analysis (at least once, a replay after a kill may repeat the one in flight);
every sink's consumer group committed to the end of the topic, and nothing went to the DLQ.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import orjson
import pytest

from consumer.notify.notice import issue_key, parse_notice
from demo.broker import EmbeddedBroker, create_topics
from tests.conftest import FAST_GROUP_TIMINGS, KafkaIO
from tests.github_server import GitHubServer, StoredIssue
from tests.gitlab_server import GitLabServer
from tests.integration.consumer.test_reliability_crash import ServiceProcess
from tests.notify_events import T0, event_bytes, make_analysis
from tests.protocol_server import Fault
from tests.slack_server import SlackWebhook
from tests.webhook_server import WebhookReceiver

pytestmark = pytest.mark.integration

REPO = "acme/shop"
SINKS = ("slack", "webhook", "github", "gitlab")
FAILURES = [("checkout-service", "fp-qty"), ("checkout-service", "fp-null"), ("orders-service", "fp-key"),
            ("orders-service", "fp-div"), ("payments-service", "fp-timeout"), ("payments-service", "fp-nil")]


def build_stream(rounds: int, rng: random.Random) -> list[tuple[bytes, bytes]]:
    """(key, event) of every failure in every round: analysed first, then recurrences or new analyses."""
    out: list[tuple[bytes, bytes]] = []
    for r in range(rounds):
        for server, fingerprint in FAILURES:
            status = "analyzed" if r == 0 or rng.random() < 0.3 else "recurrence"
            analysis = make_analysis(server, fingerprint, first_seen=T0 + r * 600 + rng.uniform(0, 5),
                                     status=status, count=rng.randint(5, 300))
            out.append((server.encode(), event_bytes(analysis)))
    return out


class NotifyProcess(ServiceProcess):
    """One `python -m consumer.cli notify`; counts the analyses its sinks finished with."""

    command = "notify"

    def reset(self) -> None:
        """Forget the counts of the previous process."""
        self.handled, self.started = 0, False

    def on_line(self, line: str) -> None:
        """Count finished deliveries and note the start of the lanes."""
        if '"notification handled"' in line:
            self.handled += 1
        elif '"notify started"' in line:
            self.started = True


@dataclass
class Servers:
    """The four protocol servers of the scenario."""

    slack: SlackWebhook
    hook: WebhookReceiver
    github: GitHubServer
    gitlab: GitLabServer


def notify_env(bootstrap: str, topic: str, dlq: str, group: str, servers: Servers, secrets: Path) -> dict[str, str]:
    """The LOGAGENT_* environment a chart would give the notify Deployment (secrets as files)."""
    secrets.mkdir(parents=True, exist_ok=True)
    for name, value in {"slack-url": servers.slack.webhook_url, "hook-secret": servers.hook.secret,
                        "github-token": servers.github.token, "gitlab-token": servers.gitlab.token}.items():
        (secrets / name).write_text(value)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGAGENT_")}
    env.update({
        "LOGAGENT_LOG_LEVEL": "INFO", "LOGAGENT_HTTP__HOST": "127.0.0.1", "LOGAGENT_HTTP__PORT": "0",
        "LOGAGENT_KAFKA__BOOTSTRAP_SERVERS": bootstrap, "LOGAGENT_KAFKA__OUTPUT_TOPIC": topic,
        "LOGAGENT_KAFKA__GROUP_ID": group,
        **{f"LOGAGENT_KAFKA__{k.upper()}": str(v) for k, v in FAST_GROUP_TIMINGS.items()},
        "LOGAGENT_NOTIFY__DLQ_TOPIC": dlq, "LOGAGENT_NOTIFY__TIMEOUT_S": "2",
        "LOGAGENT_NOTIFY__RETRY_INITIAL_S": "0.05", "LOGAGENT_NOTIFY__RETRY_MAX_S": "0.3",
        "LOGAGENT_NOTIFY__RETRY_ATTEMPTS": "20",
        "LOGAGENT_NOTIFY__SLACK__ENABLED": "true",
        "LOGAGENT_NOTIFY__SLACK__WEBHOOK_URL_FILE": str(secrets / "slack-url"),
        "LOGAGENT_NOTIFY__WEBHOOK__ENABLED": "true", "LOGAGENT_NOTIFY__WEBHOOK__URL": servers.hook.hook_url,
        "LOGAGENT_NOTIFY__WEBHOOK__SECRET_FILE": str(secrets / "hook-secret"),
        "LOGAGENT_NOTIFY__GITHUB__ENABLED": "true", "LOGAGENT_NOTIFY__GITHUB__API_URL": servers.github.url,
        "LOGAGENT_NOTIFY__GITHUB__REPO": REPO,
        "LOGAGENT_NOTIFY__GITHUB__TOKEN_FILE": str(secrets / "github-token"),
        "LOGAGENT_NOTIFY__GITLAB__ENABLED": "true", "LOGAGENT_NOTIFY__GITLAB__API_URL": servers.gitlab.api_url,
        "LOGAGENT_NOTIFY__GITLAB__PROJECT": REPO,
        "LOGAGENT_NOTIFY__GITLAB__TOKEN_FILE": str(secrets / "gitlab-token"),
    })
    return env


@dataclass
class CrashRun:
    """What the scenario did and left behind."""

    seed: int
    events: list[bytes]
    handled_before_kill: list[int]
    servers: Servers
    dlq: int
    committed: dict[str, dict[int, int | None]]
    ends: dict[int, int]
    final_exit: int
    log: list[str]


async def _poll(condition: Callable[[], bool], timeout_s: float) -> None:
    """Wait until `condition()` holds or `timeout_s` passed (the caller decides what a timeout means)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.02)


def _handled_at_least(process: NotifyProcess, target: int) -> bool:
    return not process.running or process.handled >= target


def _inject_faults(servers: Servers, rng: random.Random) -> None:
    """A few transient failures per sink: rate limits with Retry-After, 5xx, cut connections."""
    servers.slack.inject(*[rng.choice([Fault.status(429, "rate_limited", {"retry-after": "0"}),
                                       Fault.status(500, "rollup_error")]) for _ in range(3)])
    servers.hook.inject(Fault.status(503, "busy"), Fault.drop_after())
    servers.github.inject(Fault.status(502, "bad gateway"), Fault.drop_after(matches=lambda q: q.method == "POST"),
                          Fault.status(403, '{"message": "secondary rate limit"}', {"retry-after": "0"}))
    servers.gitlab.inject(Fault.status(429, "", {"retry-after": "0"}), Fault.drop_after(
        matches=lambda q: q.method == "POST"))


def run_crash_scenario(tansu: EmbeddedBroker, tmp: Path, kills: int, seed: int) -> CrashRun:
    """Stream analyses in chunks while `logagent notify` is SIGKILLed `kills` times, then drain and stop it."""
    rng = random.Random(seed)
    stream = build_stream(rounds=5, rng=rng)
    chunks = [stream[i:i + 6] for i in range(0, len(stream), 6)]
    topic, dlq, group = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("analyses", "notify-dlq", "notify"))
    asyncio.run(create_topics(tansu.bootstrap_servers, [topic, dlq], {topic: 2}))
    io = KafkaIO(tansu.bootstrap_servers)
    log: list[str] = []
    handled_before_kill: list[int] = []
    delay = 0.03
    servers = Servers(SlackWebhook(delay_s=delay).start(), WebhookReceiver(delay_s=delay).start(),
                      GitHubServer((REPO,), delay_s=delay).start(), GitLabServer((REPO,), delay_s=delay).start())
    _inject_faults(servers, rng)
    env = notify_env(tansu.bootstrap_servers, topic, dlq, group, servers, tmp / "secrets")

    async def produce_chunks() -> None:
        for chunk in chunks:
            await io.produce(topic, [v for _, v in chunk], keys=[k for k, _ in chunk])
            await asyncio.sleep(rng.uniform(0.3, 1.0))

    async def drained() -> bool:
        ends = await io.end_offsets(topic)
        for sink in SINKS:
            committed = await io.committed(f"{group}-notify-{sink}", topic)
            if committed != {p: end or None for p, end in ends.items()}:
                return False
        return True

    async def scenario(process: NotifyProcess) -> int:
        producer = asyncio.create_task(produce_chunks())
        for kill in range(kills):
            await process.start()
            # Kill at a random point of the work: once it runs, after a random number of deliveries plus a
            # random delay (or blindly when no more come in time). The first two kills wait for a delivery
            # however loaded the machine is, so at least two land mid-work.
            await _poll(lambda: not process.running or process.started, 20.0)
            if kill < 2:
                await _poll(partial(_handled_at_least, process, 1), 60.0)
            target = rng.randint(0, 10)
            await _poll(partial(_handled_at_least, process, target), rng.uniform(1.0, 3.0))
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            handled_before_kill.append(process.handled)
            assert process.running, f"notify exited by itself: {log[-5:]}"
            await process.signal(signal.SIGKILL)
        await producer
        await process.start()
        deadline = time.monotonic() + 90
        while not await drained():
            assert time.monotonic() < deadline, "drain after the last restart not reached in 90 s"
            await asyncio.sleep(0.5)
        return await process.signal(signal.SIGTERM)

    process = NotifyProcess(env, log)
    try:
        final_exit = asyncio.run(scenario(process))
        committed = {sink: asyncio.run(io.committed(f"{group}-notify-{sink}", topic)) for sink in SINKS}
        return CrashRun(seed, [v for _, v in stream], handled_before_kill, servers,
                        len(asyncio.run(io.read_all(dlq))), committed, asyncio.run(io.end_offsets(topic)),
                        final_exit, log)
    finally:
        process.kill_if_running()
        for server in (servers.slack, servers.hook, servers.github, servers.gitlab):
            server.stop()


@pytest.fixture(scope="module")
def crash_run(tansu: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> CrashRun:
    """Four SIGKILLs of `logagent notify` over 30 analyses of 6 failures, then a clean drain."""
    seed = random.SystemRandom().randrange(1 << 30)
    return run_crash_scenario(tansu, tmp_path_factory.mktemp("notify-crash"), kills=4, seed=seed)


def _ids(events: list[bytes]) -> list[str]:
    return [orjson.loads(event)["id"] for event in events]


def _issue_of(issues: list[StoredIssue], event: bytes) -> list[StoredIssue]:
    notice = parse_notice(event)
    assert notice is not None
    return [issue for issue in issues if issue_key(notice) in issue.labels]


class TestCrashRecovery:
    @pytest.mark.parametrize("tracker", ["github", "gitlab"])
    def test_one_issue_per_failure_and_each_analysis_exactly_once(self, crash_run: CrashRun, tracker: str) -> None:
        """No duplicate issue, no duplicate comment, no lost analysis, whatever the kills interrupted."""
        server = getattr(crash_run.servers, tracker)
        issues = server.issues(REPO)
        assert len(issues) == len(FAILURES), f"seed {crash_run.seed}: {len(issues)} issues"
        for event in crash_run.events:
            [issue] = _issue_of(issues, event)
            marker = f"logagent:analysis={orjson.loads(event)['id']} "
            copies = sum(marker in text for text in [issue.body, *issue.comments])
            assert copies == 1, f"seed {crash_run.seed}: {copies} copies of {marker}"
        assert sum(1 + len(issue.comments) for issue in issues) == len(crash_run.events)

    def test_slack_and_the_webhook_lost_nothing(self, crash_run: CrashRun) -> None:
        """Every analysis reached Slack and the webhook; replays repeat at most the one in flight per kill."""
        ids = set(_ids(crash_run.events))
        slack = Counter(id_ for message in crash_run.servers.slack.messages for id_ in ids
                        if id_ in orjson.dumps(message).decode())
        hook = Counter(message_id for message_id, _, _ in crash_run.servers.hook.deliveries)
        for name, seen in (("slack", slack), ("webhook", hook)):
            assert set(seen) == ids, f"seed {crash_run.seed}: {name} lost {len(ids - set(seen))}"
            assert sum(seen.values()) - len(ids) <= len(crash_run.handled_before_kill) + 1, (name, seen)

    def test_every_group_committed_to_the_end_and_nothing_was_given_up(self, crash_run: CrashRun) -> None:
        """Each sink's group is at the end of the topic; transient faults were retried, not dead-lettered."""
        ends = {p: end or None for p, end in crash_run.ends.items()}
        assert all(committed == ends for committed in crash_run.committed.values()), crash_run.committed
        assert crash_run.dlq == 0
        assert crash_run.final_exit == 0

    def test_kills_landed_while_deliveries_were_in_progress(self, crash_run: CrashRun) -> None:
        """Some kills came after deliveries had started, not all before the first one."""
        assert sum(1 for n in crash_run.handled_before_kill if n > 0) >= 2, crash_run.handled_before_kill
