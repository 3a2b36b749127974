"""The notify tests' setting: the four protocol servers, Settings pointing every sink at them, and a
runner of the real `NotifyService` on the session's tansu broker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.code.repo import RepoSpec
from consumer.notify import NotifyService
from consumer.notify_settings import NotifySettings
from consumer.settings import Settings
from demo.broker import create_topics
from tests.github_server import GitHubServer
from tests.gitlab_server import GitLabServer
from tests.slack_server import SlackWebhook
from tests.webhook_server import WebhookReceiver

REPO = "acme/checkout"
SOURCE_URL = "https://git.example.com/acme/checkout-service.git"


@dataclass
class Rig:
    """Servers and the settings that reach them."""

    settings: Settings
    slack: SlackWebhook
    hook: WebhookReceiver
    github: GitHubServer
    gitlab: GitLabServer

    @property
    def topic(self) -> str:
        """The analyses topic notify reads."""
        return self.settings.kafka.output_topic


def notify_settings(base: Settings, secrets_dir: Path, slack: SlackWebhook, hook: WebhookReceiver,
                    github: GitHubServer, gitlab: GitLabServer, **overrides: Any) -> Settings:
    """`base` with every sink on: Slack's URL and GitLab's token from files, the others from values
    (as the environment gives them). `overrides` replace whole sink groups or notify fields."""
    secrets_dir.mkdir(parents=True, exist_ok=True)
    (secrets_dir / "slack-url").write_text(slack.webhook_url + "\n")
    (secrets_dir / "gitlab-token").write_text(gitlab.token)
    dlq = f"notify-dlq-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topics(base.kafka.bootstrap_servers, [dlq], 1))
    fast = {"enabled": True}
    notify = NotifySettings.model_validate({
        "dlq_topic": dlq, "timeout_s": 2.0, "retry_initial_s": 0.05, "retry_max_s": 0.3, "retry_attempts": 4,
        "slack": {**fast, "webhook_url_file": str(secrets_dir / "slack-url")},
        "webhook": {**fast, "url": hook.hook_url, "secret": hook.secret},
        "github": {**fast, "api_url": github.url, "repo": REPO, "token": github.token},
        "gitlab": {**fast, "api_url": gitlab.api_url, "project": REPO,
                   "token_file": str(secrets_dir / "gitlab-token")},
        **overrides,
    })
    repo = base.repo.model_copy(update={"servers": {"checkout-service": RepoSpec(url=SOURCE_URL)}})
    return base.model_copy(update={"notify": notify, "repo": repo})


@contextmanager
def rig(settings_factory: Callable[..., Settings], tmp_path: Path, analyses_partitions: int = 1,
        **overrides: Any) -> Iterator[Rig]:
    """All four servers running, and Settings on fresh topics that reach them; the analyses topic notify
    reads has `analyses_partitions` partitions (replicas of one lane share them)."""
    with ExitStack() as stack:
        slack = stack.enter_context(SlackWebhook())
        hook = stack.enter_context(WebhookReceiver())
        github = stack.enter_context(GitHubServer((REPO,)))
        gitlab = stack.enter_context(GitLabServer((REPO,)))
        base = settings_factory(partitions=2)
        if analyses_partitions != 1:
            analyses = f"analyses-{uuid.uuid4().hex[:10]}"
            asyncio.run(create_topics(base.kafka.bootstrap_servers, [analyses], analyses_partitions))
            base = base.model_copy(update={"kafka": base.kafka.model_copy(update={"output_topic": analyses})})
        settings = notify_settings(base, tmp_path / "secrets", slack, hook, github, gitlab, **overrides)
        yield Rig(settings, slack, hook, github, gitlab)


def handled(service: NotifyService, sink: str) -> int:
    """Analyses one lane has finished with (any outcome)."""
    return sum(next(lane for lane in service.lanes if lane.sink.name == sink).stats.outcomes.values())


def all_handled(service: NotifyService, count: int) -> Callable[[], bool]:
    """A `done` condition: every lane finished `count` records."""
    return lambda: len(service.lanes) > 0 and all(sum(lane.stats.outcomes.values()) >= count
                                                  for lane in service.lanes)
