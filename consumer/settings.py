"""The one Settings object: built once in main() from LOGAGENT_* env vars (nested with `__`), passed down."""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from analysis.agent.loop import AgentConfig
from analysis.code.repo import RepoConfig, RepoSpec
from analysis.code.tools import ToolLimits
from analysis.intake.redact import RedactionConfig
from store import MemoryConfig


class KafkaSettings(BaseModel):
    """Where to read errors and write events."""

    bootstrap_servers: str = "127.0.0.1:9092"
    input_topic: str = "errors"
    output_topic: str = "analyses"
    dlq_topic: str = "errors.dlq"
    review_topic: str = "analyses.review"
    feedback_topic: str = "analyses.feedback"
    group_id: str = "logagent"
    client_id: str = "logagent"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 30_000
    max_poll_records: int = 500
    commit_interval_s: float = Field(1.0, description="How often safe offsets are committed.")
    isolation_level: str = Field("read_committed", description="read_committed skips aborted transactions.")
    linger_ms: int = Field(5, description="How long the producer waits to batch events.")
    enable_idempotence: bool = Field(
        False, description="Idempotent producer; Kafka supports it, the embedded tansu does not."
    )
    dlq_error_max_chars: int = Field(512, description="Cap on the `error` header of a DLQ message.")
    dlq_max_value_bytes: int = Field(
        512 * 1024, description="A larger bad message is cut to this in the DLQ (headers say so, with its sha256)."
    )


class WindowSettings(BaseModel):
    """How bursts of the same failure are grouped."""

    quiet_s: float = Field(30.0, description="A burst closes after this long without a new event.")
    max_length_s: float = Field(300.0, description="A burst closes this long after its first event.")
    max_open: int = Field(10_000, description="Open bursts cap; past it the oldest closes early.")
    max_samples: int = Field(20, description="Events kept per burst for analysis and the event's samples.")


class InputSettings(BaseModel):
    """Decoding limits and in-app rules for untrusted input."""

    max_message_bytes: int = 1_048_576
    max_depth: int = 64
    commit_field: str | None = Field(None, description="Extra dotted field naming the deployed commit.")
    in_app_prefixes: list[str] = Field(default_factory=list, description="Module/package prefixes in-app.")


class PipelineSettings(BaseModel):
    """Concurrency and backpressure of analysis."""

    max_inflight: int = Field(4, description="Bursts analysed at once.")
    queue_size: int = Field(64, description="Closed bursts waiting; when full, fetching pauses.")
    resume_at: int = Field(16, description="Fetching resumes when the queue is back at this size.")
    poll_timeout_ms: int = Field(200, description="Longest wait for new messages before windows are checked.")
    shutdown_grace_s: float = Field(20.0, description="On SIGTERM, how long in-flight analyses may finish.")
    retry_initial_s: float = Field(0.5, description="First backoff after a retriable failure.")
    retry_max_s: float = Field(30.0, description="Cap of the exponential backoff (full jitter).")
    retry_attempts: int = Field(
        5, ge=1, description="Analysis attempts on retriable errors before a `failed` event is published."
    )
    event_source: str | None = Field(None, description="CloudEvents `source`; default logagent/<group id>.")


class HttpSettings(BaseModel):
    """The /metrics, /livez and /readyz endpoint."""

    host: str = "0.0.0.0"  # noqa: S104 - the pod's probes and Prometheus reach it from outside
    port: int = 9464


class OllamaSettings(BaseModel):
    """The LLM; without `url` the service runs in heuristic mode (no LLM calls)."""

    url: str | None = Field(None, description="Ollama base URL, e.g. http://ollama:11434.")
    attempts: int = Field(2, ge=1, description="Tries per analysis before falling back to heuristic.")
    failure_threshold: int = Field(3, ge=1, description="Consecutive failures that open the circuit.")
    reset_after_s: float = Field(30.0, description="How long the circuit stays open before a probe.")


class Settings(BaseSettings):
    """All settings of Log Agent."""

    model_config = SettingsConfigDict(env_prefix="LOGAGENT_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Field(Path("./.data"), description="Memory and repo cache live here unless set apart.")
    log_level: str = "INFO"
    scope: str = Field("default", description="Memory scope of this deployment (TTLs are per scope).")
    memory_maintenance_s: float = Field(3600.0, gt=0, description="How often expired memory is compacted away.")
    ollama_url: str | None = Field(None, description="Shorthand for ollama.url (LOGAGENT_OLLAMA_URL).")
    repos_file: Path | None = Field(
        None, description="JSON file mapping server id to {url, branch, token_env, token_file}."
    )
    kafka: KafkaSettings = KafkaSettings()
    window: WindowSettings = WindowSettings()
    input: InputSettings = InputSettings()
    pipeline: PipelineSettings = PipelineSettings()
    http: HttpSettings = HttpSettings()
    ollama: OllamaSettings = OllamaSettings()
    agent: AgentConfig = AgentConfig()
    tools: ToolLimits = ToolLimits()
    redaction: RedactionConfig = RedactionConfig()
    repo: RepoConfig = RepoConfig(cache_dir=Path())
    memory: MemoryConfig = MemoryConfig(uri="")

    @model_validator(mode="after")
    def _derive(self) -> Settings:
        """Fill what follows from other settings: the shorthand URL and paths under `data_dir`."""
        if self.ollama_url and not self.ollama.url:
            self.ollama = self.ollama.model_copy(update={"url": self.ollama_url})
        if "cache_dir" not in self.repo.model_fields_set or self.repo.cache_dir == Path():
            self.repo = self.repo.model_copy(update={"cache_dir": self.data_dir / "repos"})
        if "uri" not in self.memory.model_fields_set or not self.memory.uri:
            self.memory = self.memory.model_copy(update={"uri": str(self.data_dir / "memory")})
        return self

    def repo_servers(self) -> dict[str, RepoSpec]:
        """The server → repository map: `repo.servers` plus the entries of `repos_file` (file wins)."""
        servers = dict(self.repo.servers)
        if self.repos_file is not None:
            raw = orjson.loads(self.repos_file.read_bytes())
            servers.update({name: RepoSpec.model_validate(spec) for name, spec in raw.items()})
        return servers
