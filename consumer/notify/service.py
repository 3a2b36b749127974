"""`logagent notify`: the sinks built from the settings, one lane each, the DLQ producer and the endpoint.

It runs apart from the analysing service (its own process, pod and consumer groups), so it scales and
fails on its own. Secrets are read here, once, from their environment variable or mounted file.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path

from pydantic import SecretStr

from analysis.intake.redact import Redactor, redact_value
from consumer.http import serve_http
from consumer.kafka import EventSink, make_producer, start_client
from consumer.logs import configure_logging, log_fields
from consumer.notify.github import GitHubApi
from consumer.notify.gitlab import GitLabApi
from consumer.notify.lane import Sink, SinkLane
from consumer.notify.metrics import NotifyMetrics
from consumer.notify.render import SourceLinks, web_url
from consumer.notify.slack import SlackSink
from consumer.notify.tracker import IssueSink
from consumer.notify.transport import new_client
from consumer.notify.webhook import WebhookSink
from consumer.notify_settings import NotifySettings
from consumer.settings import Settings

__all__ = ["NotifyConfigError", "NotifyService", "run_notify", "source_links"]

log = logging.getLogger("logagent.notify")


class NotifyConfigError(ValueError):
    """Settings `logagent notify` cannot run with (no sink, an unreadable secret, a bad template)."""


def _secret(value: SecretStr | None, path: Path | None, what: str) -> str:
    """A secret from its setting (the environment) or its file; the file's surrounding whitespace goes."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise NotifyConfigError(f"cannot read {what} from {path}: {exc.strerror or exc}") from exc
    else:
        text = value.get_secret_value().strip() if value is not None else ""
    if not text:
        raise NotifyConfigError(f"{what} is empty")
    return text


def source_links(settings: Settings) -> SourceLinks:
    """Links into each server's repository, from the repository map the analysing service reads too."""
    try:
        servers = settings.repo_servers()
    except (OSError, ValueError) as exc:
        raise NotifyConfigError(f"cannot read the repository map: {exc}") from exc
    repos = {server: url for server, spec in servers.items() if (url := web_url(spec.url)) is not None}
    links = SourceLinks(repos, settings.notify.source_link, settings.notify.commit_link)
    try:
        links.check()
    except (KeyError, ValueError, IndexError) as exc:
        raise NotifyConfigError(f"bad link template: {exc!r}") from exc
    return links


def _secrets(notify: NotifySettings) -> dict[str, str]:
    """Every secret the enabled sinks need, read now: a missing file fails before anything starts."""
    wanted = {
        "slack.webhook_url": (notify.slack, notify.slack.webhook_url, notify.slack.webhook_url_file),
        "webhook.url": (notify.webhook, notify.webhook.url, notify.webhook.url_file),
        "webhook.secret": (notify.webhook, notify.webhook.secret, notify.webhook.secret_file),
        "github.token": (notify.github, notify.github.token, notify.github.token_file),
        "gitlab.token": (notify.gitlab, notify.gitlab.token, notify.gitlab.token_file),
    }
    return {name: _secret(value, path, f"notify.{name}") for name, (sink, value, path) in wanted.items()
            if sink.enabled}


def _build_sinks(notify: NotifySettings, links: SourceLinks, stack: AsyncExitStack) -> list[Sink]:
    """One sink per enabled group; their HTTP clients close with `stack`."""
    secrets = _secrets(notify)
    sinks: list[Sink] = []
    if notify.slack.enabled:
        client = new_client(notify.timeout_s)
        stack.push_async_callback(client.aclose)
        sinks.append(SlackSink(client, secrets["slack.webhook_url"], links))
    if notify.webhook.enabled:
        client = new_client(notify.timeout_s)
        stack.push_async_callback(client.aclose)
        sinks.append(WebhookSink(client, secrets["webhook.url"], secrets["webhook.secret"]))
    if notify.github.enabled:
        gh = notify.github
        github = GitHubApi(gh.api_url, secrets["github.token"], notify.timeout_s)
        stack.push_async_callback(github.aclose)
        sinks.append(IssueSink(github, gh.repos, gh.repo, gh.labels, links, reopen=gh.reopen))
    if notify.gitlab.enabled:
        gl = notify.gitlab
        gitlab = GitLabApi(gl.api_url, secrets["gitlab.token"], notify.timeout_s)
        stack.push_async_callback(gitlab.aclose)
        sinks.append(IssueSink(gitlab, gl.projects, gl.project, gl.labels, links, reopen=gl.reopen))
    return sinks


def check_settings(settings: Settings) -> None:
    """Fail now, with a message the user can act on, on settings notify cannot run with."""
    if not settings.notify.sinks():
        raise NotifyConfigError("no sink is enabled: set LOGAGENT_NOTIFY__SLACK__ENABLED=true (or WEBHOOK, "
                                "GITHUB, GITLAB) with its secret")
    source_links(settings)
    _secrets(settings.notify)


class NotifyHealth:
    """`/readyz` of the notify process: ready once every lane's consumer runs."""

    def __init__(self) -> None:
        self.lanes: list[SinkLane] = []

    def checks(self) -> dict[str, bool]:
        """One check per sink: its consumer started and joined its group."""
        return {f"{lane.sink.name}_consuming": lane.started for lane in self.lanes} or {"lanes": False}


class NotifyService:
    """Runs one lane per enabled sink until stopped; a lane's failure stops the process loudly."""

    def __init__(self, settings: Settings, metrics: NotifyMetrics | None = None,
                 health: NotifyHealth | None = None) -> None:
        check_settings(settings)
        self._settings = settings
        self.metrics = metrics if metrics is not None else NotifyMetrics()
        self.health = health if health is not None else NotifyHealth()
        self.lanes: list[SinkLane] = []

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        """Outcomes so far, by sink."""
        return {lane.sink.name: dict(lane.stats.outcomes) for lane in self.lanes}

    def group_id(self, sink: str) -> str:
        """The consumer group of one sink's lane."""
        base = self._settings.notify.group_id or f"{self._settings.kafka.group_id}-notify"
        return f"{base}-{sink}"

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until `stop` is set."""
        settings = self._settings
        async with AsyncExitStack() as stack:
            sinks = _build_sinks(settings.notify, source_links(settings), stack)
            producer = make_producer(settings.kafka)
            # A broker it cannot reach at start is one line naming the setting, exit 2, as for `logagent run`
            # (it used to retry silently for ever); the lanes' consumers ride out later outages.
            await start_client(producer, settings.kafka)
            stack.push_async_callback(producer.stop)
            dlq = EventSink(producer)
            redactor = Redactor(settings.redaction)
            for sink in sinks:
                kafka = settings.kafka.model_copy(update={
                    "input_topic": settings.kafka.output_topic, "group_id": self.group_id(sink.name)})
                route = settings.notify.sinks()[sink.name]
                self.lanes.append(SinkLane(sink, route, kafka, settings.notify, dlq, self.metrics, redactor))
            self.health.lanes = self.lanes
            log.info("notify started", extra=log_fields(sinks=[sink.name for sink in sinks],
                                                        topic=settings.kafka.output_topic))
            async with asyncio.TaskGroup() as tasks:
                for lane in self.lanes:
                    tasks.create_task(lane.run(stop))


def run_notify(settings: Settings) -> int:
    """`logagent notify`: deliver until SIGTERM or SIGINT, then stop cleanly and return 0."""
    # Logs leave the process too: every value through the same redaction as the analysing service's.
    redactor = Redactor(settings.redaction)
    redactor.ready()  # a machine's first start compiles the prefilter: a failure stops the start here
    configure_logging(settings.log_level, partial(redact_value, redactor=redactor))
    return asyncio.run(_serve(settings))


async def _serve(settings: Settings) -> int:
    service = NotifyService(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with serve_http(settings.http.host, settings.http.port, service.metrics, service.health):
        await service.run(stop)
    return 0
