"""Settings of `logagent notify` (`LOGAGENT_NOTIFY__…`): which sinks get analyses, and how deliveries retry.

Composed into `consumer.settings.Settings` as its `notify` group.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, model_validator

from analysis.report import Status

__all__ = ["GitHubSinkSettings", "GitLabSinkSettings", "IssueSinkSettings", "NotifySettings", "NotifySinkSettings",
           "SlackSinkSettings", "WebhookSinkSettings"]  # fmt: skip


_ALL_STATUSES: list[Status] = ["analyzed", "recurrence", "heuristic", "failed"]


class NotifySinkSettings(BaseModel):
    """What every sink shares: whether it runs, which analyses it takes (its route), and how fast."""

    enabled: bool = Field(False, description="Deliver to this sink.")
    servers: list[str] = Field(default_factory=list, description="Server ids (globs) routed here; empty: all.")
    tenants: list[str] = Field(default_factory=list, description="Tenants routed here; empty: all.")
    statuses: list[Status] = Field(default_factory=lambda: list(_ALL_STATUSES),
                                   description="Analysis statuses routed here.")
    min_confidence: float = Field(0.0, ge=0.0, le=1.0, description="Analyses less confident are not sent.")
    min_count: int = Field(1, ge=1, description="Bursts with fewer events are not sent.")
    rate_per_minute: float = Field(0.0, ge=0.0, description="Most deliveries a minute (0: no limit); "
                                                            "over it, deliveries wait their turn.")
    rate_burst: int = Field(5, ge=1, description="Deliveries allowed at once before the rate applies.")

    def _require(self, name: str, *secrets: object) -> None:
        if self.enabled and all(secret is None for secret in secrets):
            raise ValueError(f"an enabled sink needs {name} or {name}_file")


class SlackSinkSettings(NotifySinkSettings):
    """A Slack incoming webhook; its URL is a secret (from the environment or a mounted file)."""

    webhook_url: SecretStr | None = Field(None, description="Incoming-webhook URL (secret).")
    webhook_url_file: Path | None = Field(None, description="File holding the incoming-webhook URL.")

    @model_validator(mode="after")
    def _secret_present(self) -> SlackSinkSettings:
        self._require("webhook_url", self.webhook_url, self.webhook_url_file)
        return self


class WebhookSinkSettings(NotifySinkSettings):
    """A generic HTTPS endpoint receiving the CloudEvent, signed with HMAC-SHA256 (Standard Webhooks)."""

    url: SecretStr | None = Field(None, description="Endpoint URL (secret: it may carry a token).")
    url_file: Path | None = Field(None, description="File holding the endpoint URL.")
    secret: SecretStr | None = Field(None, description="HMAC-SHA256 signing key; `whsec_` + base64 is decoded.")
    secret_file: Path | None = Field(None, description="File holding the signing key.")

    @model_validator(mode="after")
    def _secrets_present(self) -> WebhookSinkSettings:
        self._require("url", self.url, self.url_file)
        self._require("secret", self.secret, self.secret_file)
        return self


class IssueSinkSettings(NotifySinkSettings):
    """An issue tracker: one issue per (server, fingerprint), later analyses add comments."""

    token: SecretStr | None = Field(None, description="API token (secret).")
    token_file: Path | None = Field(None, description="File holding the API token.")
    labels: list[str] = Field(default_factory=lambda: ["logagent"], description="Labels on every issue.")
    reopen: bool = Field(True, description="Reopen a closed issue when its failure comes back.")

    @model_validator(mode="after")
    def _token_present(self) -> IssueSinkSettings:
        self._require("token", self.token, self.token_file)
        return self


class GitHubSinkSettings(IssueSinkSettings):
    """GitHub issues (REST API v3)."""

    api_url: str = Field("https://api.github.com", description="REST API root (GitHub Enterprise: .../api/v3).")
    repo: str | None = Field(None, description="owner/name receiving the issues of every server.")
    repos: dict[str, str] = Field(default_factory=dict, description="Server id -> owner/name, over `repo`.")


class GitLabSinkSettings(IssueSinkSettings):
    """GitLab issues (REST API v4)."""

    api_url: str = Field("https://gitlab.com/api/v4", description="REST API root of the GitLab instance.")
    project: str | None = Field(None, description="Project id or path (group/name) for every server.")
    projects: dict[str, str] = Field(default_factory=dict, description="Server id -> project, over `project`.")


class NotifySettings(BaseModel):
    """`logagent notify`: which sinks get analyses, and how deliveries retry."""

    group_id: str | None = Field(None, description="Consumer group prefix; default <kafka.group_id>-notify.")
    dlq_topic: str = Field("analyses.notify.dlq", description="Where given-up deliveries go, with the reason.")
    source_link: str = Field("{repo}/blob/{commit}/{path}#L{line}",
                             description="Link to a culprit line; {repo} is the server's web URL.")
    commit_link: str = Field("{repo}/commit/{commit}", description="Link to a commit.")
    timeout_s: float = Field(10.0, gt=0, description="Timeout of one HTTP request to a sink.")
    retry_initial_s: float = Field(1.0, gt=0, description="First backoff after a retriable failure.")
    retry_max_s: float = Field(30.0, gt=0, description="Cap of the exponential backoff (full jitter).")
    retry_attempts: int = Field(6, ge=1, description="Tries per delivery before it goes to the DLQ.")
    retry_after_max_s: float = Field(900.0, gt=0, description="Longest Retry-After honoured.")
    slack: SlackSinkSettings = SlackSinkSettings()
    webhook: WebhookSinkSettings = WebhookSinkSettings()
    github: GitHubSinkSettings = GitHubSinkSettings()
    gitlab: GitLabSinkSettings = GitLabSinkSettings()

    def sinks(self) -> dict[str, NotifySinkSettings]:
        """The enabled sinks by name."""
        every: dict[str, NotifySinkSettings] = {
            "slack": self.slack, "webhook": self.webhook, "github": self.github, "gitlab": self.gitlab}
        return {name: sink for name, sink in every.items() if sink.enabled}
