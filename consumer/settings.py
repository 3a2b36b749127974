"""The one Settings object: built once in main() from LOGAGENT_* env vars (nested with `__`) and passed down."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


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


class HttpSettings(BaseModel):
    """The /metrics, /livez and /readyz endpoint."""

    host: str = "0.0.0.0"  # noqa: S104 - the pod's probes and Prometheus reach it from outside
    port: int = 9464


class OllamaSettings(BaseModel):
    """The LLM; without `url` the service runs in heuristic mode."""

    url: str | None = None
    model: str = "qwen2.5-coder:7b"
    embed_model: str = "all-minilm"
    timeout_s: float = 120.0


class Settings(BaseSettings):
    """All settings of Log Agent."""

    model_config = SettingsConfigDict(env_prefix="LOGAGENT_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Path("./.data")
    log_level: str = "INFO"
    kafka: KafkaSettings = KafkaSettings()
    window: WindowSettings = WindowSettings()
    input: InputSettings = InputSettings()
    pipeline: PipelineSettings = PipelineSettings()
    http: HttpSettings = HttpSettings()
    ollama: OllamaSettings = OllamaSettings()
